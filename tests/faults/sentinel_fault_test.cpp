// Redis Sentinel under faults (issue 24, item 4): the master killed, failed over by hand, frozen
// past its failover and woken as a second writable master; replication blocked before the
// master dies (the double grant asynchronous replication allows, and WAIT refusing it); a
// sentinel killed and another partitioned, then a failover decided by the two left. Three
// workers hold and wait on the lock throughout (watchdog 1.5 s), and every run goes through the
// history checker. Each scenario asserts recovery within 6 s of the fault, that every hold the
// old master alone may have had ended within that bound (or was kept by the new master), that
// the probe's client sent nothing to a node after it learnt of its demotion, and the checker's
// verdict: no fenced lost update, token regression, fenced order violation, stale access or
// access after `lost`, and no overlap except where a scenario says why.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "sentinel_fault_lab.hpp"

namespace dlock::faults::test {
namespace {

using dlock::faults::measured;
using dlock::test::direction;

class sentinel_faults : public sentinel_fault_lab {
 protected:
  // Lets `n` sections begin after `t` (the lock is in use again), then stops the workers and
  // the probe and checks the histories.
  report run_out(probe_client& probe, std::int64_t t, std::size_t n = 4) {
    EXPECT_TRUE(wait_event("enter", t, recovery_bound, "", n))
        << n << " sections did not begin within the bound after the failover";
    stop_workers();
    probe.stop();
    return finish();
  }

  // What every failover scenario asserts beyond the checker's verdict.
  void expect_followed(const report& r, probe_client& probe, std::int64_t at, std::int64_t promoted,
                       const std::string& what) {
    expect_recovered(r, at, what);
    expect_old_holds_settled(r, at, promoted, what);
    expect_nothing_sent_after_demotion(probe);
    measured(what + ": " + counts(r) + "; " + probe_figures(probe));
  }

