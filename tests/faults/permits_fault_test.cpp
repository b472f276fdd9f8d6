// The fault lab for dlock::leased_semaphore (issue 26), through the checker's N-holder rule
// (checker_permits.cpp): dlock_fault_worker --kind permits --permits N.
// - Six workers on 2 permits; one holder is frozen (SIGSTOP) past its 1 s watchdog lease. Its
//   permit is reclaimed on the server when the lease ends and two others hold at once beside
//   it: 3 sections overlap, which the checker allows only because the frozen one reports
//   lease_lost when thawed (and touches nothing more).
// - The checker proves the rule on a live run: two holders keep both permits while a third
//   worker comes. A broken worker that behaves as if N were N + 1 (it adds a permit for itself,
//   --kind broken-permits-adds-one) gets in beside them and must be flagged; dlock's permit
//   kind in the same run waits and shows none.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "kinds_fault_lab.hpp"

using namespace std::chrono_literals;

namespace dlock::faults::test::permits_fault {

class permits_lab : public kinds_lab {
 protected:
  static std::vector<std::string> permit_args(const std::string& kind,
                                              std::vector<std::string> more) {
    std::vector<std::string> args{"--kind", kind, "--permits", "2"};
    args.insert(args.end(), more.begin(), more.end());
    return args;
  }

  // The milliseconds left on the permit of {name}:timeout with the nearest deadline, by the
  // server's TIME (one script: the 16-byte ids stay on the server).
  long long nearest_permit_ms_left() const {
    return lock_int({"EVAL",
                     "local r = redis.call('zrange', KEYS[1], 0, 0, 'WITHSCORES') "
                     "if #r == 0 then return -1 end "
                     "local t = redis.call('time') "
                     "return tonumber(r[2]) - (t[1] * 1000 + math.floor(t[2] / 1000))",
                     "1", dlock::keys::permit_timeouts(name_)});
  }

  // The first enter after `t` that made two sections of workers other than `frozen` overlap:
  // when the frozen holder's permit had been reclaimed and taken. 0 when none did.
  static std::int64_t first_pair_without(const report& r, const std::string& frozen,
                                         std::int64_t t) {
    for (std::size_t j = 0; j < r.sections.size(); ++j) {
      const auto& b = r.sections[j];
      if (b.proc == frozen || b.enter < t) continue;
      for (std::size_t i = 0; i < j; ++i) {
        const auto& a = r.sections[i];
        if (a.proc != frozen && a.proc != b.proc && a.end > b.enter) return b.enter;
      }
    }
    return 0;
  }

  // Holders g1 and g2 take both permits (hold 800 ms, watchdog lease 1 s); once both are in, w
  // comes with `kind` and holds 100 ms.
  report third_beside_two(const std::string& kind) {
    const auto url = lock_url("watchdog=1000ms");
    auto& g1 = spawn("g1", url, permit_args("permits", {"--hold", "800"}));
    EXPECT_TRUE(wait_line(g1, "enter ", 15s)) << g1.diagnostics();
    auto& g2 = spawn("g2", url, permit_args("permits", {"--hold", "800"}));
    EXPECT_TRUE(wait_line(g2, "enter ", 5s)) << g2.diagnostics();
    auto& w = spawn("w", url, permit_args(kind, {"--hold", "100", "--wait", "10000"}));
    EXPECT_TRUE(wait_line(w, "exit ", 10s)) << w.diagnostics();
    wait_all_exit(10s);
    return finish();
  }

