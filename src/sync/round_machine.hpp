// The decisions of one acquisition of a multi_lock or a red_lock, with no sockets or timers:
// inputs are the members' attempt outcomes, the fencing floors' acknowledgements, timer expiries,
// cancellation and `now`; outputs are the actions the shell (sync/multi_op.cpp) carries out.
// Tested step by step in tests/unit/round_machine_test.
//
// An acquisition runs rounds. A round attempts every member at once (one script per group of
// members that share a client and a slot; each attempt takes all of its names or none, and never
// waits or queues). When every member has answered, or as soon as the round is decided (too many
// failed for a quorum; or a quorum holds and the others had as long again as it took: a dead
// server's attempt does not hold it up, and what a member still out takes is released when it
// answers):
// - at least `needed` acquired, and the needed-th longest trust still ahead (Redlock's validity:
//   lease - elapsed - drift) → acquired; with `floor` (red_lock) the fencing token, the largest
//   of the members', is first written back to every acquired member, and at least `needed` must
//   acknowledge it;
// - otherwise everything the round took is released in the background, and the next round
//   starts after a jittered pause (shorter when the busy members' leases end sooner; cut short
//   when the first member found held is unlocked: the shell listens to its channels), or the
//   acquisition ends at its deadline: errc::timeout when members were held by others, else the
//   last error (a quorum out of reach is not "held").
// Errors that the next round would meet again (a refused connection, a key of another type, a
// refused permission) end it at once when they leave fewer than `needed` members reachable.
// Members are held only between a round's attempts and its decision, and a round never waits
// while holding: two acquisitions over overlapping sets cannot deadlock (no hold-and-wait), and
// the jitter breaks their symmetry so both make progress.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <random>
#include <system_error>
#include <vector>

namespace dlock::detail {

// Redlock's majority of n servers. (Its drift, 1% of the lease plus 2 ms, is the one every hold's
// trust already allows for: renewal_schedule::trusted_until.)
constexpr std::size_t quorum(std::size_t n) { return n / 2 + 1; }

class round_machine {
 public:
  using clock = std::chrono::steady_clock;
  // A wait's round still out at its deadline gets this much longer (acquire_machine's grace).
  static constexpr std::chrono::milliseconds grace{50};
  // Once a quorum holds, the members still out get as long again as it took, at least this.
  static constexpr std::chrono::milliseconds straggler_min{5};

  struct params {
    std::size_t members = 1;
    std::size_t needed = 1;  // members (multi_lock) or quorum(members) (red_lock)
    bool floor = false;      // write the largest token back to the acquired members (red_lock)
    std::optional<clock::time_point> deadline;               // nullopt: as long as it takes
    std::chrono::milliseconds pause_min{5}, pause_max{100};  // between rounds, jittered
    std::uint64_t seed = 0;
  };
  // One member's attempt: acquired (trusted until `trusted_until`, with `token`), busy (held by
  // another owner; `pttl` ms left), or failed with `ec` (nothing held: the shell gives back
  // whatever an ambiguous attempt may have taken).
  struct outcome {
    bool acquired = false;
    std::uint64_t token = 0;
    clock::time_point trusted_until{};
    std::optional<std::chrono::milliseconds> pttl;  // busy
    std::error_code ec;
  };
  struct actions {
    bool attempt = false;                // start a round: attempt every member
    std::optional<std::uint64_t> floor;  // write this token back to the acquired members
    bool release = false;                // release what this round acquired (background)
    // (Re)arm the timer: the pause before the next round, or the deadline of a round out.
    std::optional<clock::time_point> timer;
    std::optional<std::error_code> complete;  // {}: acquired
    // Listen for this member's unlock (the first member found held): it ends the pause early.
    std::optional<std::size_t> listen;
  };

  explicit round_machine(params p);

  actions start(clock::time_point now);
  actions on_outcome(std::size_t member, const outcome& o, clock::time_point now);
  // The floor write to `member` (acquired this round) was acknowledged, or failed.
  actions on_floor(std::size_t member, bool ok, clock::time_point now);
  actions on_timer(clock::time_point now);
  // The listened member's lock was released (or its channel (re)subscribed): pausing, the next
  // round starts within a random part of the last round's time; during a round, the pause after
  // it is short.
  actions on_wake(clock::time_point now);
  actions on_cancel(std::error_code ec, clock::time_point now);

  bool done() const noexcept { return phase_ == phase::done; }
  // An outcome that does not count (an earlier round's, or one after its round was decided):
  // it still tells whether the member answers.
  void on_late(std::size_t member, const outcome& o) noexcept;
  // Whether an outcome of `member` counts now: its round is open and it has not answered.
  bool accepts(std::size_t member) const noexcept;
  const std::vector<outcome>& outcomes() const noexcept { return outcomes_; }
  // The acquisition's fencing token: the largest of the acquired members' tokens.
  std::uint64_t token() const noexcept;
  // When the needed-th longest trust among the acquired members ends (Redlock's validity).
  std::optional<clock::time_point> valid_until() const;

 private:
  enum class phase { idle, attempting, flooring, pausing, done };
  actions settle(clock::time_point now);
  actions retry(clock::time_point now);
  actions finish(std::error_code ec);
  std::optional<clock::time_point> round_timer() const;
  std::size_t acquired() const;

  params p_;
  phase phase_ = phase::idle;
  std::vector<outcome> outcomes_;
  std::vector<bool> answered_;
  std::vector<bool> suspect_;     // its last answer was an error (see on_late)
  clock::duration last_round_{};  // how long the last round took to be decided
  std::size_t pending_ = 0, floors_ok_ = 0;
  clock::time_point round_start_{};
  std::optional<clock::time_point> stragglers_by_;  // a quorum holds: settle by then
  // What the deadline reports: errc::timeout if some round found a member held by another owner,
  // else the last error (an unreachable quorum is not "held").
  bool busy_seen_ = false;
  bool wake_pending_ = false;  // woken during a round: the pause after it is short
  std::error_code last_error_;
  std::mt19937_64 rng_;
};

// Errors of an attempt that the next round may not meet: a lost reply or a transient server
// state, as an acquire_machine waits them out (acquire_machine.hpp). Any other error (a refused
// connection, a key of another type...) ends the acquisition when its members leave fewer than
// `needed` reachable.
bool is_retryable_outcome(std::error_code ec);

}  // namespace dlock::detail
