// The fault lab's process scenarios: dlock_fault_worker processes contend for one lock on a
// real redis-server and protect a resource on a second one; the test injects a fault (kill -9
// or SIGSTOP of a holder, SIGSTOP or restart of the lock server, CLIENT KILL and SCRIPT FLUSH in
// a loop), records what it did, and the checker judges the merged histories. Counts and seeds
// are fixed; every wait is bounded.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "fault_lab.hpp"

using namespace std::chrono_literals;

namespace dlock::faults::test {
namespace {

// -- a holder killed, a holder frozen ------------------------------------------------------------

TEST_F(fault_lab, kill9_of_a_holder_lets_the_next_in_after_its_lease_and_not_before) {
  constexpr int rounds = 3;
  const auto url = lock_url("watchdog=1000ms");
  struct kill {
    std::int64_t at;
    std::int64_t lease_end;
    std::string waiter;
  };
  std::vector<kill> kills;
  for (int i = 0; i < rounds; ++i) {
    const auto h = "holder" + std::to_string(i), w = "waiter" + std::to_string(i);
    auto& holder = spawn(h, url, {"--hold", "20000", "--seed", std::to_string(i)});
    ASSERT_TRUE(wait_line(holder, "enter ", 15s)) << holder.diagnostics();
    auto& waiter = spawn(w, url, {"--hold", "50", "--wait", "10000"});
    ASSERT_TRUE(waiters_subscribed(1)) << waiter.diagnostics();
    const auto at = fault("kill9 " + h);
    holder.kill9();
    // Asked once the holder is dead, so no renewal can follow: its lease ends no sooner.
    const auto asked = dlock::faults::monotonic_ns();
    const auto pttl = std::stoll(lock_srv_.command({"PTTL", name_}).substr(1));
    ASSERT_GT(pttl, 0) << "the dead holder's lease still runs";
    kills.push_back({at, asked + pttl * ns_per_ms, w});
    ASSERT_TRUE(wait_line(waiter, "exit ", 10s)) << waiter.diagnostics();
  }
  wait_all_exit(10s);
  const auto r = finish();
  EXPECT_TRUE(r.clean()) << report_json_;
  expect_fenced_safety(r);
  EXPECT_EQ(r.errors, 0u) << report_json_;
  EXPECT_EQ(r.token_regressions, 0u) << report_json_;
  for (const auto& k : kills) {
    const auto* s = dlock::faults::first_enter_after(r, k.at, k.waiter);
    ASSERT_NE(s, nullptr) << k.waiter << " entered after the kill";
    constexpr std::int64_t slop = 20 * ns_per_ms;  // PTTL's and the clocks' granularity
    EXPECT_GE(s->enter, k.lease_end - slop)
        << k.waiter << " entered " << to_ms(k.lease_end - s->enter) << " ms before the lease ended";
    EXPECT_LE(s->enter, k.lease_end + 300 * ns_per_ms)
        << "the waiter re-checks when the holder's lease ends";
    measured("kill -9, watchdog lease 1000 ms: next enter " + ms_text(s->enter - k.at) +
             " ms after the kill, " + ms_text(s->enter - k.lease_end) +
             " ms after the lease end (PTTL)");
  }
}

TEST_F(fault_lab,
       sigstop_of_a_holder_past_its_lease_overlaps_but_fencing_holds_and_lost_fires_first) {
  constexpr int rounds = 3;
  const auto url = lock_url("watchdog=600ms");
  struct stop {
    std::string holder, next;
    std::int64_t resumed;
  };
  std::vector<stop> stops;
  for (int i = 0; i < rounds; ++i) {
    const auto a = "frozen" + std::to_string(i), b = "next" + std::to_string(i);
    // The frozen holder's hold (800 ms) is over when it resumes, so its main thread goes
    // straight for the resource: it must see the loss first.
    auto& holder = spawn(a, url, {"--hold", "800"});
    ASSERT_TRUE(wait_line(holder, "enter ", 15s)) << holder.diagnostics();
    auto& next = spawn(b, url, {"--hold", "1500", "--wait", "10000"});
    ASSERT_TRUE(waiters_subscribed(1)) << next.diagnostics();
    holder.pause();
    fault("sigstop " + a);
    ASSERT_TRUE(wait_line(next, "enter ", 5s)) << next.diagnostics();
    std::this_thread::sleep_for(300ms);  // not ordering: lets the frozen holder's hold run out
    stops.push_back({a, b, fault("sigcont " + a)});  // stamped before: the holder runs at once
    holder.resume();
    ASSERT_TRUE(wait_line(holder, "lost ", 5s)) << holder.diagnostics();
    ASSERT_TRUE(wait_line(next, "exit ", 5s)) << next.diagnostics();
  }
  wait_all_exit(10s);
  const auto r = finish();
  expect_fenced_safety(r);
  EXPECT_EQ(r.errors, 0u) << report_json_;
  EXPECT_EQ(r.token_regressions, 0u) << report_json_;
  EXPECT_EQ(r.overlaps.size(), std::size_t{rounds})
      << "each frozen holder believed it held the lock until it resumed: reported\n"
      << report_json_;
  for (const auto& s : stops) {
    const auto* lost = first_event("lost", s.holder);
    ASSERT_NE(lost, nullptr) << s.holder << " recorded lost";
    EXPECT_GE(lost->t, s.resumed) << "lost fires on resume";
    EXPECT_LE(lost->t - s.resumed, 250 * ns_per_ms) << "on resume, not at some later check";
    const auto* a = dlock::faults::first_enter_after(r, 0, s.holder);
    const auto* b = dlock::faults::first_enter_after(r, 0, s.next);
    ASSERT_TRUE(a && b);
    EXPECT_GT(b->token, a->token);
    measured("SIGSTOP of a holder, watchdog lease 600 ms: next enter " +
             ms_text(b->enter - a->enter) + " ms after the frozen one's; lost " +
             ms_text(lost->t - s.resumed) + " ms after SIGCONT (seen by " + lost->detail + ")");
  }
}

// -- the lock server frozen, restarted -----------------------------------------------------------

TEST_F(fault_lab,
       sigstop_of_redis_past_the_lease_loses_leases_at_the_local_deadline_then_all_recover) {
  constexpr std::int64_t lease_ms = 1000;
  const auto url = lock_url("watchdog=1000ms&timeout=1000ms");
  auto& a = spawn("a", url,
                  {"--hold-first", "6000", "--hold", "50", "--jitter", "100", "--count", "1000",
                   "--wait", "20000", "--seed", "1"});
  ASSERT_TRUE(wait_line(a, "enter ", 15s)) << a.diagnostics();
  auto& b = spawn(
      "b", url,
      {"--hold", "50", "--jitter", "100", "--count", "1000", "--wait", "20000", "--seed", "2"});
  auto& c = spawn(
      "c", url,
      {"--hold", "50", "--jitter", "100", "--count", "1000", "--wait", "20000", "--seed", "3"});
  ASSERT_TRUE(waiters_subscribed(2));
  std::this_thread::sleep_for(500ms);  // not ordering: a few renewals of a's lease first
  lock_srv_.pause();
  const auto paused = fault("sigstop lock server");
  ASSERT_TRUE(wait_line(a, "lost ", 3s)) << "a declares its lease lost while Redis is frozen\n"
                                         << a.diagnostics();
  std::this_thread::sleep_until(std::chrono::steady_clock::now() + 2500ms -
                                std::chrono::nanoseconds{dlock::faults::monotonic_ns() - paused});
  const auto resumed = fault("sigcont lock server");
  lock_srv_.resume();
  for (auto* w : {&a, &b, &c}) {
    EXPECT_TRUE(wait_line(*w, "exit ", 15s)) << "every worker completes a section after SIGCONT\n"
                                             << w->diagnostics();
  }
  for (auto* w : {&a, &b, &c}) w->close_stdin();
  wait_all_exit(15s);
  const auto r = finish();
  expect_fenced_safety(r);
  EXPECT_TRUE(r.overlaps.empty()) << report_json_;
  EXPECT_EQ(r.token_regressions, 0u) << report_json_;

  const auto* lost = first_event("lost", "a");
  ASSERT_NE(lost, nullptr);
  // Its last renewal was sent before the pause and renewals go every third of the lease: the
  // local deadline lies in [pause + lease/3·2 - drift, pause + lease].
  EXPECT_LE(lost->t - paused, (lease_ms + 150) * ns_per_ms)
      << "lost at the local deadline, not later";
  EXPECT_GE(lost->t - paused, lease_ms / 2 * ns_per_ms) << "not lost long before its deadline";
  std::size_t errors_after = 0;
  for (const auto& e : events_) errors_after += e.kind == "error" && e.t > resumed;
  EXPECT_EQ(errors_after, 0u) << "no error once Redis is back\n" << report_json_;
  const auto* first = dlock::faults::first_enter_after(r, resumed);
  ASSERT_NE(first, nullptr);
  // Each worker's own first enter after SIGCONT depends on who wins the races for the lock:
  // like Redisson's RLock, dlock::mutex is not fair (a releasing worker may take it straight
  // back), so one worker may wait seconds while the others hand off — as without any fault.
  std::string recovery = " (anyone +" + ms_text(first->enter - resumed) + " ms)";
  for (const char* p : {"a", "b", "c"}) {
    const auto* s = dlock::faults::first_enter_after(r, resumed, p);
    ASSERT_NE(s, nullptr) << p << " entered after SIGCONT";
    recovery += std::string{" "} + p + " +" + ms_text(s->enter - resumed) + " ms";
  }
  measured("SIGSTOP of redis 2500 ms, watchdog lease 1000 ms: holder's lost " +
           ms_text(lost->t - paused) + " ms after the pause; errors during the pause: " +
           std::to_string(r.errors) + "; first enters after SIGCONT:" + recovery);
}

// After a restart without persistence the holders' keys are gone. A holder learns it when its
// client reconnects (it asks at once whether its holds are still there), not at its next
// renewal (a third of the 30 s watchdog lease) or, for an explicit lease, at the lease's end.
TEST_F(fault_lab, a_holder_learns_of_a_restart_when_it_reconnects_not_at_its_next_renewal) {
  struct phase {
    std::string id;
    std::int64_t restarting = 0, restarted = 0;
  };
  std::vector<phase> phases;
  // A watchdog hold (30 s lease, renewed every 10 s), then one with an explicit 40 s lease.
  for (const std::vector<std::string>& args : {std::vector<std::string>{"--hold-first", "60000"},
                                               {"--hold-first", "60000", "--lease", "40000"}}) {
    phase p{args.size() == 2 ? "watchdog" : "explicit"};
    auto& h = spawn(p.id, lock_url(""), args);
    ASSERT_TRUE(wait_line(h, "enter ", 15s)) << h.diagnostics();
    p.restarting = fault("restart lock server");
    lock_srv_.restart();
    p.restarted = fault("lock server up");
    ASSERT_TRUE(wait_line(h, "lost ", 5s))
        << p.id << ": not learned at reconnect; " << h.diagnostics();
    ASSERT_EQ(h.wait_exit(10s), std::optional<int>{0}) << h.diagnostics();
    phases.push_back(p);
  }
  const auto r = finish();
  EXPECT_EQ(r.accesses_after_lost, 0u) << report_json_;
  EXPECT_EQ(r.errors, 0u) << report_json_;
  std::string seen;
  for (const auto& p : phases) {
    const auto* lost = first_event("lost", p.id);
    ASSERT_NE(lost, nullptr) << p.id;
    EXPECT_LE(lost->t - p.restarted, 3000 * ns_per_ms)
        << p.id << ": learned long after the server was up";
    seen += "; " + p.id + ": restart took " + ms_text(p.restarted - p.restarting) +
            " ms, loss seen " + ms_text(lost->t - p.restarted) + " ms after it was up";
  }
  measured(
      "restart without persistence, holders with a 30 s watchdog lease and a 40 s explicit "
      "lease" +
      seen);
}

TEST_F(fault_lab,
       redis_restart_without_persistence_reports_the_old_lease_lost_and_lets_waiters_in) {
  const auto url = lock_url("watchdog=1000ms");
  // A few sections first, so the fencing counter is well above 1 when it is forgotten.
  auto& warm = spawn("warm", url, {"--count", "4", "--hold", "5"});
  ASSERT_EQ(warm.wait_exit(15s), std::optional<int>{0}) << warm.diagnostics();
  auto& a = spawn("a", url, {"--hold-first", "5000"});
  ASSERT_TRUE(wait_line(a, "enter ", 15s)) << a.diagnostics();
  auto& b = spawn("b", url, {"--count", "2", "--hold", "100", "--wait", "20000"});
  ASSERT_TRUE(waiters_subscribed(1)) << b.diagnostics();
  const auto restarting = fault("restart lock server");
  lock_srv_.restart();
  const auto restarted = fault("lock server up");
  ASSERT_TRUE(wait_line(a, "lost ", 5s)) << a.diagnostics();
  ASSERT_TRUE(wait_line(b, "done ", 15s)) << b.diagnostics();
  wait_all_exit(10s);
  const auto r = finish();
  EXPECT_EQ(r.fenced_lost_updates, 0u) << report_json_;
  EXPECT_EQ(r.stale_accesses, 0u) << report_json_;
  EXPECT_EQ(r.accesses_after_lost, 0u) << report_json_;
  EXPECT_EQ(r.unfenced_lost_updates, 0u) << report_json_;
  EXPECT_EQ(r.errors, 0u) << report_json_;

  const auto* lost = first_event("lost", "a");
  ASSERT_NE(lost, nullptr);
  EXPECT_LE(lost->t - restarting, 1100 * ns_per_ms) << "lost within its lease of the restart";
  const auto* in = dlock::faults::first_enter_after(r, restarting, "b");
  ASSERT_NE(in, nullptr) << "the waiter gets the lock after the restart";
  const auto* held = dlock::faults::first_enter_after(r, 0, "a");
  // Without persistence the fencing counter is forgotten too (FAILURES.md #11), but tokens are
  // max(counter + 1, server time in us): the new holder's token is still the larger, so the
  // fence lets it in and would refuse the old holder.
  EXPECT_GT(in->token, held->token);
  EXPECT_EQ(r.token_regressions, 0u) << report_json_;
  measured("restart without persistence, watchdog lease 1000 ms: restart took " +
           ms_text(restarted - restarting) + " ms; old holder's lost " +
           ms_text(lost->t - restarting) + " ms after it began; waiter entered " +
           ms_text(in->enter - restarting) + " ms after it began with token " +
           std::to_string(in->token) + " (old holder's: " + std::to_string(held->token) + ")" +
           (r.overlaps.empty() ? "" : "; overlap reported (waiter in before the loss was seen)"));
}

// -- connections killed, scripts flushed ---------------------------------------------------------

TEST_F(fault_lab, client_kill_of_command_and_subscriber_connections_in_a_loop_is_invisible) {
  std::size_t kills = 0;
  const auto r = run_under_chaos(150ms, [&](int i) {
    const char* type = i % 2 == 0 ? "normal" : "pubsub";
    fault(std::string{"client kill type "} + type);
    lock_srv_.command({"CLIENT", "KILL", "TYPE", type});
    ++kills;
  });
  EXPECT_TRUE(r.clean()) << report_json_;
  expect_fenced_safety(r);
  EXPECT_EQ(r.errors, 0u) << report_json_;
  EXPECT_EQ(r.lost_events, 0u) << report_json_;
  EXPECT_EQ(r.timeouts, 0u) << report_json_;
  EXPECT_GE(kills, 4u) << "the loop ran while the workers did";
  measured("CLIENT KILL every 150 ms (" + std::to_string(kills) + " kills): " +
           std::to_string(r.sections.size()) + " sections, " + std::to_string(r.errors) +
           " errors, " + std::to_string(r.lost_events) + " lost, " + std::to_string(r.timeouts) +
           " timeouts, longest hand-off gap " + ms_text(r.max_handoff_gap_ns) + " ms");
}

TEST_F(fault_lab, script_flush_in_a_loop_is_invisible) {
  std::size_t flushes = 0;
  const auto r = run_under_chaos(50ms, [&](int) {
    fault("script flush");
    lock_srv_.command({"SCRIPT", "FLUSH"});
    ++flushes;
  });
  EXPECT_TRUE(r.clean()) << report_json_;
  expect_fenced_safety(r);
  EXPECT_EQ(r.errors, 0u) << report_json_;
  EXPECT_EQ(r.lost_events, 0u) << report_json_;
  EXPECT_EQ(r.timeouts, 0u) << report_json_;
  EXPECT_GE(flushes, 4u);
  measured("SCRIPT FLUSH every 50 ms (" + std::to_string(flushes) + " flushes): " +
           std::to_string(r.sections.size()) + " sections, " + std::to_string(r.errors) +
           " errors, " + std::to_string(r.lost_events) + " lost, " + std::to_string(r.timeouts) +
           " timeouts, longest hand-off gap " + ms_text(r.max_handoff_gap_ns) + " ms");
}

}  // namespace
}  // namespace dlock::faults::test
