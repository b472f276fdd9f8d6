// The checker proves itself: the same workload and faults on deliberately broken locks
// (broken_lock.hpp) must be flagged, and the command-line checker must fail on a violation.
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
  measured(
      "broken lock without owner check on release + SIGSTOP: " + std::to_string(r.overlaps.size()) +
      " overlaps, " + std::to_string(r.stale_accesses) + " stale accesses, " +
      std::to_string(r.unfenced_lost_updates) + " unfenced lost updates, " +
      std::to_string(r.fenced_lost_updates) + " fenced lost updates");
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
  EXPECT_EQ(dlock::test::run_program({DLOCK_FAULT_CHECKER, dir_.path() + "/a.jsonl"}, 10s, &out), 0)
      << out;
}

}  // namespace
}  // namespace dlock::faults::test
