// The lock a dlock_fault_worker (fault_worker.cpp) runs its sections under: any kind of dlock's
// (`--kind`), or a deliberately broken lock (`--lock`, broken_lock.hpp).
//
//   --kind mutex     dlock::mutex (the default)
//   --kind fair      dlock::fair_mutex
//   --kind read      dlock::shared_mutex's read side: its sections record "mode":"read" and
//                    only read the resource (a reader does not write)
//   --kind write     dlock::shared_mutex's write side: "mode":"write", reads and writes
//   --kind broken-read-as-write
//                    a broken worker, for the checker's self-check: it takes the read side but
//                    treats that as permission to write exclusively — its sections record
//                    "mode":"write" (what it believes it holds) and write
//   --kind permits   one permit of a dlock::leased_semaphore of --permits N: its sections record
//                    "mode":"permit" and the limit N, carry token 0 (permits have no fencing
//                    token) and only read the resource (N holders share it)
//   --kind broken-permits-adds-one
//                    a broken worker, for the checker's self-check: as `permits`, but it behaves
//                    as if N were N + 1 — it adds a permit to the semaphore before taking one
//                    (and takes it away after its release), so it gets in beside N holders
//   --kind red       dlock::red_lock of the name over --servers P1,P2,P3[,...] (ports on the lock
//                    URL's host, each client configured as the lock URL): one lock, one
//                    resource, the quorum's fencing token; each enter's detail lists the
//                    members' own tokens ("member tokens a,b,c", 0 where not acquired)
//   --kind multi     dlock::multi_lock of --names A,B[,C] (dlock::mutex members on the lock URL's
//                    server, or "A@P" on port P's): each member is a lock of the history and
//                    guards a resource of its own (named as given, "A" or "A@P"), accessed with
//                    that member's fencing token — as multi_lease says to (there is no one token
//                    for the set: members' counters are independent)
//   --kind broken-multi-first-only
//                    a broken worker, for the checker's self-check: as `multi`, but it takes the
//                    first member alone and claims them all (token 0 for those it did not take),
//                    as a multi-lock that stops at a partial acquisition would
// The lock kinds are dlock::detail::lock_base on one lock name, the permit kinds a
// dlock::leased_semaphore, the group kinds worker_group_lock.cpp's; the broken locks are mutexes.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "dlock/client.hpp"
#include "dlock/config.hpp"

namespace dlock::faults {

// What the worker's section loop needs from a lock: dlock's lease, or a broken lock.
class held_lock {
 public:
  virtual ~held_lock() = default;
  // errc::timeout when not acquired within `wait`.
  virtual std::error_code acquire(std::chrono::milliseconds wait, std::uint64_t& token) = 0;
  // True once the holder must stop: the lease-lost signal, or no time left.
  virtual bool lost() const = 0;
  virtual std::int64_t left_ms() const = 0;  // -1 unknown
  // Sleeps `d`, or less if the lease is lost first.
  virtual void hold_for(std::chrono::milliseconds d) = 0;
  // `fn` runs (on any thread) when the lease-lost signal fires; at most once per acquisition.
  virtual void on_lost(std::function<void()> fn) = 0;
  virtual std::error_code release() = 0;
  // The history's "mode" of a hold ("" exclusive, "read", "write"), and whether the holder
  // writes the resource (readers do not).
  virtual std::string mode() const { return {}; }
  virtual bool writes() const { return true; }
  // A semaphore's permits N (the history's "lim"); 0 for a lock.
  virtual std::int64_t limit() const { return 0; }

  // What a section holds: one lock ("" in the history: the worker's --name) with the token
  // acquire() gave, for every kind but multi, whose members are each a lock with its own token
  // (and its own resource). Read after a successful acquire().
  struct part {
    std::string lock;
    std::uint64_t token = 0;
  };
  virtual std::vector<part> parts(std::uint64_t token) const { return {{"", token}}; }
  // Recorded as the enter's detail (red: the members' own tokens).
  virtual std::string enter_detail() const { return {}; }
  // Stops the clients it made itself (the group kinds'): their I/O threads run lost callbacks
  // that refer to the worker, which goes first.
  virtual void shutdown() {}
};

// The lock `lock` (dlock_fault_worker's --lock: "dlock" or a broken lock's name) of kind `kind`
// (--kind) on `name`, with `lease` (0: dlock's watchdog lease; a broken lock needs one) and, for
// the permit kinds, `permits` (--permits). Null, with `error` set, for a name, kind, lease or
// permits that do not go together.
std::unique_ptr<held_lock> make_held_lock(dlock::client& c, const std::string& name,
                                          const std::string& lock, const std::string& kind,
                                          std::chrono::milliseconds lease, std::int64_t permits,
                                          std::string& error);

// Whether --kind names a group kind (make_group_lock's, not make_held_lock's).
bool is_group_kind(const std::string& kind);
// --kind red (a red_lock of `name` over `servers`, "P1,P2,P3"), multi or broken-multi-first-only
// (a multi_lock of `names`, "A,B@P2"); `c` is the lock URL's client and `cfg` its configuration,
// copied with another port for each other server. Null, with `error` set, for lists that do not
// parse.
std::unique_ptr<held_lock> make_group_lock(dlock::client& c, const dlock::config& cfg,
                                           const std::string& name, const std::string& kind,
                                           const std::string& servers, const std::string& names,
                                           std::chrono::milliseconds lease, std::string& error);

}  // namespace dlock::faults