  static std::string permit_verdicts(const report& r) {
    return std::to_string(r.permit_violations) + " permit violations, " +
           std::to_string(r.permit_excess_excused) + " excused, at most " +
           std::to_string(r.max_permit_holders) + " permit holders at once";
  }
};

TEST_F(permits_lab, six_workers_two_permits_a_holder_frozen_past_its_lease_reports_lease_lost) {
  const auto url = lock_url("watchdog=1000ms");
  auto& frozen = spawn("frozen", url, permit_args("permits", {"--hold", "5000"}));
  ASSERT_TRUE(wait_line(frozen, "enter ", 15s)) << frozen.diagnostics();
  for (int i = 0; i < 5; ++i) {
    spawn("w" + std::to_string(i), url,
          permit_args("permits", {"--count", "1000", "--hold", "60", "--jitter", "40", "--wait",
                                  "10000", "--seed", std::to_string(21 + i)}));
  }
  ASSERT_TRUE(recorded("w0", "exit", 10s)) << "the others go round the other permit";
  const auto stopped = freeze_holder(frozen, "frozen", freeze::in_the_hold);
  std::this_thread::sleep_for(200ms);  // the holders at the stop have left: the nearest is its
  const auto asked = dlock::faults::monotonic_ns();
  const auto left = nearest_permit_ms_left();
  ASSERT_GT(left, 0) << "the frozen holder's lease still runs";
  ASSERT_LE(left, 1000);
  const auto lease_end = asked + left * ns_per_ms;
  std::this_thread::sleep_for(2000ms);  // well past its lease: the others hold 2 at a time
  const auto resumed = thaw(frozen, "frozen");
  std::this_thread::sleep_for(300ms);
  for (std::size_t i = 1; i < workers_.size(); ++i) workers_[i]->close_stdin();
  wait_all_exit(20s);

  const auto r = finish();
  EXPECT_TRUE(r.clean()) << report_json_;
  expect_no_violation(r);
  EXPECT_EQ(r.permit_violations, 0u) << report_json_;
  EXPECT_GE(r.permit_excess_excused, 1u) << "the frozen holder's permit was taken beside it\n"
                                         << report_json_;
  EXPECT_EQ(r.max_permit_holders, 3u) << report_json_;
  EXPECT_EQ(r.stale_accesses, 0u) << report_json_;
  EXPECT_EQ(r.accesses_after_lost, 0u) << report_json_;
  EXPECT_EQ(r.fenced_writes_accepted + r.unfenced_writes, 0u) << "permit holders only read";
  const auto lost_ns = expect_thawed("frozen", resumed, freeze::in_the_hold);
  const auto pair = first_pair_without(r, "frozen", stopped);
  ASSERT_GT(pair, 0) << report_json_;
  EXPECT_GE(pair, lease_end - 20 * ns_per_ms) << "not before the frozen permit's lease ended";
  EXPECT_LE(pair, lease_end + takeover_bound_ns) << "waiters wake at the nearest deadline";
  std::size_t sections = 0;
  for (const auto& s : r.sections) sections += s.proc != "frozen";
  EXPECT_GE(sections, 20u) << "the others made progress";
  measured(
      "leased_semaphore, 2 permits, 6 workers, SIGSTOP of a holder in its hold, watchdog "
      "lease 1000 ms: two others held at once " +
      ms_text(pair - stopped) + " ms after the stop, " + ms_text(pair - lease_end) +
      " ms after its lease end (server deadline); thawed holder's lost " + ms_text(lost_ns) +
      " ms after SIGCONT, release lease_lost; " + std::to_string(sections) + " other sections; " +
      permit_verdicts(r));
}

TEST_F(permits_lab, a_worker_acting_as_if_n_were_larger_shows_a_permit_violation) {
  const auto r = third_beside_two("broken-permits-adds-one");
  EXPECT_FALSE(r.clean()) << report_json_;
  EXPECT_EQ(r.permit_violations, 1u) << "w entered beside g1 and g2\n" << report_json_;
  EXPECT_EQ(r.permit_excess_excused, 0u) << report_json_;
  EXPECT_EQ(r.max_permit_holders, 3u) << report_json_;
  EXPECT_EQ(r.errors, 0u) << report_json_;
  measured("broken worker adding a permit for itself beside 2 holders of 2 permits: " +
           permit_verdicts(r));
}

TEST_F(permits_lab, dlock_s_permit_in_the_same_run_waits_and_shows_none) {
  const auto r = third_beside_two("permits");
  EXPECT_TRUE(r.clean()) << report_json_;
  EXPECT_EQ(r.permit_violations, 0u) << report_json_;
  EXPECT_EQ(r.max_permit_holders, 2u) << report_json_;
  EXPECT_EQ(r.errors, 0u) << report_json_;
  expect_fenced_safety(r);
  const auto* w = first_enter_after(r, 0, "w");
  ASSERT_NE(w, nullptr);
  const auto* g1 = first_enter_after(r, 0, "g1");
  const auto* g2 = first_enter_after(r, 0, "g2");
  ASSERT_TRUE(g1 && g2) << report_json_;
  EXPECT_GE(w->enter, std::min(g1->end, g2->end)) << "w waited for a holder to leave";
  measured("dlock's permit in the same run: " + permit_verdicts(r) + "; w entered " +
           ms_text(w->enter - std::min(g1->end, g2->end)) + " ms after the first holder's exit");
}

}  // namespace dlock::faults::test::permits_fault
