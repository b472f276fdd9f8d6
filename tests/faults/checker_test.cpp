// The checker on hand-written histories: a clean run, and one history per violation it must
// report (overlap, token regression, fenced and unfenced lost updates, stale access, access
// after `lost`), plus the JSON-lines round trip. No network. The verdicts added for issue 24
// (trust, fencing order, unknown outcomes, FIFO, several locks) are in checker_verdicts_test.cpp.
#include "checker.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "checker_test_history.hpp"
#include "history.hpp"

namespace {

using dlock::faults::event;
using dlock::faults::checker_test::history;
using dlock::faults::checker_test::ms;
using dlock::faults::checker_test::run;

TEST(checker, a_clean_history_is_clean) {
  history h;
  h.section(0, 10, "a", 1, 0).section(12, 20, "b", 2, 1).section(21, 30, "a", 3, 2);
  h.events.push_back({.t = 40 * ms, .proc = "test", .kind = "final", .value = 3, .prev = 3});
  const auto r = run(h);
  EXPECT_TRUE(r.clean()) << to_json(r);
  EXPECT_EQ(r.sections.size(), 3u);
  EXPECT_EQ(r.fenced_writes_accepted, 3u);
  EXPECT_EQ(r.unfenced_writes, 3u);
  EXPECT_EQ(r.max_handoff_gap_ns, 2 * ms);
  EXPECT_TRUE(r.final_fenced_consistent());
}

TEST(checker, reports_overlapping_sections) {
  history h;
  h.section(0, 10, "a", 1, 0).section(5, 20, "b", 2, 0);
  const auto r = run(h);
  ASSERT_EQ(r.overlaps.size(), 1u) << to_json(r);
  EXPECT_EQ(r.sections[r.overlaps[0].first].proc, "a");
  EXPECT_EQ(r.sections[r.overlaps[0].second].proc, "b");
  EXPECT_EQ(r.overlaps[0].from, 5 * ms);
  EXPECT_EQ(r.overlaps[0].to, 10 * ms);
  EXPECT_FALSE(r.clean());
}

TEST(checker, a_killed_holder_s_section_ends_at_its_last_event) {
  history h;
  h.add(0, "a", "enter", 1).reads(1, "a", 1, 0, 0);  // then SIGKILL: no exit
  h.section(1000, 1010, "b", 2, 0);
  const auto r = run(h);
  EXPECT_TRUE(r.overlaps.empty()) << to_json(r);
  ASSERT_EQ(r.sections.size(), 2u);
  EXPECT_EQ(r.sections[0].how, dlock::faults::section::ending::cut);
  EXPECT_EQ(r.sections[0].end, 1 * ms + 1);
  EXPECT_TRUE(r.clean());
}

TEST(checker, reports_tokens_that_do_not_increase) {
  history h;
  h.section(0, 10, "a", 5, 0).section(20, 30, "b", 5, 1).section(40, 50, "a", 3, 2);
  const auto r = run(h);
  EXPECT_EQ(r.token_regressions, 2u) << to_json(r);
  EXPECT_FALSE(r.clean());
}

TEST(checker, reports_a_fenced_lost_update) {
  // b's accepted write replaced 7 although b read 6: someone's increment between is lost.
  history h;
  h.add(0, "b", "enter", 2)
      .reads(1, "b", 2, 6, 6)
      .writes(5, "b", 2, 6, 7, 6, 6)
      .add(6, "b", "exit", 2);
  h.events.push_back({.t = 10 * ms, .proc = "test", .kind = "final", .value = 7, .prev = 7});
  const auto r = run(h);
  EXPECT_EQ(r.fenced_lost_updates, 1u) << to_json(r);
  EXPECT_EQ(r.unfenced_lost_updates, 0u);
  EXPECT_FALSE(r.final_fenced_consistent()) << "one accepted write, final value 7";
  EXPECT_FALSE(r.clean());
}

TEST(checker, reports_an_unfenced_lost_update_and_the_stale_access_behind_it) {
  // a is frozen past its lease; b enters; a wakes and writes without checking.
  history h;
  h.add(0, "a", "enter", 1).reads(1, "a", 1, 0, 0);
  h.add(600, "b", "enter", 2).reads(601, "b", 2, 0, 0);
  h.writes(900, "a", 1, 0, 0, 0, 0, /*ok=*/false);  // the fence refuses a; its plain write lands
  h.writes(1000, "b", 2, 0, 0, 0, 1).add(1001, "b", "exit", 2);
  h.add(1002, "a", "exit", 1);
  const auto r = run(h);
  EXPECT_EQ(r.unfenced_lost_updates, 1u) << to_json(r);
  EXPECT_EQ(r.fenced_lost_updates, 0u);
  EXPECT_EQ(r.fenced_rejections, 1u);
  EXPECT_EQ(r.stale_accesses, 2u) << "a's fenced and unfenced writes after b entered";
  EXPECT_EQ(r.overlaps.size(), 1u);
  EXPECT_FALSE(r.clean());
}

TEST(checker, a_lost_holder_that_stops_is_an_overlap_but_touches_nothing) {
  history h;
  h.add(0, "a", "enter", 1).reads(1, "a", 1, 0, 0);
  h.section(600, 700, "b", 2, 0);
  h.add(650, "a", "lost", 1).add(651, "a", "release", 1);
  const auto r = run(h);
  EXPECT_EQ(r.overlaps.size(), 1u) << to_json(r);
  EXPECT_EQ(r.stale_accesses, 0u);
  EXPECT_EQ(r.fenced_lost_updates, 0u);
  EXPECT_EQ(r.unfenced_lost_updates, 0u);
  EXPECT_EQ(r.lost_events, 1u);
  EXPECT_EQ(r.sections[0].how, dlock::faults::section::ending::lost);
}

TEST(checker, reports_an_access_after_the_holder_s_own_lost) {
  history h;
  h.add(0, "a", "enter", 1).add(10, "a", "lost", 1).reads(11, "a", 1, 0, 0);
  const auto r = run(h);
  EXPECT_EQ(r.accesses_after_lost, 2u) << to_json(r);
  EXPECT_FALSE(r.clean());
}

TEST(checker, counts_errors_and_timeouts_without_calling_them_unsafe) {
  history h;
  h.section(0, 10, "a", 1, 0).add(11, "b", "timeout");
  h.events.push_back({.t = 12 * ms, .proc = "b", .kind = "error", .detail = "acquire: boom"});
  const auto r = run(h);
  EXPECT_EQ(r.errors, 1u);
  EXPECT_EQ(r.timeouts, 1u);
  EXPECT_TRUE(r.clean());
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_NE(r.notes[0].find("boom"), std::string::npos);
}

TEST(history, json_lines_round_trip) {
  const event e{.t = 123456789012,
                .proc = "w\"1",
                .kind = "write",
                .token = 42,
                .ok = false,
                .value = -3,
                .read = 7,
                .prev = 9,
                .left_ms = 0,
                .detail = "a\\b\n\x01",
                .lock = "l{1}",
                .op = "uwrite",
                .unknown = true,
                .resource = "r\"2"};
  const auto line = dlock::faults::to_json(e);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  event back;
  ASSERT_TRUE(dlock::faults::parse_event(line, back)) << line;
  EXPECT_EQ(back.t, e.t);
  EXPECT_EQ(back.proc, e.proc);
  EXPECT_EQ(back.kind, e.kind);
  EXPECT_EQ(back.token, e.token);
  EXPECT_EQ(back.ok, e.ok);
  EXPECT_EQ(back.value, e.value);
  EXPECT_EQ(back.read, e.read);
  EXPECT_EQ(back.prev, e.prev);
  EXPECT_EQ(back.left_ms, 0);
  EXPECT_EQ(back.detail, e.detail);
  EXPECT_EQ(back.lock, e.lock);
  EXPECT_EQ(back.op, e.op);
  EXPECT_TRUE(back.unknown);
  EXPECT_EQ(back.resource, e.resource);

  event defaults;
  ASSERT_TRUE(dlock::faults::parse_event(R"({"t":5,"p":"x","ev":"exit"})", defaults));
  EXPECT_TRUE(defaults.ok);
  EXPECT_EQ(defaults.left_ms, -1);
  EXPECT_EQ(defaults.lock, "") << "a history without locks names the one lock";
  EXPECT_FALSE(defaults.unknown);
  EXPECT_EQ(dlock::faults::to_json(defaults), R"({"t":5,"p":"x","ev":"exit"})")
      << "fields left at their defaults are not written";
  for (const char* bad : {"", "{", R"({"t":5,"p":"x"})", R"({"t":5,"p":"x","ev":"e"} x)",
                          R"({"t":"5","p":"x","ev":"e"})", R"({"t":5,"p":"x","ev":"e",})"}) {
    EXPECT_FALSE(dlock::faults::parse_event(bad, defaults)) << bad;
  }
}

}  // namespace
