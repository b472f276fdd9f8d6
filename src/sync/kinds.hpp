// The scripts of each lock kind (detail::lock_kind): one attempt of an acquire, one release (or
// a waiter leaving), and the renewal argument. The algorithms around them (acquire_machine and
// its shell, the release, give-backs, the watchdog) are the same for every kind, because every
// script speaks the same protocol: the caller sends the hold count it has, so that a resend is
// recognised; an attempt replies {0, token} (held), {1, ms} (wait), {3, count} (hold lost),
// {4, 0} (upgrade refused), {5, 0} (another kind of lock); a release replies nil (not held as
// expected), 0 (holds remain), 1 (the owner's last hold went), -1 (a resend that was applied).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "runtime/hold.hpp"
#include "sync/mutex_ops.hpp"
#include "transport/pipeline.hpp"

namespace dlock::detail {

// Whether a kind's acquisition is a lease that the watchdog tracks (a counting_semaphore's
// permits and a latch's opening are not).
constexpr bool leased(lock_kind k) { return k != lock_kind::counting && k != lock_kind::latch; }

struct attempt_request {
  std::uint32_t have;       // the count the owner expects now
  bool waits;               // it may queue (and, for a mutex, carries the ticket)
  bool foreign;             // mutex: a Redisson unlock woke it (the yield marker does not apply)
  std::string_view ticket;  // mutex: its waiter ticket
  clock::duration budget;   // the attempt's timeout
};

void send_attempt(client_impl& c, const lock_keys& k, const hold_state& h, const attempt_request& a,
                  transport::reply_handler done);

// Releases one hold (expected count `have`); a non-empty `ticket` also leaves the queue (a
// waiter giving up: a mutex's ticket, the owner's queue entry for the other kinds).
void send_release(client_impl& c, const lock_keys& k, const hold_state& h, std::uint32_t have,
                  std::string_view ticket, transport::reply_handler done);

}  // namespace dlock::detail
