// The checker proves itself: the same workload and faults on deliberately broken locks
// (broken_lock.hpp) must be flagged — each verdict by a live run of a lock that breaks it — while
// dlock in the same run shape shows none of them; and the command-line checker must fail on a
// violation.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "fault_lab.hpp"

using namespace std::chrono_literals;

namespace dlock::faults::test {
namespace {

// -- the checker proves itself on broken locks ---------------------------------------------------

TEST_F(fault_lab, checker_flags_a_lock_whose_holder_never_checks_its_lease) {
  const auto url = lock_url("");
  auto& a = spawn("a", url, {"--lock", "broken-no-expiry", "--lease", "500", "--hold", "800"});
  ASSERT_TRUE(wait_line(a, "enter ", 15s)) << a.diagnostics();
  auto& b = spawn("b", url, {"--lock", "broken-no-expiry", "--lease", "2000", "--hold", "1000"});
  a.pause();
  fault("sigstop a");
  ASSERT_TRUE(wait_line(b, "enter ", 5s)) << b.diagnostics();
  std::this_thread::sleep_for(300ms);  // not ordering: lets a's hold run out
  fault("sigcont a");
  a.resume();
  wait_all_exit(10s);
  const auto r = finish();
  EXPECT_FALSE(r.clean());
  EXPECT_EQ(r.overlaps.size(), 1u) << report_json_;
  EXPECT_GE(r.stale_accesses, 1u) << "a wrote after b entered\n" << report_json_;
  EXPECT_GE(r.unfenced_lost_updates, 1u) << "b's plain write replaced a's\n" << report_json_;
  EXPECT_EQ(r.fenced_lost_updates, 0u) << "the fence refused a\n" << report_json_;
  EXPECT_GE(r.fenced_rejections, 1u) << report_json_;
  EXPECT_EQ(r.trust_violations, 0u) << "it claims no trust\n" << report_json_;
  measured("broken lock without expiry check + SIGSTOP: " + std::to_string(r.overlaps.size()) +
           " overlap, " + std::to_string(r.stale_accesses) + " stale accesses, " +
           std::to_string(r.unfenced_lost_updates) + " unfenced lost updates, " +
           std::to_string(r.fenced_lost_updates) + " fenced lost updates");
}

TEST_F(fault_lab, checker_flags_a_lock_released_without_an_owner_check) {
  const auto url = lock_url("");
  auto& a = spawn("a", url, {"--lock", "broken-no-owner-check", "--lease", "500", "--hold", "400"});
  ASSERT_TRUE(wait_line(a, "enter ", 15s)) << a.diagnostics();
  auto& b =
      spawn("b", url, {"--lock", "broken-no-owner-check", "--lease", "3000", "--hold", "1200"});
  a.pause();
  fault("sigstop a");
  ASSERT_TRUE(wait_line(b, "enter ", 5s)) << b.diagnostics();
  auto& c =
      spawn("c", url, {"--lock", "broken-no-owner-check", "--lease", "3000", "--hold", "100"});
  std::this_thread::sleep_for(300ms);  // not ordering: lets a's hold run out
  fault("sigcont a");
  a.resume();  // a sees its lease over, stops, and DELs b's lock: c walks in
  ASSERT_TRUE(wait_line(c, "enter ", 5s)) << c.diagnostics();
  wait_all_exit(10s);
  const auto r = finish();
  EXPECT_FALSE(r.clean());
  bool b_and_c = false;
  for (const auto& ov : r.overlaps) {
    b_and_c |= r.sections[ov.first].proc == "b" && r.sections[ov.second].proc == "c";
  }
  EXPECT_TRUE(b_and_c) << "c entered while b held the lock\n" << report_json_;
  EXPECT_EQ(r.accesses_after_lost, 0u) << "a itself stopped\n" << report_json_;
  EXPECT_GE(r.stale_accesses, 1u) << "b wrote after c entered\n" << report_json_;
  EXPECT_GE(r.unfenced_lost_updates, 1u) << "b's plain write replaced c's\n" << report_json_;
  EXPECT_EQ(r.fenced_lost_updates, 0u) << "the fence refused b\n" << report_json_;
  EXPECT_GE(r.trust_violations, 1u) << "c entered while b trusted its lease\n" << report_json_;
  measured("broken lock without owner check on release + SIGSTOP: " +
           std::to_string(r.overlaps.size()) + " overlaps, " + std::to_string(r.trust_violations) +
           " trust violations, " + std::to_string(r.stale_accesses) + " stale accesses, " +
           std::to_string(r.unfenced_lost_updates) + " unfenced lost updates, " +
           std::to_string(r.fenced_lost_updates) + " fenced lost updates");
}

// -- each new verdict by a live lock that breaks it, and dlock in the same run ----------------

class self_check : public fault_lab {
 protected:
  // a (lease 500 ms, hold 800 ms) is frozen in its hold, once it has read; b (lease 2 s, hold
  // 1 s) enters; a is thawed 300 ms later. `lock` is the workers' --lock. (Frozen sooner, a
  // could be stopped between its lease check and an access, which it would make after `lost`:
  // the check-then-act window only fencing closes.)
  report frozen_holder(const std::string& lock) {
    const auto url = lock_url("");
    auto& a = spawn("a", url, {"--lock", lock, "--lease", "500", "--hold", "800"});
    EXPECT_TRUE(wait_line(a, "enter ", 15s)) << a.diagnostics();
    EXPECT_TRUE(recorded("a", "uread", 5s)) << a.diagnostics();
    auto& b = spawn("b", url, {"--lock", lock, "--lease", "2000", "--hold", "1000"});
    a.pause();
    fault("sigstop a");
    EXPECT_TRUE(wait_line(b, "enter ", 5s)) << b.diagnostics();
    std::this_thread::sleep_for(300ms);  // not ordering: lets a's hold run out
    fault("sigcont a");
    a.resume();
    wait_all_exit(10s);
    return finish();
  }

