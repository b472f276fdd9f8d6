// dlock exec: when the command may start and when it is signalled, decided from the lease's
// trust deadline alone. No clock reads, signals or I/O here: the caller passes the time and the
// lease's state in and carries the decisions out (unit-tested in
// tests/unit/exec_schedule_test.cpp).
//
// The trust deadline is `now + lease.time_left()`: the send time of the last renewal Redis
// confirmed plus the lease, less the drift margin. The command must be dead before it: from then
// on another holder may run. So, with kill_after the grace between SIGTERM and SIGKILL and margin
// a reserve for signal delivery and scheduling:
//   - the command starts only with more than kill_after + margin of trust left;
//   - SIGTERM once trust left falls to kill_after + margin (renewals stopped confirming, or a
//     fixed --lease runs out), or at once when the lease is lost;
//   - SIGKILL kill_after after the SIGTERM, but never later than deadline - margin (at once when
//     that has passed). A lost lease reports no deadline (time_left() is 0); the last one known
//     is kept, which is never later than the real one.
#pragma once

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>

namespace dlock_cli {

struct exec_timing {
  std::chrono::milliseconds kill_after;  // SIGTERM to SIGKILL
  std::chrono::milliseconds margin;      // SIGKILL at the latest this long before the deadline
};

// The reserve kept before the deadline: 1% of the lease, at least 50 ms.
constexpr std::chrono::milliseconds kill_margin(std::chrono::milliseconds lease) {
  return std::max(std::chrono::milliseconds{50}, lease / 100);
}

// --kill-after when not given: a third of the lease, at most 10 s.
constexpr std::chrono::milliseconds default_kill_after(std::chrono::milliseconds lease) {
  return std::min(std::chrono::milliseconds{10'000}, lease / 3);
}

// An explicit --kill-after is accepted up to a third of the lease: a watchdog lease is renewed
// every third, so longer would stop the command after a single missed renewal, or (with more
// grace than trust) not in time.
constexpr bool kill_after_fits(std::chrono::milliseconds kill_after,
                               std::chrono::milliseconds lease) {
  return kill_after * 3 <= lease;
}

// The timing for a lease of `lease` (`fixed`: --lease, else the watchdog lease) and the
// --kill-after given, if any; or, in `error`, why that lease and --kill-after cannot work.
struct timing_choice {
  exec_timing timing{};
  std::string error;  // empty: usable
};

inline timing_choice choose_timing(std::chrono::milliseconds lease,
                                   std::optional<std::chrono::milliseconds> kill_after,
                                   bool fixed) {
  const auto text = [](std::chrono::milliseconds d) { return std::to_string(d.count()) + " ms"; };
  const std::string which =
      std::string{fixed ? "--lease" : "watchdog lease"} + " (" + text(lease) + ")";
  timing_choice c;
  c.timing.kill_after = kill_after.value_or(default_kill_after(lease));
  c.timing.margin = kill_margin(lease);
  if (kill_after && !kill_after_fits(*kill_after, lease)) {
    c.error = "--kill-after (" + text(*kill_after) + ") is longer than a third of the " + which +
              ": the command could not be stopped within the lease; give a shorter --kill-after" +
              " or a longer lease";
  } else if (lease <= c.timing.kill_after + c.timing.margin) {
    c.error = "the " + which + " is too short: it must exceed --kill-after (" +
              text(c.timing.kill_after) + ") plus " + text(c.timing.margin) +
              " to run the command at all";
  }
  return c;
}

// Whether a command may start on a lease with `time_left` of trust (`lost`: its stop token).
constexpr bool may_start(std::chrono::milliseconds time_left, bool lost, const exec_timing& t) {
  return !lost && time_left > t.kill_after + t.margin;
}

class kill_schedule {
 public:
  using clock = std::chrono::steady_clock;
  using time_point = clock::time_point;

  enum class reason { none, lost, expiring };  // why the command is being stopped

  struct step {
    bool term = false;                    // send SIGTERM now
    bool kill = false;                    // send SIGKILL now (after the SIGTERM when both are set)
    time_point wake = time_point::max();  // call next() again by then (max: only on an event)
  };

  // `trusted_until`: the deadline when the command was started.
  kill_schedule(exec_timing t, time_point trusted_until) : t_{t}, deadline_{trusted_until} {}

  // What to do at `now`, given the deadline `trusted_until` (now + time_left(); not read once
  // the lease is lost) and whether the lease is `lost`. Call it after every wake-up.
  step next(time_point now, time_point trusted_until, bool lost) {
    if (!lost_ && !lost) deadline_ = trusted_until;
    lost_ = lost_ || lost;
    step s;
    if (!termed_ && (lost_ || now >= term_due())) {
      termed_ = true;
      termed_at_ = now;
      why_ = lost_ ? reason::lost : reason::expiring;
      s.term = true;
    }
    if (termed_ && !killed_ && now >= kill_due()) {
      killed_ = true;
      s.kill = true;
    }
    if (!termed_) {
      s.wake = term_due();
    } else if (!killed_) {
      s.wake = kill_due();
    }
    return s;
  }

  bool stopping() const { return termed_; }
  bool killed() const { return killed_; }
  reason why() const { return why_; }
  // The last trust deadline known.
  time_point deadline() const { return deadline_; }

 private:
  time_point term_due() const { return deadline_ - t_.kill_after - t_.margin; }
  time_point kill_due() const {
    return std::min(termed_at_ + t_.kill_after, deadline_ - t_.margin);
  }

  exec_timing t_;
  time_point deadline_;
  bool lost_ = false;
  bool termed_ = false;  // SIGTERM sent, at termed_at_
  time_point termed_at_{};
  bool killed_ = false;
  reason why_ = reason::none;
};

}  // namespace dlock_cli
