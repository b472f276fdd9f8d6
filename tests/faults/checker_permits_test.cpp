// The checker's N-holder rule for semaphores (issue 26) on hand-written histories: permit
// sections ("mode":"permit", "lim" N, token 0) may overlap up to N at a time; more than N is a
// violation unless the holders beyond N were stalled past their lease and reported it (`lost`).
// No network.
#include <gtest/gtest.h>

#include <string>

#include "checker.hpp"
#include "checker_test_history.hpp"
#include "history.hpp"

namespace checker_permits_tests {

using dlock::faults::event;
using dlock::faults::checker_test::history;
using dlock::faults::checker_test::run;

// A permit's enter (token 0) claiming `left_ms`, of a semaphore of `limit` permits.
history& enter_permit(history& h, std::int64_t t_ms, const std::string& p, std::int64_t left_ms,
                      std::int64_t limit) {
  return h.put(t_ms,
               {.proc = p, .kind = "enter", .left_ms = left_ms, .mode = "permit", .limit = limit});
}

// A permit holder's accesses: a fenced read with token 0 and a plain GET.
history& permit_reads(history& h, std::int64_t t_ms, const std::string& p) {
  return h.reads(t_ms, p, 0, 0, 0);
}

TEST(checker_permits, up_to_n_permits_at_once_are_allowed) {
  history h;
  enter_permit(h, 0, "a", 1000, 2);
  permit_reads(h, 1, "a");
  enter_permit(h, 10, "b", 1000, 2);
  permit_reads(h, 11, "b");
  h.add(100, "a", "exit");
  enter_permit(h, 110, "c", 1000, 2);  // a left first: b and c
  permit_reads(h, 111, "c");
  h.add(200, "b", "exit").add(210, "c", "exit");
  const auto r = run(h);
  EXPECT_TRUE(r.clean()) << to_json(r);
  EXPECT_EQ(r.permit_violations, 0u);
  EXPECT_EQ(r.max_permit_holders, 2u);
  EXPECT_EQ(r.shared_overlaps, 2u) << "a-b, b-c";
  EXPECT_TRUE(r.overlaps.empty());
  EXPECT_EQ(r.trust_violations, 0u) << "permit pairs are judged by the N rule";
  EXPECT_EQ(r.token_regressions, 0u) << "permits carry no token";
  EXPECT_EQ(r.stale_accesses, 0u) << "another permit's enter makes nothing stale";
}

TEST(checker_permits, n_plus_one_trusted_holders_are_a_violation) {
  history h;
  enter_permit(h, 0, "a", 1000, 2);
  enter_permit(h, 10, "b", 1000, 2);
  enter_permit(h, 20, "c", 1000, 2);  // a and b still trust their permits
  h.add(100, "a", "exit").add(110, "b", "exit").add(120, "c", "exit");
  const auto r = run(h);
  EXPECT_FALSE(r.clean()) << to_json(r);
  EXPECT_EQ(r.permit_violations, 1u);
  EXPECT_EQ(r.permit_excess_excused, 0u);
  EXPECT_EQ(r.max_permit_holders, 3u);
  ASSERT_FALSE(r.notes.empty());
  EXPECT_NE(r.notes.back().find("permit violation"), std::string::npos) << r.notes.back();
}

TEST(checker_permits, n_plus_one_around_a_holder_stalled_past_its_lease_that_reported_it_pass) {
  history h;
  enter_permit(h, 0, "frozen", 1000, 2);
  permit_reads(h, 1, "frozen");  // then stopped
  enter_permit(h, 10, "b", 1000, 2);
  h.add(500, "b", "exit");
  enter_permit(h, 600, "c", 1000, 2);
  enter_permit(h, 1200, "d", 1000, 2);  // frozen's claim ran out at 1000: its permit reclaimed
  h.add(1300, "c", "exit").add(1310, "d", "exit");
  h.add(2000, "frozen", "lost");  // thawed: it sees its loss and touches nothing more
  const auto r = run(h);
  EXPECT_TRUE(r.clean()) << to_json(r);
  EXPECT_EQ(r.permit_violations, 0u);
  EXPECT_EQ(r.permit_excess_excused, 1u) << "d's enter: frozen, c, d";
  EXPECT_EQ(r.max_permit_holders, 3u);
}

TEST(checker_permits, a_stalled_holder_that_never_reported_its_loss_excuses_nothing) {
  history h;
  enter_permit(h, 0, "frozen", 1000, 2);
  enter_permit(h, 10, "b", 1000, 2);
  enter_permit(h, 1200, "c", 1000, 2);
  h.add(1300, "b", "exit").add(1310, "c", "exit");
  h.add(2000, "frozen", "exit");  // thawed, and went on as if it still held its permit
  const auto r = run(h);
  EXPECT_EQ(r.permit_violations, 1u) << to_json(r);
  EXPECT_EQ(r.permit_excess_excused, 0u);
  EXPECT_FALSE(r.clean());
}

TEST(checker_permits, a_loss_reported_while_the_claim_still_ran_excuses_nothing) {
  history h;
  enter_permit(h, 0, "a", 1000, 2);
  enter_permit(h, 10, "b", 1000, 2);
  enter_permit(h, 500, "c", 1000, 2);  // a claimed its permit until 1000
  h.add(600, "a", "lost").add(700, "b", "exit").add(710, "c", "exit");
  const auto r = run(h);
  EXPECT_EQ(r.permit_violations, 1u) << to_json(r);
  EXPECT_FALSE(r.clean());
}

TEST(checker_permits, each_semaphore_is_judged_on_its_own_and_a_missing_limit_means_one) {
  history h;
  h.put(0,
        {.proc = "a", .kind = "enter", .left_ms = 1000, .lock = "x", .mode = "permit", .limit = 1});
  h.put(10,
        {.proc = "b", .kind = "enter", .left_ms = 1000, .lock = "y", .mode = "permit", .limit = 1});
  h.add(100, "a", "exit").add(110, "b", "exit");
  h.put(200, {.proc = "c", .kind = "enter", .left_ms = 1000, .mode = "permit"});
  h.put(210, {.proc = "d", .kind = "enter", .left_ms = 1000, .mode = "permit"});
  h.add(300, "c", "exit").add(310, "d", "exit");
  const auto r = run(h);
  EXPECT_EQ(r.permit_violations, 1u) << "c and d, no limit recorded\n" << to_json(r);
  EXPECT_EQ(r.max_permit_holders, 2u);
}

TEST(checker_permits, a_permit_holder_s_access_after_an_exclusive_enter_is_stale) {
  history h;
  enter_permit(h, 0, "p", -1, 2);
  h.enter(100, "m", 5, -1).add(110, "m", "exit", 5);
  permit_reads(h, 120, "p");
  h.add(130, "p", "exit");
  const auto r = run(h);
  EXPECT_EQ(r.stale_accesses, 2u) << to_json(r);
  EXPECT_EQ(r.overlaps.size(), 1u) << "a permit and an exclusive hold conflict";
}

TEST(checker_permits, the_limit_round_trips_and_old_lines_parse_without_one) {
  event e{.t = 5, .proc = "p", .kind = "enter", .mode = "permit", .limit = 3};
  const auto line = dlock::faults::to_json(e);
  EXPECT_NE(line.find("\"lim\":3"), std::string::npos) << line;
  EXPECT_EQ(line.find("\"tok\""), std::string::npos) << "token 0 is not written";
  event back;
  ASSERT_TRUE(dlock::faults::parse_event(line, back));
  EXPECT_EQ(back.limit, 3);
  EXPECT_EQ(back.mode, "permit");
  ASSERT_TRUE(dlock::faults::parse_event(R"({"t":1,"p":"a","ev":"enter","tok":2})", back));
  EXPECT_EQ(back.limit, 0);
}

}  // namespace checker_permits_tests
