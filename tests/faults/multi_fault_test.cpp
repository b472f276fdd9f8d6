// dlock::multi_lock in the fault lab (issue 27), through the checker: workers take two names at
// once (dlock_fault_worker --kind multi), over sets that overlap in every pair — {A,B}, {B,A},
// {B,C}, {C,A} — so that a lock taking its members one by one while holding the others could
// deadlock ({A,B} against {B,A}) or go round in a cycle ({A,B}, {B,C}, {C,A}). Each member is a
// lock of the history guarding its own resource, written with that member's token; the checker
// judges overlaps and tokens per member and fencing per resource. The bound: every worker
// completes its sections within the test's wait (no deadlock, no livelock), with no overlap on
// any member. The checker's per-member judgement is shown on a live run too: a broken worker
// that takes the first of its members alone and claims them all (--kind
// broken-multi-first-only) must be flagged on the member it did not take, while dlock's
// multi_lock in the same run waits. Workers pause 30 ms between sections, as workers with other
// work would, so that each gets turns (multi_lock does not queue its waiters).
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "group_fault_lab.hpp"

using namespace std::chrono_literals;

namespace dlock::faults::test {
namespace {

class multi_lab : public group_lab {
 protected:
  // `workers` processes of `sections` sections each over the sets {A,B}, {B,A}, {B,C}, {C,A} in
  // turn (the names as given: "A" or "A@PORT"); returns the checked report and the run's time.
  report run_overlapping_sets(const std::vector<std::string>& names, int workers, int sections,
                              std::int64_t& took) {
    const auto url = lock_url("watchdog=2000ms");
    const auto &a = names[0], &b = names[1], &c = names[2];
    const std::vector<std::string> sets{a + "," + b, b + "," + a, b + "," + c, c + "," + a};
    const auto began = dlock::faults::monotonic_ns();
    for (int i = 0; i < workers; ++i) {
      spawn("w" + std::to_string(i), url,
            {"--kind", "multi", "--names", sets[static_cast<std::size_t>(i) % sets.size()],
             "--count", std::to_string(sections), "--hold", "10", "--jitter", "20", "--think", "30",
             "--wait", "20000", "--seed", std::to_string(51 + i)});
    }
    wait_all_exit(40s);  // the bound: each worker completes its sections and exits
    took = dlock::faults::monotonic_ns() - began;
    return finish_parts(names);
  }

  // What every run must show: no violation on any member, every worker's sections done.
  void expect_all_done(const report& r, int workers, int sections) {
    EXPECT_TRUE(r.clean()) << report_json_;
    expect_fenced_safety(r);
    EXPECT_TRUE(r.overlaps.empty()) << report_json_;
    EXPECT_EQ(r.trust_violations, 0u) << report_json_;
    EXPECT_EQ(r.token_regressions, 0u) << report_json_;
    EXPECT_EQ(r.errors, 0u) << report_json_;
    EXPECT_EQ(r.timeouts, 0u) << report_json_;
    EXPECT_EQ(r.lost_events, 0u) << report_json_;
    std::map<std::string, std::size_t> per_proc;
    for (const auto& s : r.sections) ++per_proc[s.proc];
    for (int i = 0; i < workers; ++i) {
      const auto id = "w" + std::to_string(i);
      EXPECT_EQ(per_proc[id], static_cast<std::size_t>(2 * sections)) << id << ": two members";
    }
  }

  // h holds {A,B} for 800 ms (watchdog lease 1 s); once it is in, w comes over {C,B} with
  // `kind` and holds 100 ms.
  report claimant_beside_holder(const std::string& kind) {
    const auto url = lock_url("watchdog=1000ms");
    const auto a = name_ + ":A", b = name_ + ":B", c = name_ + ":C";
    auto& h = spawn("h", url, {"--kind", "multi", "--names", a + "," + b, "--hold", "800"});
    EXPECT_TRUE(wait_line(h, "enter ", 15s)) << h.diagnostics();
    auto& w = spawn("w", url,
                    {"--kind", kind, "--names", c + "," + b, "--hold", "100", "--wait", "10000"});
    EXPECT_TRUE(wait_line(w, "exit ", 10s)) << w.diagnostics();
    wait_all_exit(10s);
    return finish_parts({a, b, c});
  }

