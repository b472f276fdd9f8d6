// The checker's rule for shared locks (issue 25) on hand-written histories: read holds may
// overlap each other; a write hold conflicts with every hold, read or write; a history without
// modes is judged as before (every hold exclusive). No network.
#include <gtest/gtest.h>

#include <string>

#include "checker.hpp"
#include "checker_test_history.hpp"
#include "history.hpp"

namespace {

using dlock::faults::event;
using dlock::faults::checker_test::history;
using dlock::faults::checker_test::run;

// An enter of `mode` ("read", "write") claiming `left_ms` of trust.
history& enter_as(history& h, std::int64_t t_ms, const std::string& p, std::uint64_t token,
                  std::int64_t left_ms, const std::string& mode) {
  return h.put(t_ms,
               {.proc = p, .kind = "enter", .token = token, .left_ms = left_ms, .mode = mode});
}

TEST(checker_modes, read_holds_may_overlap_and_are_counted_not_reported) {
  history h;
  // r2's token was issued after r1's but its enter is recorded first.
  enter_as(h, 0, "r2", 8, 1000, "read").reads(1, "r2", 8, 0, 0);
  enter_as(h, 5, "r1", 7, 1000, "read").reads(6, "r1", 7, 0, 0, false);
  enter_as(h, 10, "r3", 9, 1000, "read").reads(11, "r3", 9, 0, 0);
  h.add(100, "r1", "exit", 7).add(110, "r2", "exit", 8).add(120, "r3", "exit", 9);
  const auto r = run(h);
  EXPECT_TRUE(r.overlaps.empty()) << to_json(r);
  EXPECT_EQ(r.shared_overlaps, 3u) << "r1-r2, r1-r3, r2-r3";
  EXPECT_EQ(r.trust_violations, 0u);
  EXPECT_EQ(r.token_regressions, 0u) << "reads are not ordered among themselves";
  EXPECT_EQ(r.stale_accesses, 0u) << "a reader's access after another reader entered";
  EXPECT_TRUE(r.clean()) << to_json(r);
}

TEST(checker_modes, a_write_entering_inside_a_trusted_read_is_a_trust_violation) {
  history h;
  enter_as(h, 0, "r", 1, 500, "read").reads(1, "r", 1, 0, 0);
  enter_as(h, 300, "w", 2, 500, "write").add(310, "w", "exit", 2);
  h.add(320, "r", "exit", 1);
  const auto r = run(h);
  EXPECT_EQ(r.trust_violations, 1u) << to_json(r);
  EXPECT_EQ(r.overlaps.size(), 1u);
  EXPECT_FALSE(r.clean());
}

TEST(checker_modes, a_read_entering_inside_a_trusted_write_is_a_trust_violation) {
  history h;
  enter_as(h, 0, "w", 1, 500, "write").reads(1, "w", 1, 0, 0);
  enter_as(h, 300, "r", 2, 500, "read").reads(301, "r", 2, 0, 0).add(310, "r", "exit", 2);
  h.writes(315, "w", 1, 0, 0, 0, 0, false).add(320, "w", "exit", 1);
  const auto r = run(h);
  EXPECT_EQ(r.trust_violations, 1u) << to_json(r);
  EXPECT_EQ(r.overlaps.size(), 1u);
  EXPECT_EQ(r.stale_accesses, 2u) << "the writer wrote (fenced, unfenced) after a reader entered";
  EXPECT_FALSE(r.clean());
}

TEST(checker_modes, two_writes_at_once_conflict_as_exclusive_holds_do) {
  history h;
  enter_as(h, 0, "w1", 1, 500, "write");
  enter_as(h, 100, "w2", 2, 500, "write").add(110, "w2", "exit", 2);
  h.add(120, "w1", "exit", 1);
  const auto r = run(h);
  EXPECT_EQ(r.trust_violations, 1u) << to_json(r);
  EXPECT_EQ(r.overlaps.size(), 1u);
  EXPECT_EQ(r.shared_overlaps, 0u);
}

TEST(checker_modes, a_write_after_a_frozen_reader_s_claim_ran_out_is_an_overlap_only) {
  history h;
  enter_as(h, 0, "r", 1, 500, "read").reads(1, "r", 1, 0, 0);  // then frozen
  enter_as(h, 600, "w", 2, 500, "write").reads(601, "w", 2, 0, 0);
  h.writes(650, "w", 2, 0, 0, 0, 0).add(660, "w", "exit", 2);
  h.add(800, "r", "lost", 1);
  const auto r = run(h);
  EXPECT_EQ(r.trust_violations, 0u) << to_json(r);
  EXPECT_EQ(r.overlaps.size(), 1u) << "the frozen reader believed it held the lock";
  EXPECT_EQ(r.stale_accesses, 0u) << "the reader touched nothing after the writer entered";
}

TEST(checker_modes, a_reader_s_access_after_a_writer_entered_is_stale) {
  history h;
  enter_as(h, 0, "r", 1, -1, "read");
  enter_as(h, 100, "w", 2, -1, "write").add(110, "w", "exit", 2);
  h.reads(120, "r", 1, 0, 0, false).add(130, "r", "exit", 1);
  const auto r = run(h);
  EXPECT_EQ(r.stale_accesses, 2u) << to_json(r);  // its read and its uread
  EXPECT_EQ(r.trust_violations, 0u) << "no claims";
}

TEST(checker_modes, a_write_token_below_an_earlier_read_s_is_a_regression) {
  history h;
  enter_as(h, 0, "r", 5, -1, "read").add(10, "r", "exit", 5);
  enter_as(h, 20, "w", 4, -1, "write").add(30, "w", "exit", 4);
  enter_as(h, 40, "r2", 3, -1, "read").add(50, "r2", "exit", 3);  // below the write's 4
  const auto r = run(h);
  EXPECT_EQ(r.token_regressions, 2u) << to_json(r);
}

TEST(checker_modes, histories_without_modes_stay_exclusive) {
  history h;
  h.enter(0, "a", 1, 500).enter(100, "b", 2, 500).add(110, "b", "exit", 2);
  h.add(120, "a", "exit", 1);
  const auto r = run(h);
  EXPECT_EQ(r.overlaps.size(), 1u) << to_json(r);
  EXPECT_EQ(r.trust_violations, 1u);
  EXPECT_EQ(r.shared_overlaps, 0u);
}

TEST(checker_modes, the_mode_round_trips_and_old_lines_parse_without_one) {
  event e{.t = 5, .proc = "r", .kind = "enter", .token = 3, .mode = "read"};
  const auto line = dlock::faults::to_json(e);
  EXPECT_NE(line.find("\"mode\":\"read\""), std::string::npos) << line;
  event back;
  ASSERT_TRUE(dlock::faults::parse_event(line, back));
  EXPECT_EQ(back.mode, "read");
  ASSERT_TRUE(
      dlock::faults::parse_event(R"({"t":1,"p":"a","ev":"enter","tok":2,"left":900})", back));
  EXPECT_EQ(back.mode, "");
  EXPECT_EQ(back.left_ms, 900);
  EXPECT_EQ(dlock::faults::to_json(event{.t = 1, .proc = "a", .kind = "exit"}).find("mode"),
            std::string::npos)
      << "no mode written for an exclusive hold";
}

}  // namespace
