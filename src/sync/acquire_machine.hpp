// The decisions of one acquire operation of dlock::mutex, with no sockets or timers: inputs are
// attempt replies, timer expiries, wake-ups, cancellation and `now`; outputs are the actions the
// Asio shell (sync/acquire.cpp) carries out. Tested step by step in
// tests/unit/acquire_machine_test.
//
// An operation sends attempts (mutex_acquire.lua) until one acquires, the deadline passes, it
// is cancelled or an error ends it. Between attempts it sleeps until a wake-up (an unlock
// message, a hand-off naming its ticket, a subscription's confirmation) or its re-check time:
// min(wait_recheck, the holder's PTTL + 1 ms, the deadline). Invariants:
// - at most one attempt is in flight; a wake-up during one makes the next attempt follow its
//   reply at once instead of sleeping (`wake_pending_`), so a wake-up is never lost;
// - the operation completes exactly once, and never later than its deadline: an attempt still
//   in flight then, or a queue place, or an acquisition whose trust had run out, is handed to a
//   give-back (mutex_release.lua with the expected count plus one and the ticket), which the
//   shell runs in the background after the completion;
// - an attempt whose reply is lost is sent again with the same expected count (the script is
//   idempotent), up to max_resends times; an acquisition is reported only while it is trusted:
//   its reply came before `sent + lease - drift` (renewal_schedule::trusted_until).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <system_error>

#include "dlock/reply.hpp"

namespace dlock::detail {

// Server states that pass by themselves (BUSY, LOADING, a failover under way...): waited out.
bool is_transient(std::error_code ec);
// The reply was lost or came too late: the request may have run.
bool is_lost_reply(std::error_code ec);

class acquire_machine {
 public:
  using clock = std::chrono::steady_clock;
  static constexpr int max_resends = 3;
  static constexpr std::chrono::milliseconds retry_pause{50};
  // A wait's attempt still out at the deadline gets this much longer: its own error (a refused
  // connection, say) is then what the caller learns, rather than a bare timeout.
  static constexpr std::chrono::milliseconds grace{50};

  struct params {
    std::optional<clock::time_point> deadline;  // nullopt: as long as it takes
    std::uint32_t have = 0;                     // holds the owner has (0: first acquisition)
    std::chrono::milliseconds lease{30000};
    std::chrono::milliseconds recheck{3000};
    std::chrono::milliseconds command_timeout{3000};
    bool replicate = false;  // WAIT for the replicas after an acquisition (first or re-entry)
    bool accept_shortfall = false;
  };

  // What the shell does after a step, in this order: complete, give back, send, arm the timer.
  struct attempt_args {
    std::uint32_t have;        // the count it expects now
    bool queue;                // carries the ticket: the script may queue it
    bool foreign;              // woken by a Redisson unlock: the yield marker does not apply
    clock::duration budget{};  // the attempt's timeout
  };
  struct actions {
    std::optional<attempt_args> attempt;  // send an attempt
    bool subscribe = false;               // register as a waiter of the lock (first time it waits)
    bool send_wait = false;               // send WAIT for the replicas
    bool give_back = false;  // background give-back: expected count give_back_have, ticket
    std::uint32_t give_back_have = 0;
    std::optional<clock::time_point> timer;   // (re)arm the timer for this time; nullopt: leave it
    std::optional<std::error_code> complete;  // finished: {} acquired, or the error
  };
  explicit acquire_machine(params p) : p_{p} {}

  actions start(clock::time_point now);
  // The reply (or error) of the attempt sent at `sent`.
  actions on_reply(std::error_code ec, const reply& r, clock::time_point sent,
                   clock::time_point now);
  // WAIT's answer: whether enough replicas acknowledged, or an error.
  actions on_replicas(std::error_code ec, bool enough, clock::time_point now);
  // A message: `foreign` when a Redisson unlock (`0`) woke it. `after` > now: re-check then at
  // the latest (a yield to Redisson's waiters), not at once.
  actions on_wake(bool foreign, clock::time_point now,
                  std::optional<clock::time_point> after = std::nullopt);
  actions on_timer(clock::time_point now);
  // Cancellation (Asio per-operation, a stop_token) or shutdown: completes with `ec` at once.
  actions on_cancel(std::error_code ec, clock::time_point now);

  bool done() const noexcept { return phase_ == phase::done; }
  std::uint64_t token() const noexcept { return token_; }
  clock::time_point trusted_from() const noexcept { return acquired_sent_; }
  bool replicated() const noexcept { return replicated_; }
  // A `0` woke it and no attempt since found the lock held: ending without the lock, it owes
  // that wake-up to the next waiter of its process (the lock may be free).
  bool owes_wake() const noexcept { return owes_wake_; }
  // Finished as "busy" (metrics): found held until its deadline, or held when it would not wait;
  // not an error that ended it (a command timeout after the resends is a failure).
  bool ended_busy() const noexcept { return busy_; }

 private:
  enum class phase { idle, attempting, replicating, sleeping, done };
  bool time_left(clock::time_point now) const { return !p_.deadline || now < *p_.deadline; }
  actions attempt(clock::time_point now);
  actions sleep(clock::time_point until, clock::time_point now);
  actions finish(std::error_code ec, clock::time_point now);
  actions ran_out(std::error_code ec, clock::time_point now);
  std::error_code timed_out() const;
  actions on_error(std::error_code ec, clock::time_point sent, clock::time_point now);
  actions acquired(std::uint64_t token, clock::time_point sent, clock::time_point now);
  actions held(std::int64_t pttl, clock::time_point now);

  params p_;
  phase phase_ = phase::idle;
  bool busy_ = false;          // finished by ran_out(): found held until the deadline
  bool waits_ = false;         // may wait: it queues, and subscribes when the lock is held
  bool wake_pending_ = false;  // woken while attempting: attempt again after the reply
  bool in_flight_ = false;     // an attempt is out
  bool owes_wake_ = false;     // see owes_wake()
  bool sent_foreign_ = false;  // the attempt out answers a Redisson unlock (kept for a resend)
  std::optional<clock::time_point> yield_by_;  // a yield came while attempting: re-check by then
  bool foreign_ = false;                       // the next attempt answers a Redisson unlock
  bool subscribed_ = false;
  bool may_hold_ = false;  // an attempt may have acquired or queued (give back on failure)
  int resends_ = 0;
  std::optional<clock::time_point> transient_since_;
  std::error_code transient_;  // the transient error being waited out (reported at the deadline)
  std::optional<clock::time_point> ambiguous_since_;      // first send whose reply was lost
  clock::time_point wake_at_ = clock::time_point::max();  // sleeping: next attempt
  std::uint64_t token_ = 0;
  clock::time_point acquired_sent_{};
  bool replicated_ = true;
};

}  // namespace dlock::detail
