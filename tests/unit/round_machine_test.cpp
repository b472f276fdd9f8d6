// Step tests of round_machine (sync/round_machine.hpp): the rounds of a multi_lock or red_lock
// acquisition, Redlock's quorum and validity, the fencing floor, pauses, deadlines, errors and
// cancellation. show() renders a step's actions in the order the shell carries them out
// (release, complete, attempt, floor, timer), so a test compares them whole.
#include "sync/round_machine.hpp"

#include <gtest/gtest.h>

#include <asio/error.hpp>
#include <chrono>
#include <set>
#include <string>

#include "dlock/error.hpp"

namespace round_machine_tests {

using namespace std::chrono_literals;
using dlock::errc;
using dlock::detail::quorum;
using machine = dlock::detail::round_machine;
using time_point = machine::clock::time_point;

const time_point t0 = time_point{} + 1000h;

std::string show(const machine::actions& a) {
  std::string out;
  auto add = [&](const std::string& s) { out += (out.empty() ? "" : " ") + s; };
  if (a.release) add("release");
  if (a.complete) add(*a.complete ? "complete(" + a.complete->message() + ")" : "complete(ok)");
  if (a.attempt) add("attempt");
  if (a.floor) add("floor(" + std::to_string(*a.floor) + ")");
  if (a.timer) {
    add("timer(+" + std::to_string((*a.timer - t0) / 1ms) + "ms)");
  }
  return out;
}

machine::outcome got(std::uint64_t token, std::chrono::milliseconds trust = 29s) {
  machine::outcome o;
  o.acquired = true;
  o.token = token;
  o.trusted_until = t0 + trust;
  return o;
}
machine::outcome busy(std::chrono::milliseconds pttl) {
  machine::outcome o;
  o.pttl = pttl;
  return o;
}
machine::outcome failed(errc e) {
  machine::outcome o;
  o.ec = make_error_code(e);
  return o;
}

machine::params all_of(std::size_t n, std::optional<std::chrono::milliseconds> wait = 1s) {
  machine::params p;
  p.members = n;
  p.needed = n;
  if (wait) p.deadline = t0 + *wait;
  return p;
}
machine::params majority_of(std::size_t n, std::optional<std::chrono::milliseconds> wait = 1s) {
  auto p = all_of(n, wait);
  p.needed = quorum(n);
  p.floor = true;
  return p;
}

TEST(quorum, is_a_strict_majority) {
  EXPECT_EQ(quorum(1), 1u);
  EXPECT_EQ(quorum(2), 2u);
  EXPECT_EQ(quorum(3), 2u);
  EXPECT_EQ(quorum(4), 3u);
  EXPECT_EQ(quorum(5), 3u);
  EXPECT_EQ(quorum(7), 4u);
}

TEST(round_machine, a_round_attempts_every_member_and_completes_when_all_are_held) {
  machine m{all_of(3)};
  EXPECT_EQ(show(m.start(t0)), "attempt timer(+1050ms)") << "the deadline, plus grace";
  EXPECT_EQ(show(m.on_outcome(0, got(7), t0 + 1ms)), "");
  EXPECT_EQ(show(m.on_outcome(2, got(9), t0 + 1ms)), "");
  EXPECT_EQ(show(m.on_outcome(0, got(7), t0 + 1ms)), "") << "a duplicate outcome is ignored";
  EXPECT_EQ(show(m.on_outcome(1, got(8), t0 + 2ms)), "complete(ok)");
  EXPECT_TRUE(m.done());
  EXPECT_EQ(m.token(), 9u);
  EXPECT_EQ(m.valid_until(), t0 + 29s);
}

TEST(round_machine, a_busy_member_releases_the_round_and_pauses_before_the_next) {
  machine m{all_of(2, 10s)};
  m.start(t0);
  m.on_outcome(0, got(1), t0);
  const auto a = m.on_outcome(1, busy(5000ms), t0 + 1ms);
  ASSERT_TRUE(a.release && a.timer && !a.complete && !a.attempt);
  EXPECT_GE(*a.timer, t0 + 1ms + 5ms);
  EXPECT_LE(*a.timer, t0 + 1ms + 100ms);
  EXPECT_EQ(show(m.on_outcome(0, got(1), t0 + 2ms)), "") << "the round is settled";
  EXPECT_EQ(show(m.on_timer(*a.timer)), "attempt timer(+10050ms)");
  m.on_outcome(0, got(2), *a.timer);
  EXPECT_EQ(show(m.on_outcome(1, got(3), *a.timer)), "complete(ok)");
}

TEST(round_machine, a_holder_whose_lease_ends_sooner_shortens_the_pause) {
  machine m{all_of(1, 10s)};
  m.start(t0);
  EXPECT_EQ(show(m.on_outcome(0, busy(2ms), t0)), "release timer(+3ms)");
}

TEST(round_machine, pauses_are_jittered) {
  std::set<time_point> seen;
  for (std::uint64_t seed = 0; seed < 20; ++seed) {
    auto p = all_of(1, 10s);
    p.seed = seed;
    machine m{p};
    m.start(t0);
    seen.insert(*m.on_outcome(0, busy(60000ms), t0).timer);
  }
  EXPECT_GT(seen.size(), 5u) << "two contenders must not retry in lockstep";
}

TEST(round_machine, the_deadline_ends_it_with_a_timeout_and_bounds_the_pause) {
  machine m{all_of(2, 30ms)};
  m.start(t0);
  m.on_outcome(0, got(1), t0);
  const auto a = m.on_outcome(1, busy(60000ms), t0 + 20ms);
  ASSERT_TRUE(a.timer);
  EXPECT_LE(*a.timer, t0 + 30ms);
  m.on_timer(t0 + 30ms);
  m.on_outcome(0, got(1), t0 + 31ms);
  EXPECT_EQ(show(m.on_outcome(1, busy(50000ms), t0 + 31ms)),
            "release complete(" + make_error_code(errc::timeout).message() + ")");
}

TEST(round_machine, a_try_is_one_round_decided_by_its_first_busy_member) {
  machine m{all_of(2, 0ms)};
  EXPECT_EQ(show(m.start(t0)), "attempt") << "bounded by its attempts' timeouts";
  EXPECT_EQ(show(m.on_outcome(0, busy(100ms), t0 + 1ms)),
            "release complete(" + make_error_code(errc::timeout).message() + ")");
  EXPECT_FALSE(m.accepts(1)) << "the other member's outcome is released by the shell";
  EXPECT_EQ(show(m.on_outcome(1, got(4), t0 + 1ms)), "");
}

TEST(round_machine, red_lock_does_not_wait_for_a_straggler_once_a_majority_holds) {
  machine m{majority_of(5)};
  m.start(t0);
  m.on_outcome(0, got(1), t0);
  m.on_outcome(3, failed(errc::connection_refused), t0);
  m.on_outcome(1, got(2), t0);
  EXPECT_TRUE(m.accepts(2));
  EXPECT_EQ(show(m.on_outcome(2, got(3), t0 + 1ms)), "timer(+6ms)")
      << "member 4, still out, gets as long again as the quorum took (at least 5 ms)";
  EXPECT_EQ(show(m.on_timer(t0 + 6ms)), "floor(3) timer(+1050ms)");
  EXPECT_FALSE(m.accepts(4));
  EXPECT_EQ(show(m.on_outcome(4, got(9), t0 + 2s)), "");
  for (std::size_t i : {0u, 1u, 2u}) m.on_floor(i, true, t0 + 2ms);
  EXPECT_TRUE(m.done());
  EXPECT_EQ(m.token(), 3u) << "the straggler is not part of the lease";
}

TEST(round_machine, red_lock_gives_up_a_round_once_a_majority_is_out_of_reach) {
  machine m{majority_of(3, 10s)};
  m.start(t0);
  m.on_outcome(0, busy(5000ms), t0);
  const auto a = m.on_outcome(2, failed(errc::timeout), t0 + 1ms);
  EXPECT_TRUE(a.release && a.timer && !a.complete) << show(a);
}

TEST(round_machine, an_unreachable_member_ends_it_with_its_error_not_a_timeout) {
  machine m{all_of(2, 10s)};
  m.start(t0);
  m.on_outcome(0, got(4), t0);
  EXPECT_EQ(show(m.on_outcome(1, failed(errc::connection_refused), t0 + 1ms)),
            "release complete(" + make_error_code(errc::connection_refused).message() + ")");
}

TEST(round_machine, an_error_no_retry_can_change_ends_it_at_once) {
  machine m{all_of(3, 10s)};
  m.start(t0);
  m.on_outcome(0, got(4), t0);
  EXPECT_EQ(show(m.on_outcome(1, failed(errc::wrong_kind), t0)),
            "release complete(" + make_error_code(errc::wrong_kind).message() + ")");
}

TEST(round_machine, red_lock_succeeds_at_a_majority_and_writes_the_largest_token_back) {
  machine m{majority_of(3)};
  m.start(t0);
  m.on_outcome(0, got(100), t0 + 1ms);
  m.on_outcome(1, failed(errc::connection_refused), t0 + 2ms);
  EXPECT_EQ(show(m.on_outcome(2, got(5000), t0 + 3ms)), "floor(5000) timer(+1050ms)");
  EXPECT_EQ(show(m.on_floor(1, true, t0 + 4ms)), "") << "member 1 holds nothing";
  EXPECT_EQ(show(m.on_floor(0, true, t0 + 4ms)), "");
  EXPECT_EQ(show(m.on_floor(2, true, t0 + 4ms)), "complete(ok)");
  EXPECT_EQ(m.token(), 5000u);
}

TEST(round_machine, red_lock_floors_must_reach_a_majority) {
  machine m{majority_of(3, 10s)};
  m.start(t0);
  m.on_outcome(0, got(100), t0);
  m.on_outcome(1, busy(1000ms), t0);
  m.on_outcome(2, got(200), t0);
  m.on_floor(0, true, t0 + 1ms);
  const auto a = m.on_floor(2, false, t0 + 1ms);
  EXPECT_TRUE(a.release && a.timer && !a.complete) << show(a);
}

TEST(round_machine, red_lock_fails_below_a_majority_and_when_validity_ran_out) {
  machine m{majority_of(5, 10s)};
  m.start(t0);
  m.on_outcome(0, got(1), t0);
  m.on_outcome(1, got(2), t0);
  m.on_outcome(2, busy(100ms), t0);
  m.on_outcome(3, failed(errc::timeout), t0);
  auto a = m.on_outcome(4, busy(100ms), t0);
  EXPECT_TRUE(a.release && a.timer) << "two of five is no majority: " << show(a);
  // Validity: lease - elapsed - drift must still be ahead, measured on the third longest trust.
  machine v{majority_of(3, 10s)};
  v.start(t0);
  v.on_outcome(0, got(1, 29s), t0);
  EXPECT_EQ(show(v.on_outcome(1, got(2, 50ms), t0 + 60ms)), "timer(+120ms)");
  a = v.on_timer(t0 + 120ms);
  EXPECT_TRUE(a.release && a.timer) << "the second trust ended before the round settled";
  EXPECT_EQ(v.valid_until(), t0 + 50ms);
}

TEST(round_machine, red_lock_survives_final_errors_of_a_minority_only) {
  machine m{majority_of(3, 10s)};
  m.start(t0);
  m.on_outcome(0, failed(errc::wrong_type), t0);
  m.on_outcome(1, got(1), t0);
  EXPECT_EQ(show(m.on_outcome(2, got(2), t0)), "floor(2) timer(+10050ms)");
  machine n{majority_of(3, 10s)};
  n.start(t0);
  n.on_outcome(0, failed(errc::wrong_type), t0);
  EXPECT_EQ(show(n.on_outcome(1, failed(errc::no_permission), t0)),
            "release complete(" + make_error_code(errc::no_permission).message() + ")");
}

TEST(round_machine, cancellation_completes_at_once_and_releases_a_round_in_flight) {
  machine m{all_of(2, 10s)};
  m.start(t0);
  m.on_outcome(0, got(1), t0);
  const std::error_code aborted = asio::error::operation_aborted;
  EXPECT_EQ(show(m.on_cancel(aborted, t0)), "release complete(" + aborted.message() + ")");
  EXPECT_EQ(show(m.on_outcome(1, got(2), t0)), "");
  EXPECT_EQ(show(m.on_cancel(aborted, t0)), "");
  machine early{all_of(1, 10s)};
  EXPECT_EQ(show(early.on_cancel(aborted, t0)), "complete(" + aborted.message() + ")");
  EXPECT_EQ(show(early.start(t0)), "") << "cancelled before it started: nothing is attempted";
  machine p{all_of(1, 10s)};
  p.start(t0);
  p.on_outcome(0, busy(1000ms), t0);
  EXPECT_EQ(show(p.on_cancel(aborted, t0)), "complete(" + aborted.message() + ")")
      << "pausing: nothing held";
  EXPECT_EQ(show(p.on_timer(t0 + 1s)), "");
}

TEST(round_machine, a_round_still_out_past_the_deadline_ends_it) {
  machine m{majority_of(3, 300ms)};
  m.start(t0);
  m.on_outcome(0, got(1), t0 + 1ms);
  EXPECT_EQ(show(m.on_timer(t0 + 200ms)), "") << "an early firing does nothing";
  EXPECT_EQ(show(m.on_timer(t0 + 350ms)),
            "release complete(" + make_error_code(errc::timeout).message() + ")");
  EXPECT_EQ(show(m.on_outcome(1, got(2), t0 + 2s)), "") << "released by the shell";
  machine f{majority_of(3, 300ms)};
  f.start(t0);
  f.on_outcome(0, got(1), t0);
  f.on_outcome(1, got(2), t0);
  EXPECT_EQ(show(f.on_timer(t0 + 5ms)), "floor(2) timer(+350ms)");
  EXPECT_EQ(show(f.on_timer(t0 + 350ms)),
            "release complete(" + make_error_code(errc::timeout).message() + ")")
      << "a floor still out at the deadline";
}

TEST(round_machine, retryable_errors_are_retried_and_reported_at_the_deadline_unless_held) {
  machine m{all_of(1, 100ms)};
  m.start(t0);
  auto a = m.on_outcome(0, failed(errc::loading), t0 + 1ms);
  EXPECT_TRUE(a.release && a.timer && !a.complete) << show(a);
  m.on_timer(*a.timer);
  EXPECT_EQ(show(m.on_timer(t0 + 150ms)),
            "release complete(" + make_error_code(errc::loading).message() + ")")
      << "the last round, still out at the deadline, does not hide the error before it";
  machine b{all_of(1, 100ms)};
  b.start(t0);
  a = b.on_outcome(0, busy(1000ms), t0);
  b.on_timer(*a.timer);
  EXPECT_EQ(show(b.on_outcome(0, failed(errc::connection_lost), t0 + 100ms)),
            "release complete(" + make_error_code(errc::timeout).message() + ")");
}

TEST(round_machine, red_lock_tolerates_an_unreachable_minority_in_every_round) {
  machine m{majority_of(3, 10s)};
  m.start(t0);
  m.on_outcome(0, failed(errc::connection_refused), t0);
  auto a = m.on_outcome(1, busy(100ms), t0);
  EXPECT_TRUE(a.release && a.timer && !a.complete) << show(a);
  m.on_timer(*a.timer);
  m.on_outcome(0, failed(errc::connection_refused), *a.timer);
  m.on_outcome(1, got(1), *a.timer);
  EXPECT_EQ(show(m.on_outcome(2, got(2), *a.timer)), "floor(2) timer(+10050ms)");
}

TEST(round_machine, listens_to_the_first_member_found_held_and_its_unlock_ends_the_pause) {
  machine m{all_of(3, 10s)};
  m.start(t0);
  m.on_outcome(0, got(1), t0);
  auto a = m.on_outcome(1, busy(5000ms), t0);
  ASSERT_TRUE(a.listen) << "decided by the first member found held: " << show(a);
  EXPECT_EQ(*a.listen, 1u);
  EXPECT_EQ(show(m.on_wake(t0 + 1ms)), "attempt timer(+10050ms)");
  EXPECT_EQ(show(m.on_wake(t0 + 2ms)), "") << "during a round: noted";
  m.on_outcome(0, got(1), t0 + 3ms);
  m.on_outcome(1, got(2), t0 + 3ms);
  a = m.on_outcome(2, busy(5000ms), t0 + 3ms);
  ASSERT_TRUE(a.timer);
  EXPECT_EQ(*a.timer, t0 + 3ms + 5ms) << "woken during the round: the shortest pause";
  m.on_cancel(asio::error::operation_aborted, t0 + 4ms);
  EXPECT_EQ(show(m.on_wake(t0 + 5ms)), "");
}

TEST(round_machine, a_wake_starts_the_next_round_within_a_random_part_of_a_round) {
  std::set<time_point> starts;
  for (std::uint64_t seed = 0; seed < 20; ++seed) {
    auto p = all_of(1, 10s);
    p.seed = seed;
    machine m{p};
    m.start(t0);
    m.on_outcome(0, busy(5000ms), t0 + 4ms);  // the round took 4 ms
    const auto a = m.on_wake(t0 + 10ms);
    ASSERT_TRUE(a.timer && !a.attempt) << show(a);
    EXPECT_GE(*a.timer, t0 + 10ms);
    EXPECT_LE(*a.timer, t0 + 14ms);
    starts.insert(*a.timer);
    EXPECT_EQ(show(m.on_timer(*a.timer)).substr(0, 7), "attempt");
  }
  EXPECT_GT(starts.size(), 5u);
}

TEST(round_machine, a_member_that_failed_last_round_is_not_waited_for_to_fail_this_one) {
  machine m{majority_of(3, 10s)};
  m.start(t0);
  m.on_outcome(1, got(1), t0);
  m.on_outcome(2, busy(1000ms), t0);
  auto a = m.on_outcome(0, failed(errc::timeout), t0 + 100ms);  // a stopped server
  ASSERT_TRUE(a.timer && a.release) << show(a);
  m.on_timer(*a.timer);
  a = m.on_outcome(2, busy(1000ms), *a.timer + 1ms);
  EXPECT_TRUE(a.release && a.timer) << "member 0 is still out, and failed last time: " << show(a);
  machine fresh{majority_of(3, 10s)};
  fresh.start(t0);
  EXPECT_EQ(show(fresh.on_outcome(2, busy(1000ms), t0)), "") << "no history: wait for member 0";
  // Its late answer (the server is back) clears the suspicion.
  a = m.on_timer(*a.timer);
  m.on_late(0, got(5));
  m.on_outcome(1, got(6), *a.timer);
  EXPECT_EQ(show(m.on_outcome(2, busy(1000ms), *a.timer)), "") << "member 0 is waited for again";
}

TEST(round_machine, bad_parameters_are_refused) {
  machine m{all_of(0)};
  EXPECT_EQ(show(m.start(t0)),
            "complete(" + make_error_code(errc::invalid_argument).message() + ")");
  auto p = all_of(2);
  p.needed = 3;
  machine n{p};
  EXPECT_EQ(show(n.start(t0)),
            "complete(" + make_error_code(errc::invalid_argument).message() + ")");
}

}  // namespace round_machine_tests
