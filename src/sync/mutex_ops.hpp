// The algorithms of dlock::mutex, shared by its thread-owned and lease-owned forms. All run on
// the client's I/O thread and complete there.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include "dlock/config.hpp"
#include "dlock/detail/completion.hpp"
#include "dlock/error.hpp"
#include "runtime/hold.hpp"
#include "transport/pipeline.hpp"

namespace dlock::detail {

class client_impl;
using clock = std::chrono::steady_clock;

// errc::invalid_argument for an empty name, one longer than config::max_name_length, or one
// whose derived keys cannot share its cluster slot (keys::same_slot: `a{b`, `x{}y`).
std::error_code validate_name(const config& cfg, const std::string& name);
// The longest lease accepted: a year. Longer ones overflow Redis' PEXPIRE or the steady clock's
// arithmetic.
inline constexpr std::chrono::milliseconds max_lease = std::chrono::hours{24 * 365};
// Waits this long or longer mean "as long as it takes" (now + wait would overflow).
inline constexpr std::chrono::milliseconds forever = std::chrono::hours{24 * 365 * 100};

// Runs the std::error_code form `f` of a call and throws lock_error on an error (the throwing
// forms of the synchronizers' queries).
template <class T, class F>
T throwing(F&& f) {
  std::error_code ec;
  T v = f(ec);
  throw_if(ec);
  return v;
}

// errc::invalid_argument for a lease that is zero, negative or longer than max_lease.
std::error_code validate_lease(std::chrono::milliseconds lease);

// The deadline of a wait from now: nullopt for none (no wait given, or one of `forever` or
// more); a negative wait is a wait of zero (one try).
std::optional<clock::time_point> deadline_after(std::optional<std::chrono::milliseconds> wait);

// Cancels the operation it was returned for; any thread, any number of times; after the
// operation completed it does nothing.
using canceller = std::function<void()>;

// Acquires `hold` (count 0: first acquisition; else one more re-entry) by `deadline` (nullopt:
// wait as long as it takes; now or earlier: one try). Completes with the hold, its count
// incremented and (first time) its token set and its lease tracked by the watchdog; or with
// errc::timeout when not acquired in time, errc::lease_lost when a re-entry finds the hold gone,
// asio::error::operation_aborted when cancelled, or the error that stopped it. Thread-safe.
canceller start_acquire(client_impl& c, std::shared_ptr<hold_state> hold,
                        std::optional<clock::time_point> deadline,
                        completion<std::shared_ptr<hold_state>> done);

// Releases one hold of `hold`. Completes with {} (one hold released; `true` when it was the last
// and the lock is free or handed on), errc::lease_lost (the lease was lost before: nothing of
// anyone else's was touched), errc::not_owner (no hold to release), or a connection error after
// which calling again is safe (the release is idempotent). Thread-safe.
void start_release(client_impl& c, std::shared_ptr<hold_state> hold, completion<bool> done);

// Deletes the lock whoever holds it and wakes its waiters. Completes with whether it was held.
void start_force_unlock(client_impl& c, const std::string& name, lock_kind kind,
                        completion<bool> done);

// Every key and channel the scripts of one lock kind use for lock `name` (dlock/keys.hpp).
struct lock_keys {
  lock_keys(const config& cfg, const std::string& lock_name, lock_kind kind = lock_kind::mutex,
            const std::string& owner = {});
  std::string name;
  // mutex: dlock's waiter queue and records; fair: Redisson's queue list and deadlines zset;
  // read/write: the waiting writers (queue); permits: the leased ids ({name}:timeout, queue);
  // counting: the acquisition's marker (records).
  std::string queue, records;
  std::string yield, dlock_channel;        // mutex only
  std::string channel;                     // Redisson's unlock channel of the kind
  std::string hold_prefix, tag;            // read/write: the owner's hold keys' prefix, `{name}`
  std::string slot_counter, lock_counter;  // empty: fencing off
};

// Gives back, in the background, the acquisition that would have left `owner` with `have` holds,
// if it was applied (and leaves the queue with `ticket`): resent while the outcome stays unknown,
// until `until` (the lease of the last attempt has ended by then). A later acquisition by the
// same owner of the same name stops it (its own attempt settles the count). Strand only.
void give_back(client_impl& c, std::shared_ptr<hold_state> hold, std::uint32_t have,
               std::string ticket, clock::time_point until);

}  // namespace dlock::detail