  // a takes a 500 ms lease and holds for 1 200 ms; b asks for the lock meanwhile.
  report overstaying_holder(const std::string& lock) {
    const auto url = lock_url("");
    auto& a = spawn("a", url, {"--lock", lock, "--lease", "500", "--hold", "1200"});
    EXPECT_TRUE(wait_line(a, "enter ", 15s)) << a.diagnostics();
    auto& b = spawn("b", url, {"--lock", lock, "--lease", "2000", "--hold", "100"});
    EXPECT_TRUE(wait_line(b, "enter ", 5s)) << b.diagnostics();
    wait_all_exit(10s);
    return finish();
  }

  // Whether `proc`'s history shows an event of `kind` within `limit` (polled: the worker prints
  // no line for it).
  bool recorded(const std::string& proc, const std::string& kind, milliseconds limit) {
    return dlock::test::wait_until(
        [&] {
          for (const auto& e : dlock::faults::read_history(dir_.path() + "/" + proc + ".jsonl")) {
            if (e.kind == kind) return true;
          }
          return false;
        },
        limit);
  }

  // a holds the lock 2 s; six waiters w1..w6 ask for it one after another (each has recorded its
  // `acquire`, then 40 ms pass, before the next starts) and hold it 30 ms each.
  report queued_waiters(const std::string& lock) {
    const auto url = lock_url("");
    auto& a = spawn("a", url, {"--lock", lock, "--lease", "5000", "--hold", "2000"});
    EXPECT_TRUE(wait_line(a, "enter ", 15s)) << a.diagnostics();
    for (int i = 1; i <= 6; ++i) {
      const auto id = "w" + std::to_string(i);
      spawn(id, url, {"--lock", lock, "--lease", "5000", "--hold", "30", "--wait", "15000"});
      EXPECT_TRUE(recorded(id, "acquire", 5s)) << id;
      std::this_thread::sleep_for(40ms);  // not ordering: spaces the arrivals past the margin
    }
    wait_all_exit(20s);
    return finish({.fifo = true, .fifo_margin_ns = 20 * ns_per_ms});
  }

  // What every verdict below says, for measured().
  static std::string verdicts(const report& r) {
    return std::to_string(r.overlaps.size()) + " overlaps, " + std::to_string(r.trust_violations) +
           " trust violations, " + std::to_string(r.token_regressions) + " token regressions, " +
           std::to_string(r.fenced_lost_updates) + " fenced lost updates, " +
           std::to_string(r.fenced_order_violations) + " fenced order violations, " +
           std::to_string(r.stale_accesses) + " stale accesses, " +
           std::to_string(r.unfenced_lost_updates) + " unfenced lost updates";
  }

