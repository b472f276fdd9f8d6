// A Lua script embedded at build time (see cmake/dlock_embed_lua.cmake): its name, the SHA1
// Redis knows it by, and its text. One `.lua` file per script in src/scripts/lua/, each headed by
// its contract (KEYS, ARGV, return value).
#pragma once

#include <string_view>

namespace dlock::scripts {

struct script {
  std::string_view name;
  std::string_view sha1;
  std::string_view text;
};

// One declaration per file in src/scripts/lua/.
extern const script mutex_acquire;
extern const script mutex_release;
extern const script lock_renew;
extern const script fair_acquire;
extern const script fair_release;
extern const script read_acquire;
extern const script read_release;
extern const script write_acquire;
extern const script write_release;
extern const script mutex_force_unlock;
extern const script lock_inspect;
extern const script permit_acquire;
extern const script permit_release;
extern const script counting_acquire;
extern const script semaphore_update;
extern const script latch_check;
extern const script latch_update;
extern const script multi_acquire;
extern const script fencing_floor;

}  // namespace dlock::scripts