  static std::string verdicts(const report& r) {
    return std::to_string(r.overlaps.size()) + " overlaps, " + std::to_string(r.trust_violations) +
           " trust violations, " + std::to_string(r.token_regressions) + " token regressions, " +
           std::to_string(r.stale_accesses) + " stale accesses, " +
           std::to_string(r.fenced_rejections) + " fenced rejections, " +
           std::to_string(r.fenced_lost_updates) + " fenced and " +
           std::to_string(r.unfenced_lost_updates) + " unfenced lost updates";
  }

  static std::string per_member(const report& r) {
    std::map<std::string, std::size_t> n;
    for (const auto& s : r.sections) ++n[s.lock.substr(s.lock.rfind(':') + 1)];
    std::string text;
    for (const auto& [lock, count] : n) {
      text += (text.empty() ? "" : ", ") + lock + " " + std::to_string(count);
    }
    return text;
  }
};

TEST_F(multi_lab,
       eight_processes_over_overlapping_sets_on_one_server_neither_deadlock_nor_overlap) {
  const std::vector<std::string> names{name_ + ":A", name_ + ":B", name_ + ":C"};
  constexpr int workers = 8, sections = 10;
  std::int64_t took = 0;
  const auto r = run_overlapping_sets(names, workers, sections, took);
  expect_all_done(r, workers, sections);
  measured(
      "multi_lock, 8 processes over {A,B} {B,A} {B,C} {C,A} on one server, 10 sections each "
      "(hold 10-30 ms): all done in " +
      ms_text(took) + " ms; sections per member: " + per_member(r) + "; " +
      std::to_string(r.overlaps.size()) + " overlaps, " + std::to_string(r.timeouts) +
      " timeouts, longest hand-off gap " + ms_text(r.max_handoff_gap_ns) + " ms");
}

TEST_F(multi_lab, members_on_three_servers_overlapping_sets_neither_deadlock_nor_overlap) {
  std::vector<std::string> names;
  for (std::size_t i = 0; i < n_servers; ++i) {
    names.push_back(name_ + ":" + std::string(1, static_cast<char>('A' + i)) + "@" +
                    std::to_string(server(i).port()));
  }
  constexpr int workers = 4, sections = 10;
  std::int64_t took = 0;
  const auto r = run_overlapping_sets(names, workers, sections, took);
  expect_all_done(r, workers, sections);
  measured(
      "multi_lock, 4 processes over {A,B} {B,A} {B,C} {C,A}, each member on its own "
      "server, 10 sections each: all done in " +
      ms_text(took) + " ms; sections per member: " + per_member(r) + "; " +
      std::to_string(r.overlaps.size()) + " overlaps, longest hand-off gap " +
      ms_text(r.max_handoff_gap_ns) + " ms");
}

TEST_F(multi_lab, a_worker_claiming_a_member_it_did_not_take_shows_an_overlap_on_that_member) {
  const auto r = claimant_beside_holder("broken-multi-first-only");
  EXPECT_FALSE(r.clean()) << report_json_;
  ASSERT_EQ(r.overlaps.size(), 1u) << "w's claim of B beside h's hold\n" << report_json_;
  EXPECT_EQ(r.sections[r.overlaps.front().first].lock, name_ + ":B") << report_json_;
  EXPECT_EQ(r.trust_violations, 1u) << "w entered B while h trusted its hold\n" << report_json_;
  EXPECT_EQ(r.token_regressions, 1u) << "w's token 0 for B, which it did not take\n"
                                     << report_json_;
  EXPECT_EQ(r.fenced_lost_updates, 0u) << "the fence refused w's token 0\n" << report_json_;
  measured(
      "broken worker taking the first of {C,B} alone and claiming both, beside a holder of "
      "{A,B}: " +
      verdicts(r));
}

TEST_F(multi_lab, dlock_s_multi_lock_in_the_same_run_waits_and_shows_none) {
  const auto r = claimant_beside_holder("multi");
  EXPECT_TRUE(r.clean()) << report_json_;
  expect_fenced_safety(r);
  EXPECT_EQ(r.errors, 0u) << report_json_;
  const auto* h = first_enter_after(r, 0, "h");
  const auto* w = first_enter_after(r, 0, "w");
  ASSERT_TRUE(h && w) << report_json_;
  EXPECT_GE(w->enter, h->end) << "w waited for B";
  measured("dlock's multi_lock in the same run: " + verdicts(r) + "; w entered " +
           ms_text(w->enter - h->end) + " ms after h's exit");
}

}  // namespace
}  // namespace dlock::faults::test
