// The algorithms of dlock::mutex, shared by its thread-owned and lease-owned forms. All run on
// the client strand and complete there.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include "dlock/config.hpp"
#include "dlock/detail/completion.hpp"
#include "runtime/hold.hpp"
#include "transport/pipeline.hpp"

namespace dlock::detail {

class client_impl;
using clock = std::chrono::steady_clock;

// errc::invalid_argument for an empty name or one longer than config::max_name_length.
std::error_code validate_name(const config& cfg, const std::string& name);
// The longest lease accepted: a year (the URI's watchdog lease has the same cap). Longer ones
// overflow Redis' PEXPIRE (which would refuse it after the hash was written) or the steady
// clock's arithmetic.
inline constexpr std::chrono::milliseconds max_lease = std::chrono::hours{24 * 365};
// Waits this long or longer mean "as long as it takes" (now + wait would overflow).
inline constexpr std::chrono::milliseconds forever = std::chrono::hours{24 * 365 * 100};

// errc::invalid_argument for a lease that is zero, negative or longer than max_lease.
std::error_code validate_lease(std::chrono::milliseconds lease);

// The deadline of a wait from now: nullopt for none (no wait given, or one of `forever` or
// more); a negative wait is a wait of zero (one try).
std::optional<clock::time_point> deadline_after(std::optional<std::chrono::milliseconds> wait);

// Acquires `hold` (count 0: first acquisition; else one more re-entry) by `deadline` (nullopt:
// wait as long as it takes; now or earlier: one try). Completes with the hold, its count
// incremented and (first time) its token set and its lease tracked by the watchdog; or with
// errc::timeout when not acquired in time, errc::lease_lost when a re-entry finds the hold gone,
// or the error that stopped it (wrong_type, out_of_memory, no_permission, shutdown, ...).
void start_acquire(client_impl& c, std::shared_ptr<hold_state> hold,
                   std::optional<clock::time_point> deadline,
                   completion<std::shared_ptr<hold_state>> done);

// The same from a blocking call on its own thread (config::caller_io): the first attempt goes
// out on the caller's channel when it can, and a clean acquisition completes on the calling
// thread; the rest as start_acquire. Returns true when that attempt went out and the op goes on
// on the strand (the lock was held, or the outcome is unclear): the caller most likely waits.
bool start_acquire_from_caller(client_impl& c, std::shared_ptr<hold_state> hold,
                               std::optional<clock::time_point> deadline,
                               completion<std::shared_ptr<hold_state>> done);

// Releases one hold of `hold`. Completes with {} (one hold released; `true` when it was the last
// and the lock is free), errc::lease_lost (the lease was lost before: nothing of anyone else's
// was touched), errc::not_owner (no hold to release), or a connection error after which
// calling again is safe (the release is idempotent).
// `resends`: sends of this release already made whose replies were lost; `releasing`: the
// caller set hold_state::releasing for this release already.
void start_release(client_impl& c, std::shared_ptr<hold_state> hold, completion<bool> done,
                   int resends = 0, bool releasing = false);
// The same from a blocking unlock on its own thread (config::caller_io): sent on the caller's
// channel when it can, completing on the calling thread; the rest as start_release.
void start_release_from_caller(client_impl& c, std::shared_ptr<hold_state> hold,
                               completion<bool> done);

// Deletes the lock whoever holds it and wakes a waiter. Completes with whether it was held.
void start_force_unlock(client_impl& c, const std::string& name, completion<bool> done);

// The keys the mutex scripts touch beside the lock hash `name` (dlock/keys.hpp), derived once.
// `name` views the caller's string (a hold's name), which must outlive this.
struct lock_keys {
  explicit lock_keys(const std::string& lock_name);
  std::string_view name;
  std::string channel, queue, expiry;
};

// The fencing counters an acquisition of `name` declares (config::fencing, mutex_acquire.lua):
// `advanced`, the one it sets (KEYS[2]): the shared counter, or the lock's own (per_lock); and
// `other`, the other kind, which it reads too and sets only if it exists (KEYS[5]). With
// fencing off `advanced` is the lock hash itself and `other` empty: the script touches no
// counter, and an ACL user needs no right to one.
struct fencing_counters {
  fencing_counters(const config& cfg, std::string_view name);
  std::string advanced, other;
};

// How this client fences, as the scripts spell it for grants (mutex_acquire.lua's ARGV[9]):
// "n" none, "s" the shared counter, "l" the lock's own; empty when it neither takes nor makes
// grants (config::grants off, or no hand-off window).
std::string_view grant_mode(const config& cfg);

// The EVALSHA request of mutex_release.lua with these arguments (see send_mutex_release).
std::string encode_mutex_release(const config& cfg, const lock_keys& k, std::string_view lease,
                                 std::string_view owner, std::uint32_t have,
                                 std::string_view leaving_ticket);

// Sends mutex_release.lua (with the client's hand-off window): one hold of `owner`, which has
// `have` holds now (a partial release resets the lease to `lease`); or, with `leaving_ticket`,
// that waiter's leave from the queue (the hold arguments are then ignored).
void send_mutex_release(client_impl& c, const lock_keys& k, std::string_view lease,
                        std::string_view owner, std::uint32_t have,
                        std::string_view leaving_ticket, transport::reply_handler done);

}  // namespace dlock::detail