  // No lost hold, error or timeout between `from` and `to`, and no wait there for the lock
  // longer than 500 ms after a section's end (a hand-off takes milliseconds: the rest is slop).
  void expect_undisturbed(const report& r, std::int64_t from, std::int64_t to) {
    for (const auto& e : events_) {
      if (e.t < from || e.t > to) continue;
      EXPECT_TRUE(e.kind != "lost" && e.kind != "error" && e.kind != "timeout")
          << dlock::faults::to_json(e);
    }
    std::int64_t longest = 0;
    std::size_t entered = 0;
    for (std::size_t i = 1; i < r.sections.size(); ++i) {
      if (r.sections[i].enter < from || r.sections[i].enter > to) continue;
      ++entered;
      longest = std::max(longest, r.sections[i].enter - r.sections[i - 1].end);
    }
    EXPECT_LE(longest, 500 * ns_per_ms) << report_json_;
    measured("sentinel 2 killed, then sentinel 0 partitioned, for " + ms_text(to - from) +
             " ms: " + std::to_string(entered) + " sections, the longest wait after a release " +
             ms_text(longest) + " ms, no lease_lost, error or timeout");
  }
};

TEST_F(sentinel_faults, kill_minus_9_of_the_master_while_held_and_waited) {
  start_group();
  probe_client probe{url(short_lease), probe_name()};
  spawn_workers(3);
  wait_held_and_waited(2);
  const auto old = group().master_port();
  const auto at = fault("kill -9 of the master " + std::to_string(old));
  group().node(old).kill9();
  const auto promoted = wait_failover(old, at, "kill -9 of the master");
  const auto r = run_out(probe, promoted);
  expect_verdict(r);
  expect_followed(r, probe, at, promoted, "kill -9 of the master");
}

// The old master stays a writable master (listed as a replica) until the sentinels convert it
// ~11 s later: only the clients' switch keeps them off it.
TEST_F(sentinel_faults, sentinel_failover_while_held_and_waited) {
  start_group();
  probe_client probe{url(short_lease), probe_name()};
  spawn_workers(3);
  wait_held_and_waited(2);
  const auto at = fault("SENTINEL FAILOVER");
  const auto old = group().failover();
  const auto promoted = wait_failover(old, at, "SENTINEL FAILOVER");
  const auto r = run_out(probe, promoted);
  expect_verdict(r);
  expect_followed(r, probe, at, promoted, "SENTINEL FAILOVER");
}

// SIGSTOP past down-after: the sentinels fail over (~2.5 s), then the old master wakes still a
// master and accepts writes until they demote it. The clients must have moved at the switch
// and must not come back to it (ROLE is checked at every connect).
TEST_F(sentinel_faults, a_master_frozen_past_its_failover_wakes_writable_and_is_not_used) {
  start_group();
  probe_client probe{url(short_lease), probe_name()};
  spawn_workers(3);
  wait_held_and_waited(2);
  const auto old = group().master_port();
  auto& frozen = group().node(old);
  const auto at = fault("SIGSTOP of the master " + std::to_string(old));
  frozen.pause();
  const auto promoted = wait_failover(old, at, "SIGSTOP of the master");
  ASSERT_TRUE(wait_event("enter", promoted, recovery_bound)) << "nobody took the new master";
  frozen.resume();
  const auto woke = fault("SIGCONT of the old master");
  // Shows the hazard is real: the woken node still says it is a master.
  const auto role = frozen.command({"ROLE"});
  measured("SIGSTOP of the master: woken " + ms_text(woke - promoted) +
           " ms after the new master, it answered ROLE " + role.substr(0, 8));
  const auto r = run_out(probe, woke, 6);
  expect_verdict(r);
  expect_followed(r, probe, at, promoted, "SIGSTOP of the master");
}

// The seeds' double grant: the master -> replica streams are held in the proxy, a holder takes
// the lock (on the master only), the master dies and a replica without the hold is promoted.
// The holder (watchdog 10 s) is frozen across the failover so that a worker enters on the new
// master before the holder can hear of the switch: both clients learn of it from the same
// +switch-master, so without the freeze which comes first is a race of milliseconds. The
// holder, frozen well inside its lease, still trusts it: the checker must see the double
// grant (an overlap and a trust violation), and the fence must refuse what it writes late.
TEST_F(sentinel_faults, blocked_replication_then_kill_double_grants_without_wait) {
  start_group({.proxied_replication = true});
  probe_client probe{url(short_lease), probe_name()};
  group().replication_proxy().freeze(direction::server_to_client, "REPLCONF");
  fault("replication streams held in the proxy");
  auto& holder = spawn("holder", url("watchdog=10000ms"),
                       {"--count", "1", "--hold-first", "8000", "--wait", "10000"});
  ASSERT_TRUE(wait_line(holder, "enter ", 10s)) << holder.diagnostics();
  spawn_workers(2);
  wait_held_and_waited(2);
  holder.pause();
  const auto old = group().master_port();  // the proxy's
  const auto at = fault("kill -9 of the master: the hold never reached a replica");
  group().node(old).kill9();
  const auto promoted = wait_failover(old, at, "replication blocked, kill -9");
  const auto next = wait_event("enter", at, recovery_bound, "holder");
  holder.resume();
  ASSERT_TRUE(next) << "nobody took the lock on the new master";
  fault("holder resumed");
  const auto r = run_out(probe, *next);
  expect_verdict(r, true);  // the double grant is the point; fencing must still hold
  EXPECT_GE(r.overlaps.size() + r.trust_violations, 1u) << "the double grant went unseen\n"
                                                        << report_json_;
  const auto* lost = first_event("lost", "holder", at);
  ASSERT_NE(lost, nullptr) << "the holder never heard its hold was gone\n" << report_json_;
  const auto width = r.overlaps.empty() ? 0 : r.overlaps.front().to - r.overlaps.front().from;
  measured("replication blocked, kill -9, no WAIT: " + std::to_string(r.overlaps.size()) +
           " overlap(s) (the first " + ms_text(width) + " ms wide), " +
           std::to_string(r.trust_violations) + " trust violation(s), " +
           std::to_string(r.fenced_lost_updates) + " fenced lost update(s); the holder saw " +
           "lease_lost " + ms_text(lost->t - *next) + " ms after the next holder entered");
  expect_followed(r, probe, at, promoted, "replication blocked, kill -9, no WAIT");
}

// The same block with wait_replicas=1 and on_shortfall=fail: no acquisition is granted while no
// replica acknowledges it (errc::no_replicas, recorded as errors), so the promoted replica lacks
// no hold and nothing is granted twice.
TEST_F(sentinel_faults, blocked_replication_then_kill_grants_nothing_twice_with_wait) {
  start_group({.proxied_replication = true});
  probe_client probe{url(short_lease), probe_name()};
  group().replication_proxy().freeze(direction::server_to_client, "REPLCONF");
  const auto blocked = fault("replication streams held in the proxy");
  spawn_workers(3, std::string{short_lease} + "&wait_replicas=1&wait_timeout=300ms");
  ASSERT_TRUE(wait_event("error", blocked, 10s, "", 3)) << "acquisitions were not refused";
  const auto old = group().master_port();
  const auto at = fault("kill -9 of the master");
  group().node(old).kill9();
  const auto promoted = wait_failover(old, at, "replication blocked, kill -9, WAIT 1");
  const auto r = run_out(probe, promoted);
  expect_verdict(r);
  for (const auto& e : select(events_, "enter")) {
    EXPECT_FALSE(e.t > blocked && e.t < at) << e.proc << " was granted the lock with no replica "
                                            << "acknowledging it\n"
                                            << report_json_;
  }
  for (const auto& w : {"w0", "w1", "w2"}) {
    const auto* first = first_event("error", w, blocked);
    ASSERT_NE(first, nullptr) << w;
    EXPECT_NE(first->detail.find("NOREPLICAS"), std::string::npos) << first->detail;
    const auto* entered = first_event("enter", w, blocked);
    EXPECT_TRUE(entered == nullptr || entered->t > first->t) << w << " entered before its refusal";
  }
  std::size_t refused = 0;
  for (const auto& e : select(events_, "error")) refused += e.t < at ? 1 : 0;
  measured("replication blocked, kill -9, WAIT 1 (fail): " + std::to_string(refused) +
           " acquisition(s) refused before the failover, none granted");
  expect_followed(r, probe, at, promoted, "replication blocked, kill -9, WAIT 1");
}

// One sentinel killed, another cut off by its proxy: the lock's traffic does not go through them,
// so locking goes on undisturbed. Then the master dies and the two sentinels left (quorum 2 of
// 3, and a majority to elect a leader) fail over, and the clients follow.
TEST_F(sentinel_faults, sentinels_killed_and_partitioned_then_a_failover_with_one_down) {
  start_group({.proxied_sentinels = {0}});
  probe_client probe{url(short_lease), probe_name()};
  spawn_workers(3);
  wait_held_and_waited(2);
  const auto failed_before = probe.failures();
  probe.reset_longest();
  const auto from = fault("kill -9 of sentinel 2");
  group().sentinel(2).kill9();
  ASSERT_TRUE(wait_event("enter", from, 10s, "", 8));
  const auto cut = fault("sentinel 0 partitioned (its proxy drops both directions)");
  group().sentinel_proxy(0).blackhole();
  // Past a client's poll (1 s) and the sentinels' down-after: the clients' rounds meet it.
  ASSERT_TRUE(wait_event("enter", cut, 10s, "", 15));
  group().sentinel_proxy(0).pass();
  group().sentinel_proxy(0).reset_all();  // connections that lost bytes start afresh
  const auto healed = fault("sentinel 0 healed");
  const auto probe_failed = probe.failures() - failed_before;
  const auto probe_longest = probe.longest_ms();
  group().wait_ready(10s);  // sentinels 0 and 1 peers again, before they must agree
  const auto old = group().master_port();
  const auto at = fault("kill -9 of the master, sentinel 2 still down");
  group().node(old).kill9();
  const auto promoted = wait_failover(old, at, "kill -9 with one sentinel down");
  const auto r = run_out(probe, promoted);
  expect_verdict(r);
  expect_undisturbed(r, from, healed);
  EXPECT_EQ(probe_failed, 0) << "the probe's lock calls failed while sentinels were down";
  measured("sentinels down: the probe's longest lock+unlock " + std::to_string(probe_longest) +
           " ms, " + std::to_string(probe_failed) + " failed");
  expect_followed(r, probe, at, promoted, "kill -9 with one sentinel down");
}

}  // namespace
}  // namespace dlock::faults::test
