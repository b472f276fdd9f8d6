// The checker's verdicts of issue 24 on hand-written histories, each shown reported and shown
// not reported where it must not be: trust violations, the fence's token order, accesses whose
// outcome is unknown, arrival order (FIFO), several locks and several threads per process.
// No network.
#include <gtest/gtest.h>

#include <string>

#include "checker.hpp"
#include "checker_test_history.hpp"
#include "history.hpp"

namespace {

using dlock::faults::check_options;
using dlock::faults::event;
using dlock::faults::checker_test::history;
using dlock::faults::checker_test::ms;
using dlock::faults::checker_test::run;

// -- trust -----------------------------------------------------------------------------------

TEST(checker_trust, an_enter_inside_another_s_claimed_window_is_a_violation) {
  history h;
  h.enter(0, "a", 1, 500).reads(1, "a", 1, 0, 0);  // a claims nobody enters before 500 ms
  h.enter(300, "b", 2, 500).add(310, "b", "exit", 2);
  h.add(320, "a", "exit", 1);
  const auto r = run(h);
  EXPECT_EQ(r.trust_violations, 1u) << to_json(r);
  EXPECT_EQ(r.overlaps.size(), 1u);
  EXPECT_FALSE(r.clean());
}

TEST(checker_trust, an_overlap_after_the_claim_ran_out_or_was_given_up_is_not) {
  history h;
  // a is frozen past its 500 ms claim; b enters after it: an overlap the lock did not promise
  // to prevent.
  h.enter(0, "a", 1, 500).reads(1, "a", 1, 0, 0);
  h.enter(600, "b", 2, 500).add(700, "b", "exit", 2);
  h.add(800, "a", "lost", 1);
  // c claims 5 s but is told of its loss at once; d enters after that.
  h.enter(1000, "c", 3, 5000).add(1010, "c", "lost", 3);
  h.enter(1020, "d", 4, 500).add(1030, "d", "exit", 4);
  // e makes no claim (-1): an overlap, no trust violation.
  h.enter(2000, "e", 5, -1).enter(2010, "f", 6, 500).add(2020, "f", "exit", 6);
  h.add(2030, "e", "exit", 5);
  const auto r = run(h);
  EXPECT_EQ(r.trust_violations, 0u) << to_json(r);
  EXPECT_EQ(r.overlaps.size(), 2u) << "a with b, e with f";
}

TEST(checker_trust, a_killed_holder_s_claim_stands_although_its_section_is_cut) {
  history h;
  h.enter(0, "a", 1, 1000).reads(1, "a", 1, 0, 0);  // then SIGKILL: its section ends at 1 ms
  h.enter(500, "b", 2, 1000).add(510, "b", "exit", 2);
  h.enter(1100, "c", 3, 1000).add(1110, "c", "exit", 3);  // after a's claim: fine
  const auto r = run(h);
  EXPECT_TRUE(r.overlaps.empty()) << to_json(r);
  EXPECT_EQ(r.trust_violations, 1u) << "b entered inside the dead holder's lease";
  EXPECT_FALSE(r.clean()) << "a trust violation alone is unsafe";
}

TEST(checker_trust, the_same_owner_and_other_locks_do_not_violate_a_claim) {
  history h;
  h.enter(0, "a", 1, 1000, "x").enter(10, "b", 1, 1000, "y");
  h.enter(30, "a", 2, 1000, "x");  // a again (its exit unrecorded), inside its own window
  h.put(40, {.proc = "a", .kind = "exit", .token = 2, .lock = "x"});
  h.put(50, {.proc = "b", .kind = "exit", .token = 1, .lock = "y"});
  const auto r = run(h);
  EXPECT_EQ(r.trust_violations, 0u) << to_json(r);
  EXPECT_TRUE(r.clean()) << to_json(r);
}

// -- fencing order ---------------------------------------------------------------------------

TEST(checker_fencing, an_accepted_token_below_an_earlier_accepted_one_is_a_violation) {
  // a (token 5) is frozen; b (token 6) reads, raising the fence; the resource restarts and
  // forgets it; a resumes and its write with token 5 is accepted.
  history h;
  h.enter(0, "a", 5, 500).reads(1, "a", 5, 0, 0);
  h.enter(600, "b", 6, 500).reads(601, "b", 6, 0, 0).add(700, "b", "exit", 6);
  h.put(800, {.proc = "test", .kind = "fault", .detail = "restart resource server"});
  h.put(899, {.proc = "a", .kind = "invoke", .token = 5, .value = 1, .op = "write"});
  h.writes(900, "a", 5, 0, 0, 0, 0).add(901, "a", "exit", 5);
  const auto r = run(h);
  EXPECT_EQ(r.fenced_order_violations, 1u) << to_json(r);
  EXPECT_EQ(r.token_regressions, 0u);
  EXPECT_FALSE(r.clean());
}

TEST(checker_fencing, accesses_in_flight_together_and_equal_tokens_are_not) {
  history h;
  h.enter(0, "a", 5, -1).reads(1, "a", 5, 0, 0);
  h.enter(10, "b", 6, -1);
  // a's write was sent at 11 ms, before b's read was answered at 12 ms: the fence may have
  // seen a's write first.
  h.put(11, {.proc = "a", .kind = "invoke", .token = 5, .value = 1, .op = "write"});
  h.reads(12, "b", 6, 0, 0);
  h.put(13, {.proc = "a", .kind = "write", .token = 5, .value = 1, .prev = 0});
  h.add(14, "a", "exit", 5).add(15, "b", "exit", 6);
  // Equal tokens one after the other: monotone.
  h.enter(20, "c", 7, -1).reads(21, "c", 7, 1, 1).add(22, "c", "exit", 7);
  h.put(30, {.proc = "d", .kind = "enter", .token = 8});
  h.put(31, {.proc = "d", .kind = "read", .token = 7, .value = 1});
  h.add(32, "d", "exit", 8);
  const auto r = run(h);
  EXPECT_EQ(r.fenced_order_violations, 0u) << to_json(r);
}

TEST(checker_fencing, each_resource_has_its_own_order) {
  history h;
  h.enter(0, "a", 50, -1, "x");
  h.put(1, {.proc = "a", .kind = "read", .token = 50, .lock = "x"});
  h.put(2, {.proc = "a", .kind = "exit", .token = 50, .lock = "x"});
  h.enter(10, "b", 3, -1, "y");  // another lock's counter: smaller tokens
  h.put(11, {.proc = "b", .kind = "read", .token = 3, .lock = "y"});
  h.put(12, {.proc = "b", .kind = "read", .token = 3, .lock = "y", .resource = "x"});
  h.put(13, {.proc = "b", .kind = "exit", .token = 3, .lock = "y"});
  const auto r = run(h);
  EXPECT_EQ(r.fenced_order_violations, 1u) << "only the read of x's resource\n" << to_json(r);
  EXPECT_EQ(r.token_regressions, 0u) << "tokens are per lock";
}

// -- unknown outcomes ------------------------------------------------------------------------

// b's write of 2 timed out (applied, as it happens); c reads 2 and writes 3.
history with_an_unknown_write(std::int64_t final_value) {
  history h;
  h.section(0, 10, "a", 1, 0);
  h.enter(20, "b", 2, 500).reads(21, "b", 2, 1, 1);
  h.put(30, {.proc = "b", .kind = "invoke", .token = 2, .value = 2, .read = 1, .op = "write"});
  h.put(40, {.proc = "b", .kind = "write", .token = 2, .value = 2, .read = 1, .unknown = true});
  h.put(41, {.proc = "b", .kind = "error", .detail = "fenced write: timeout"});
  h.add(42, "b", "exit", 2);
  h.section(50, 60, "c", 3, 2);
  h.put(70, {.proc = "test", .kind = "final", .value = final_value, .prev = 2});
  return h;
}

TEST(checker_unknown, a_write_of_unknown_outcome_may_have_applied) {
  auto h = with_an_unknown_write(3);
  const auto r = run(h);
  EXPECT_EQ(r.fenced_lost_updates, 0u) << "its prev (0) is not judged\n" << to_json(r);
  EXPECT_EQ(r.fenced_writes_accepted, 2u);
  EXPECT_EQ(r.fenced_writes_unknown, 1u);
  EXPECT_TRUE(r.final_fenced_consistent()) << "3 = 2 accepted + the unknown one";
  EXPECT_TRUE(r.clean()) << to_json(r);
  EXPECT_EQ(r.errors, 1u);
}

TEST(checker_unknown, the_final_value_must_still_lie_within_what_may_have_applied) {
  for (const std::int64_t bad : {1, 4}) {
    auto h = with_an_unknown_write(bad);
    const auto r = run(h);
    EXPECT_FALSE(r.final_fenced_consistent()) << bad << '\n' << to_json(r);
    EXPECT_FALSE(r.clean());
  }
  // A write refused by the fence did not apply: it widens nothing.
  history h;
  h.section(0, 10, "a", 2, 0).reads(11, "b", 1, 1, 1, /*ok=*/false);
  h.put(12, {.proc = "b", .kind = "write", .token = 1, .ok = false, .value = 2, .read = 1});
  h.put(20, {.proc = "test", .kind = "final", .value = 2});
  const auto r = run(h);
  EXPECT_FALSE(r.final_fenced_consistent()) << to_json(r);
}

TEST(checker_unknown, a_write_cut_short_by_a_kill_is_neither_lost_nor_accepted) {
  history h;
  h.enter(0, "a", 1, 500).reads(1, "a", 1, 0, 0);
  h.put(5, {.proc = "a", .kind = "invoke", .token = 1, .value = 1, .op = "write"});
  // SIGKILL; the write landed. b finds 1 and the plain counter still 0.
  h.enter(600, "b", 2, 500).reads(601, "b", 2, 1, 0).writes(602, "b", 2, 1, 1, 0, 0);
  h.add(603, "b", "exit", 2);
  h.put(700, {.proc = "test", .kind = "final", .value = 2, .prev = 1});
  const auto r = run(h);
  EXPECT_EQ(r.incomplete, 1u) << to_json(r);
  EXPECT_EQ(r.fenced_writes_unknown, 1u);
  EXPECT_EQ(r.fenced_lost_updates, 0u);
  EXPECT_TRUE(r.final_fenced_consistent());
  EXPECT_TRUE(r.clean()) << to_json(r);
  ASSERT_EQ(r.sections.size(), 2u);
  EXPECT_EQ(r.sections[0].end, 5 * ms) << "the killed section ends at its last invoke";
}

TEST(checker_unknown, an_unfenced_write_of_unknown_outcome_is_counted_not_judged) {
  history h;
  h.enter(0, "a", 1, 500).reads(1, "a", 1, 0, 0);
  h.put(2, {.proc = "a", .kind = "invoke", .token = 1, .value = 1, .op = "uwrite"});
  h.put(3, {.proc = "a", .kind = "uwrite", .token = 1, .value = 1, .prev = 7, .unknown = true});
  h.add(4, "a", "exit", 1);
  const auto r = run(h);
  EXPECT_EQ(r.unfenced_writes_unknown, 1u) << to_json(r);
  EXPECT_EQ(r.unfenced_writes, 0u);
  EXPECT_EQ(r.unfenced_lost_updates, 0u);
  EXPECT_EQ(r.incomplete, 0u) << "its completion came";
}

// -- arrival order ---------------------------------------------------------------------------

// h holds the lock until 100 ms; a asks at 10 ms, b at `b_at`; who enters first is `first`.
history two_waiters(std::int64_t b_at, const std::string& first) {
  history h;
  h.section(0, 100, "h", 1, 0);
  h.add(10, "a", "acquire").add(b_at, "b", "acquire");
  const auto second = first == "a" ? "b" : "a";
  h.section(101, 110, first, 2, 1).section(111, 120, second, 3, 2);
  return h;
}

TEST(checker_fifo, a_later_waiter_entering_first_is_reported_when_fifo_is_claimed) {
  auto h = two_waiters(20, "b");
  const auto r = run(h, {.fifo = true});
  EXPECT_EQ(r.fifo_violations, 1u) << to_json(r);
  EXPECT_FALSE(r.clean());
  const auto unclaimed = run(h);
  EXPECT_FALSE(unclaimed.fifo_checked);
  EXPECT_TRUE(unclaimed.clean()) << "no lock claimed arrival order";
}

TEST(checker_fifo, waiters_in_arrival_order_or_too_close_to_tell_are_not) {
  auto in_order = two_waiters(20, "a");
  EXPECT_EQ(run(in_order, {.fifo = true}).fifo_violations, 0u);
  auto close = two_waiters(11, "b");  // 1 ms apart: which request arrived first is unknown
  EXPECT_EQ(run(close, {.fifo = true, .fifo_margin_ns = 2 * ms}).fifo_violations, 0u);
  EXPECT_EQ(run(close, {.fifo = true}).fifo_violations, 1u);
}

TEST(checker_fifo, waits_that_timed_out_errored_or_never_ended_are_not_judged) {
  history h;
  h.section(0, 100, "h", 1, 0);
  h.add(10, "a", "acquire").add(50, "a", "timeout");
  h.add(11, "c", "acquire").put(60, {.proc = "c", .kind = "error", .detail = "acquire: boom"});
  h.add(12, "d", "acquire");  // then SIGKILL
  h.add(20, "b", "acquire").section(101, 110, "b", 2, 1);
  h.add(30, "e", "acquire").put(35, {.proc = "e", .kind = "acquire", .lock = "other"});
  h.put(40, {.proc = "e", .kind = "enter", .token = 1, .lock = "other"});  // another lock
  const auto r = run(h, {.fifo = true});
  EXPECT_EQ(r.fifo_violations, 0u) << to_json(r);
}

// -- several locks, several threads ----------------------------------------------------------

TEST(checker_locks, sections_of_different_locks_may_overlap_those_of_one_lock_may_not) {
  history h;
  auto sec = [&](std::int64_t from, std::int64_t to, const std::string& p, const char* lock,
                 std::uint64_t token, std::int64_t value) {
    h.put(from, {.proc = p, .kind = "enter", .token = token, .left_ms = to - from, .lock = lock});
    h.put(from + 1, {.proc = p, .kind = "read", .token = token, .value = value, .lock = lock});
    h.put(to - 1, {.proc = p,
                   .kind = "write",
                   .token = token,
                   .value = value + 1,
                   .read = value,
                   .prev = value,
                   .lock = lock});
    h.put(to, {.proc = p, .kind = "exit", .token = token, .lock = lock});
  };
  sec(0, 100, "w1/t1", "x", 1, 0);  // two threads of w1, each holding its own lock
  sec(50, 150, "w1/t2", "y", 1, 0);
  sec(120, 180, "w2", "x", 2, 1);
  sec(200, 300, "w1/t1", "y", 2, 1);
  auto clean = run(h);
  EXPECT_TRUE(clean.clean()) << to_json(clean);
  EXPECT_EQ(clean.fenced_writes_accepted, 4u);

  // w1/t2 enters x while w2 holds it: an overlap, a trust violation, and w2's write is stale.
  sec(130, 140, "w1/t2", "x", 3, 2);
  const auto r = run(h);
  ASSERT_EQ(r.overlaps.size(), 1u) << to_json(r);
  EXPECT_EQ(r.sections[r.overlaps[0].first].proc, "w2");
  EXPECT_EQ(r.sections[r.overlaps[0].second].proc, "w1/t2");
  EXPECT_EQ(r.trust_violations, 1u);
  EXPECT_EQ(r.stale_accesses, 1u);
  EXPECT_EQ(r.fenced_lost_updates, 0u) << "each write replaced what it read";
}

TEST(checker_locks, threads_of_one_process_are_owners_of_their_own) {
  history h;
  h.enter(0, "w1/t1", 1, 500).enter(10, "w1/t2", 2, 500);
  h.add(20, "w1/t2", "exit", 2).add(30, "w1/t1", "exit", 1);
  h.put(40, {.proc = "w1/t1", .kind = "read", .token = 1});  // t1's access, after its exit
  const auto r = run(h);
  EXPECT_EQ(r.overlaps.size(), 1u) << to_json(r);
  EXPECT_EQ(r.trust_violations, 1u);
  EXPECT_EQ(r.accesses_outside, 1u);
}

}  // namespace
