// When `dlock exec` starts its command and when it signals it (tools/dlock/exec_schedule.hpp):
// the command must be dead, with a margin, before the lease's trust deadline.
#include "../../tools/dlock/exec_schedule.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <optional>

namespace {

using namespace std::chrono_literals;
using dlock_cli::exec_timing;
using dlock_cli::kill_schedule;
using std::chrono::milliseconds;
using time_point = kill_schedule::time_point;

const time_point t0{std::chrono::hours{1}};
constexpr auto never = time_point::max();

TEST(exec_schedule, margin_and_default_kill_after_follow_the_lease) {
  EXPECT_EQ(dlock_cli::kill_margin(30s), 300ms);
  EXPECT_EQ(dlock_cli::kill_margin(3s), 50ms) << "at least 50 ms";
  EXPECT_EQ(dlock_cli::default_kill_after(30s), 10s);
  EXPECT_EQ(dlock_cli::default_kill_after(60s), 10s) << "at most 10 s";
  EXPECT_EQ(dlock_cli::default_kill_after(3s), 1s) << "a third of the lease";
  EXPECT_TRUE(dlock_cli::kill_after_fits(1s, 3s));
  EXPECT_FALSE(dlock_cli::kill_after_fits(1001ms, 3s));
  EXPECT_TRUE(dlock_cli::kill_after_fits(0ms, 3s));
}

TEST(exec_schedule, choose_timing_refuses_a_kill_after_over_a_third_and_a_too_short_lease) {
  auto c = dlock_cli::choose_timing(30s, std::nullopt, false);
  EXPECT_EQ(c.error, "");
  EXPECT_EQ(c.timing.kill_after, 10s);
  EXPECT_EQ(c.timing.margin, 300ms);
  c = dlock_cli::choose_timing(30s, 10s, false);
  EXPECT_EQ(c.error, "");
  c = dlock_cli::choose_timing(30s, 11s, false);
  EXPECT_NE(c.error.find("--kill-after (11000 ms)"), std::string::npos) << c.error;
  EXPECT_NE(c.error.find("watchdog lease (30000 ms)"), std::string::npos) << c.error;
  c = dlock_cli::choose_timing(3s, 1500ms, true);
  EXPECT_NE(c.error.find("--lease (3000 ms)"), std::string::npos) << c.error;
  // 60 ms: kill_after 20 ms + margin 50 ms leave nothing to run on.
  c = dlock_cli::choose_timing(60ms, std::nullopt, true);
  EXPECT_NE(c.error.find("too short"), std::string::npos) << c.error;
  EXPECT_EQ(dlock_cli::choose_timing(90ms, 0ms, true).error, "") << "50 ms margin < 90 ms";
}

TEST(exec_schedule, starts_only_with_more_than_kill_after_plus_margin_of_trust) {
  const exec_timing t{1s, 50ms};
  EXPECT_TRUE(dlock_cli::may_start(1051ms, false, t));
  EXPECT_FALSE(dlock_cli::may_start(1050ms, false, t));
  EXPECT_FALSE(dlock_cli::may_start(0ms, false, t));
  EXPECT_FALSE(dlock_cli::may_start(30s, true, t)) << "lost: never, whatever time_left says";
}

TEST(exec_schedule, renewed_lease_only_wakes_when_trust_would_run_short) {
  kill_schedule plan{{1s, 50ms}, t0 + 3s};
  auto s = plan.next(t0, t0 + 3s, false);
  EXPECT_FALSE(s.term);
  EXPECT_FALSE(s.kill);
  EXPECT_EQ(s.wake, t0 + 3s - 1050ms);
  // Renewed meanwhile: the deadline moved, so does the wake-up.
  s = plan.next(t0 + 1950ms, t0 + 4s, false);
  EXPECT_FALSE(s.term);
  EXPECT_EQ(s.wake, t0 + 4s - 1050ms);
  EXPECT_FALSE(plan.stopping());
}

TEST(exec_schedule, unconfirmed_renewals_sigterm_kill_after_plus_margin_and_sigkill_margin_early) {
  kill_schedule plan{{1s, 50ms}, t0 + 3s};
  auto s = plan.next(t0 + 1949ms, t0 + 3s, false);
  EXPECT_FALSE(s.term) << "still more than kill_after + margin left";
  s = plan.next(t0 + 1950ms, t0 + 3s, false);
  EXPECT_TRUE(s.term);
  EXPECT_FALSE(s.kill);
  EXPECT_EQ(plan.why(), kill_schedule::reason::expiring);
  EXPECT_EQ(s.wake, t0 + 2950ms) << "SIGKILL kill_after later, deadline - margin";
  s = plan.next(t0 + 2949ms, t0 + 3s, false);
  EXPECT_FALSE(s.term) << "once";
  EXPECT_FALSE(s.kill);
  s = plan.next(t0 + 2950ms, t0 + 3s, false);
  EXPECT_TRUE(s.kill);
  EXPECT_EQ(s.wake, never);
  s = plan.next(t0 + 2960ms, t0 + 3s, false);
  EXPECT_FALSE(s.kill) << "once";
  EXPECT_TRUE(plan.killed());
}

TEST(exec_schedule, a_renewal_after_the_sigterm_does_not_cancel_the_sigkill) {
  kill_schedule plan{{1s, 50ms}, t0 + 3s};
  EXPECT_TRUE(plan.next(t0 + 2s, t0 + 3s, false).term);
  const auto s = plan.next(t0 + 2100ms, t0 + 5s, false);
  EXPECT_FALSE(s.kill);
  EXPECT_EQ(s.wake, t0 + 3s) << "kill_after after the SIGTERM";
  EXPECT_TRUE(plan.next(t0 + 3s, t0 + 6s, false).kill);
}

TEST(exec_schedule, lost_lease_sigterms_at_once_and_sigkills_after_kill_after) {
  kill_schedule plan{{1s, 50ms}, t0 + 3s};
  // time_left() reads 0 once lost: the last deadline known stays.
  auto s = plan.next(t0 + 100ms, t0 + 100ms, true);
  EXPECT_TRUE(s.term);
  EXPECT_FALSE(s.kill);
  EXPECT_EQ(plan.why(), kill_schedule::reason::lost);
  EXPECT_EQ(plan.deadline(), t0 + 3s);
  EXPECT_EQ(s.wake, t0 + 1100ms) << "kill_after, before deadline - margin";
  EXPECT_TRUE(plan.next(t0 + 1100ms, t0 + 1100ms, true).kill);
}

TEST(exec_schedule, lost_lease_sigkills_at_deadline_minus_margin_if_that_comes_first) {
  kill_schedule plan{{1s, 50ms}, t0 + 3s};
  plan.next(t0, t0 + 3s, false);
  // Lost at 2.5 s, say after a pause: the deadline (3 s) comes before kill_after.
  auto s = plan.next(t0 + 2500ms, t0 + 2500ms, true);
  EXPECT_TRUE(s.term);
  EXPECT_EQ(s.wake, t0 + 2950ms);
  // Found lost only after the deadline: SIGTERM and SIGKILL at once.
  kill_schedule late{{1s, 50ms}, t0 + 3s};
  s = late.next(t0 + 3100ms, t0 + 3100ms, true);
  EXPECT_TRUE(s.term);
  EXPECT_TRUE(s.kill);
  EXPECT_EQ(s.wake, never);
}

TEST(exec_schedule, a_deadline_passed_unnoticed_sigkills_at_once) {
  // Woken late (e.g. the process was stopped): time_left() is 0, the loss not flagged yet.
  kill_schedule plan{{1s, 50ms}, t0 + 3s};
  const auto s = plan.next(t0 + 5s, t0 + 5s, false);
  EXPECT_TRUE(s.term);
  EXPECT_TRUE(s.kill);
  EXPECT_EQ(plan.why(), kill_schedule::reason::expiring);
}

TEST(exec_schedule, zero_kill_after_sigterms_and_sigkills_together_margin_early) {
  kill_schedule plan{{0ms, 50ms}, t0 + 1s};
  auto s = plan.next(t0, t0 + 1s, false);
  EXPECT_EQ(s.wake, t0 + 950ms);
  s = plan.next(t0 + 950ms, t0 + 1s, false);
  EXPECT_TRUE(s.term);
  EXPECT_TRUE(s.kill);
}

}  // namespace
