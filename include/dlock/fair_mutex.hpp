// dlock/fair_mutex.hpp — Redisson's RFairLock in C++: dlock::mutex served in arrival order.
//
// The same API and guarantees as dlock::mutex (Lockable, TimedLockable, stop_token waits, async
// forms with completion tokens and cancellation, leases renewed by the watchdog, fencing tokens,
// lease_lost), with waiters served strictly first come, first served.
//
//   dlock::fair_mutex m{client, "reports"};
//   std::lock_guard guard{m};
//
// Layout (Redisson's, so Java and C++ processes share one queue): the lock hash `name` as
// RLock's; the list redisson_lock_queue:{name} of waiting owners in arrival order; the sorted
// set redisson_lock_timeout:{name} of each waiter's deadline. A waiter hears its turn on its own
// channel redisson_lock__channel:{name}:<owner> (all of a client's waiters share its one pub/sub
// connection), and re-checks at least every config::wait_recheck.
// Order. Only the queue's head may take a free lock; a newcomer queues behind those waiting.
// Deadlines come from the server's TIME: a dlock waiter's entry is valid for
// config::wait_recheck + fair_mutex::purge_bound after its last attempt, and every attempt
// renews it. A waiter that is gone (timed out, cancelled, killed) leaves the queue itself, or is
// purged when its deadline passes, so a dead head stalls the queue for at most
// config::wait_recheck + purge_bound (Redisson: fairLockWaitTimeout, 5 minutes by default).
// Mixed with Redisson: mutual exclusion, wake-ups and queue order hold both ways. Redisson's
// deadlines are a chain on client clocks (each newcomer adds its wait to the tail's, each
// acquisition subtracts its wait from all); a dlock waiter behind a Redisson one chains on it
// the same way, so neither side's entries are pushed into the past (docs/fair_mutex.md).
#pragma once

#include <chrono>
#include <string>

#include "dlock/detail/lock_base.hpp"

namespace dlock {

class fair_mutex : public detail::lock_base {
 public:
  // How long past a waiter's wait_recheck its queue entry stays valid without a new attempt.
  static constexpr std::chrono::milliseconds purge_bound{2000};

  fair_mutex(client& c, std::string name)
      : lock_base{c, std::move(name), detail::lock_kind::fair} {}
};

}  // namespace dlock
