// dlock::red_lock under server faults (issue 27), through the checker: workers take one name on
// three independent redis-servers, held by a majority (dlock_fault_worker --kind red).
// - One server killed (kill -9) mid-run: the two left are a majority, acquisitions go on, no
//   overlap.
// - Two killed: no majority, nothing granted while they are down (the workers' rounds fail and
//   retry); restarted empty, acquisitions resume. No overlap.
// - One server frozen (SIGSTOP) past the lease while a holder's quorum is exactly that server
//   and another (the third is held by another owner when it acquires): the holder's member there
//   cannot be renewed, so its lease is reported lost; the others take the name on the two
//   servers left (the frozen one's attempts time out within a tenth of the lease) only after the
//   holder released. No overlap.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "group_fault_lab.hpp"

using namespace std::chrono_literals;

namespace dlock::faults::test {
namespace {

// Workers taking the red lock again and again (short holds) until their stdin closes. They
// pause between sections, as a worker with other work would, so that each gets turns: red_lock
// does not queue its waiters, and one taking the name straight back after its release often
// wins again.
std::vector<std::string> red_busy_args(int seed, const std::string& wait) {
  return {"--count", "1000", "--hold", "20", "--jitter", "30",
          "--think", "50",   "--wait", wait, "--seed",   std::to_string(seed)};
}

TEST_F(group_lab, red_lock_kill9_of_one_of_three_servers_leaves_it_acquirable_without_overlap) {
  const auto url = lock_url("watchdog=1000ms");
  for (int i = 0; i < 4; ++i)
    spawn("w" + std::to_string(i), url, red_args(red_busy_args(31 + i, "20000")));
  for (auto& w : workers_) ASSERT_TRUE(wait_line(*w, "exit ", 15s)) << w->diagnostics();
  std::this_thread::sleep_for(300ms);  // not ordering: hand-offs on all three servers first
  const auto killed = fault("kill9 server 2");
  server(2).kill9();
  std::this_thread::sleep_for(1500ms);  // past the lease: holds from before lost their member
  for (int i = 0; i < 4; ++i) {
    const auto id = "w" + std::to_string(i);
    EXPECT_TRUE(entered_after(id, killed, 10s)) << id << " acquired on the two left";
  }
  for (auto& w : workers_) w->close_stdin();
  wait_all_exit(15s);
  const auto r = finish();
  EXPECT_TRUE(r.clean()) << report_json_;
  expect_fenced_safety(r);
  EXPECT_TRUE(r.overlaps.empty()) << report_json_;
  EXPECT_EQ(r.trust_violations, 0u) << report_json_;
  EXPECT_EQ(r.token_regressions, 0u) << report_json_;
  const auto before = enters_between(r, 0, killed), after = enters_between(r, killed, forever);
  const auto* first = first_enter_after(r, killed);
  ASSERT_NE(first, nullptr);
  measured("red_lock over 3 servers, 4 workers, kill -9 of one (watchdog lease 1000 ms): " +
           std::to_string(before) + " sections before, " + std::to_string(after) +
           " after; first enter " + ms_text(first->enter - killed) + " ms after the kill; " +
           std::to_string(r.overlaps.size()) + " overlaps, " + std::to_string(r.lost_events) +
           " lost, " + std::to_string(r.errors) + " errors (" + error_notes(r) +
           "), longest hand-off gap " + ms_text(r.max_handoff_gap_ns) + " ms");
}

TEST_F(group_lab, red_lock_with_two_of_three_servers_killed_grants_nothing_until_they_are_back) {
  const auto url = lock_url("watchdog=1000ms&timeout=500ms");
  for (int i = 0; i < 3; ++i)
    spawn("w" + std::to_string(i), url, red_args(red_busy_args(41 + i, "400")));
  for (auto& w : workers_) ASSERT_TRUE(wait_line(*w, "exit ", 15s)) << w->diagnostics();
  const auto killing = fault("kill9 servers 1 and 2");
  server(1).kill9();
  server(2).kill9();
  const auto down = fault("servers 1 and 2 down");
  std::this_thread::sleep_for(2000ms);  // past the lease: a hold from before has lost its quorum
  const auto restarting = fault("start servers 1 and 2, empty");
  server(1).start();
  server(2).start();
  const auto up = fault("servers 1 and 2 up");
  for (int i = 0; i < 3; ++i) {
    const auto id = "w" + std::to_string(i);
    EXPECT_TRUE(entered_after(id, up, 15s)) << id << " acquired again once a majority was back";
  }
  for (auto& w : workers_) w->close_stdin();
  wait_all_exit(15s);
  const auto r = finish();
  // A round decided just before the kill (every reply and floor acknowledgement in) may still
  // be recorded a moment after it: 100 ms of margin.
  EXPECT_EQ(enters_between(r, down + 100 * ns_per_ms, restarting), 0u) << "no majority, no grant\n"
                                                                       << report_json_;
  EXPECT_TRUE(r.overlaps.empty()) << report_json_;
  EXPECT_EQ(r.trust_violations, 0u) << report_json_;
  EXPECT_EQ(r.token_regressions, 0u) << report_json_;
  expect_fenced_safety(r);
  std::size_t failed = 0;  // rounds that gave up while the servers were down
  std::int64_t last_before = 0;
  for (const auto& e : events_) {
    failed += (e.kind == "timeout" || e.kind == "error") && e.t > killing && e.t < restarting;
    if (e.kind == "enter" && e.t < restarting) last_before = e.t;
  }
  EXPECT_GE(failed, 3u) << "the workers kept trying while the servers were down";
  const auto* first = first_enter_after(r, restarting);
  ASSERT_NE(first, nullptr);
  measured(
      "red_lock over 3 servers, 3 workers, kill -9 of two for 2 s (watchdog lease 1000 ms): "
      "last enter " +
      ms_text(killing - last_before) + " ms before the kill began, none while down; " +
      std::to_string(failed) + " acquisitions given up meanwhile (wait 400 ms); first enter " +
      ms_text(first->enter - up) + " ms after both were up again (empty); " +
      std::to_string(r.overlaps.size()) + " overlaps, " + std::to_string(r.lost_events) + " lost");
}

TEST_F(group_lab,
       red_lock_sigstop_of_a_server_past_the_lease_the_holder_whose_quorum_it_was_is_told) {
  const auto url = lock_url("watchdog=1000ms&timeout=500ms");
  occupy(2, 60s);  // another owner on server 2: the holder's quorum is servers 0 and 1
  auto& holder = spawn("holder", url, red_args({"--hold", "5000"}));
  ASSERT_TRUE(wait_line(holder, "enter ", 15s)) << holder.diagnostics();
  fault("the other owner left server 2");
  vacate(2);
  for (int i = 0; i < 3; ++i)
    spawn("w" + std::to_string(i), url, red_args(red_busy_args(61 + i, "20000")));
  std::this_thread::sleep_for(200ms);  // not ordering: they try, and find servers 0 and 1 held
  const auto stopped = fault("sigstop server 1");
  server(1).pause();
  EXPECT_TRUE(wait_line(holder, "lost ", 3s))
      << "its member on server 1 could not be renewed: quorum lost\n"
      << holder.diagnostics();
  for (int i = 0; i < 3; ++i) {
    const auto id = "w" + std::to_string(i);
    EXPECT_TRUE(entered_after(id, stopped, 10s)) << id << " acquired on servers 0 and 2";
  }
  std::this_thread::sleep_until(std::chrono::steady_clock::now() + 2500ms -
                                std::chrono::nanoseconds{dlock::faults::monotonic_ns() - stopped});
  const auto resumed = fault("sigcont server 1");
  server(1).resume();
  for (int i = 0; i < 3; ++i) {
    const auto id = "w" + std::to_string(i);
    EXPECT_TRUE(entered_after(id, resumed, 10s)) << id << " after the server came back";
  }
  for (auto& w : workers_) w->close_stdin();
  wait_all_exit(15s);
  const auto r = finish();
  EXPECT_TRUE(r.clean()) << report_json_;
  expect_fenced_safety(r);
  EXPECT_TRUE(r.overlaps.empty()) << report_json_;
  EXPECT_EQ(r.trust_violations, 0u) << report_json_;
  EXPECT_EQ(r.token_regressions, 0u) << report_json_;
  const auto* lost = first_event("lost", "holder");
  ASSERT_NE(lost, nullptr) << report_json_;
  EXPECT_GE(lost->t, stopped);
  // Its last renewal there was sent before the stop (renewals go every third of the lease).
  EXPECT_LE(lost->t - stopped, 1200 * ns_per_ms) << "lost at its local deadline, not later";
  const auto* next = first_enter_after(r, stopped);
  ASSERT_NE(next, nullptr);
  EXPECT_GE(next->enter, lost->t) << "nobody in before the holder let go";
  const auto during = enters_between(r, stopped, resumed);
  EXPECT_GE(during, 3u) << "acquisitions went on while server 1 was frozen";
  measured(
      "red_lock over 3 servers, SIGSTOP of one for 2.5 s (watchdog lease 1000 ms), a holder "
      "on it and one other: the holder's lost " +
      ms_text(lost->t - stopped) + " ms after the stop; next enter " +
      ms_text(next->enter - lost->t) + " ms after that lost; " + std::to_string(during) +
      " sections while it was frozen, " + std::to_string(enters_between(r, resumed, forever)) +
      " after; " + std::to_string(r.overlaps.size()) + " overlaps, " + std::to_string(r.errors) +
      " errors (" + error_notes(r) + ")");
}

}  // namespace
}  // namespace dlock::faults::test