  // What dlock must never show, whatever the run (an overlap may: a frozen holder believes it
  // holds the lock until it is thawed and told).
  void expect_none_of_the_verdicts(const report& r) {
    EXPECT_EQ(r.trust_violations, 0u) << report_json_;
    EXPECT_EQ(r.token_regressions, 0u) << report_json_;
    EXPECT_EQ(r.fenced_order_violations, 0u) << report_json_;
    EXPECT_EQ(r.errors, 0u) << report_json_;
    expect_fenced_safety(r);
  }
};

TEST_F(self_check, a_lock_that_reuses_tokens_shows_fenced_lost_updates_and_token_regressions) {
  const auto r = frozen_holder("broken-reuses-tokens");
  EXPECT_GE(r.token_regressions, 1u) << "b entered with a's token\n" << report_json_;
  EXPECT_GE(r.fenced_lost_updates, 1u) << "the fence let both write\n" << report_json_;
  EXPECT_EQ(r.fenced_rejections, 0u) << "an equal token passes the fence\n" << report_json_;
  EXPECT_FALSE(r.clean());
  measured("broken lock reusing its token (GET, not INCR; no expiry check) + SIGSTOP: " +
           verdicts(r));
}

TEST_F(self_check, dlock_in_the_reused_token_run_shows_none) {
  const auto r = frozen_holder("dlock");
  expect_none_of_the_verdicts(r);
  EXPECT_EQ(r.lost_events, 1u) << "a was told on thawing\n" << report_json_;
  measured("dlock, lease 500 ms, in the same run + SIGSTOP: " + verdicts(r));
}

TEST_F(self_check, a_lock_that_over_reports_its_trust_shows_trust_violations) {
  const auto r = overstaying_holder("broken-over-reports-trust");
  EXPECT_GE(r.trust_violations, 1u) << "b entered inside a's claimed 1 500 ms\n" << report_json_;
  EXPECT_GE(r.overlaps.size(), 1u) << report_json_;
  EXPECT_GE(r.stale_accesses, 1u) << "a wrote after b entered\n" << report_json_;
  EXPECT_EQ(r.fenced_lost_updates, 0u) << "the fence refused a\n" << report_json_;
  measured("broken lock reporting 3x its lease as time left, no fault: " + verdicts(r));
}

TEST_F(self_check, dlock_in_the_over_reported_trust_run_shows_none) {
  const auto r = overstaying_holder("dlock");
  expect_none_of_the_verdicts(r);
  EXPECT_EQ(r.lost_events, 1u) << "a was told at its lease's end\n" << report_json_;
  measured("dlock, lease 500 ms, holding 1 200 ms, in the same run: " + verdicts(r));
}

// Arrival order, where dlock claims it (dlock waiters are served oldest first): a lock whose
// waiters poll (SET NX every 10 ms) serves six of them in whatever order the polls land.
TEST_F(self_check, a_polling_lock_shows_fifo_violations) {
  const auto r = queued_waiters("broken-no-expiry");
  EXPECT_TRUE(r.fifo_checked);
  EXPECT_GE(r.fifo_violations, 1u) << "six pollers in arrival order: 1 in 720\n" << report_json_;
  measured("broken lock (waiters poll every 10 ms), 6 waiters queued 40 ms apart: " +
           std::to_string(r.fifo_violations) + " FIFO violations");
}

TEST_F(self_check, dlock_serves_the_same_waiters_in_arrival_order) {
  const auto r = queued_waiters("dlock");
  EXPECT_TRUE(r.fifo_checked);
  EXPECT_EQ(r.fifo_violations, 0u) << report_json_;
  EXPECT_TRUE(r.clean()) << report_json_;
  measured("dlock, the same 6 waiters: " + std::to_string(r.fifo_violations) +
           " FIFO violations, " + verdicts(r));
}

TEST_F(fault_lab, the_checker_command_prints_the_report_and_fails_on_a_violation) {
  {
    dlock::faults::history_writer a{dir_.path() + "/a.jsonl", "a"};
    a.record({.t = 1 * ns_per_ms, .kind = "enter", .token = 1});
    a.record({.t = 10 * ns_per_ms, .kind = "exit", .token = 1});
    dlock::faults::history_writer b{dir_.path() + "/b.jsonl", "b"};
    b.record({.t = 5 * ns_per_ms, .kind = "enter", .token = 2});
    b.record({.t = 20 * ns_per_ms, .kind = "exit", .token = 2});
  }
  std::string out;
  EXPECT_EQ(dlock::test::run_program({DLOCK_FAULT_CHECKER, dir_.path()}, 10s, &out), 1) << out;
  EXPECT_NE(out.find("\"clean\":false"), std::string::npos) << out;
  EXPECT_NE(out.find("\"first_token\":1"), std::string::npos) << out;
  EXPECT_NE(out.find("\"trust_violations\":0"), std::string::npos) << out;
  EXPECT_EQ(out.find("\"fifo_violations\""), std::string::npos) << "FIFO was not asked for";
  EXPECT_EQ(dlock::test::run_program({DLOCK_FAULT_CHECKER, "--fifo", dir_.path()}, 10s, &out), 1)
      << out;
  EXPECT_NE(out.find("\"fifo_violations\":0"), std::string::npos) << out;
  EXPECT_EQ(dlock::test::run_program({DLOCK_FAULT_CHECKER, dir_.path() + "/a.jsonl"}, 10s, &out), 0)
      << out;
}

}  // namespace
}  // namespace dlock::faults::test
