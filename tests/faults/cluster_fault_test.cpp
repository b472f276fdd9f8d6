// Redis Cluster under faults (issue 23): the lock's master fails over by hand and by kill -9
// (with a hold its replica never received), its slot is resharded by hand while held and
// waited on, and the whole cluster restarts. Each run goes through the history checker: no
// fenced lost update, ever; no overlap where no write was lost; recovery within the node
// timeout + 3 s; a hold the promoted replica lacks ends in lease_lost; no command to a node
// after the client learnt it was demoted; no CROSSSLOT.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "cluster_fault_lab.hpp"

namespace dlock::faults::test {
namespace {

using dlock::faults::measured;

// The items of an array reply as the fixture renders it: "[a, b, c]".
std::vector<std::string> list_items(const std::string& text) {
  std::vector<std::string> out;
  if (text.size() < 3 || text.front() != '[') return out;
  const auto inner = text.substr(1, text.size() - 2);
  for (std::size_t at = 0; at <= inner.size();) {
    const auto comma = std::min(inner.find(", ", at), inner.size());
    out.push_back(inner.substr(at, comma - at));
    at = comma + 2;
  }
  return out;
}

class cluster_faults : public cluster_fault_lab {
 protected:
  void TearDown() override {
    EXPECT_EQ(cluster_.error_count("CROSSSLOT"), 0);
    cluster_fault_lab::TearDown();
  }

  // Recovery: a section entered within node timeout + 3 s of `fault_at` (ns).
  void expect_recovered(const report& r, std::int64_t fault_at, const std::string& what) {
    const auto bound = cluster_.options().node_timeout + std::chrono::seconds{3};
    const auto* next = first_enter_after(r, fault_at);
    ASSERT_NE(next, nullptr) << "no section after " << what << '\n' << report_json_;
    const auto took = next->enter - fault_at;
    EXPECT_LE(took, std::chrono::duration_cast<std::chrono::nanoseconds>(bound).count())
        << report_json_;
    measured(what + ": next holder entered " + ms_text(took) + " ms later (bound " +
             std::to_string(bound.count()) + " ms)");
  }
};

TEST_F(cluster_faults, manual_failover_while_held_and_waited) {
  cluster_probe probe{cluster_url(""), probe_name()};
  spawn_contenders(3, 25, 30);
  ASSERT_TRUE(wait_line(*workers_[0], "enter ", 10s));
  ASSERT_TRUE(shard_listeners(2)) << "the other workers never waited on the shard channel";
  const auto m = cluster_.master_of(slot());
  const auto at = fault("CLUSTER FAILOVER of the lock's master");
  cluster_.failover(cluster_.replicas_of(m).at(0));
  const auto done = fault("failover done");
  wait_all_exit(40s);
  probe.stop();
  const auto r = finish();
  expect_fenced_safety(r);
  EXPECT_TRUE(r.overlaps.empty()) << report_json_;  // a graceful failover loses no write
  EXPECT_EQ(r.errors, 0u) << report_json_;
  // Recovery: no wait for the lock across the failover longer than the bound.
  const auto bound = std::chrono::nanoseconds{cluster_.options().node_timeout + 3s}.count();
  const auto gap = longest_gap(r, at, done + 1'000'000'000);
  EXPECT_LE(gap, bound) << report_json_;
  measured("manual failover (" + ms_text(done - at) + " ms): the longest wait for the lock " +
           "across it " + ms_text(gap) + " ms (bound " + ms_text(bound) + " ms)");
  expect_nothing_sent_after_demotion(probe);
  EXPECT_EQ(probe.failures(), 0) << "the probe's lock calls failed";
  measured("manual failover: the probe's longest lock+unlock took " +
           std::to_string(probe.longest_ms()) + " ms");
}

// The replica is stopped and its link cut (CLIENT KILL TYPE replica) before a new hold is
// written, so the write never reaches it; the master then dies and the replica is promoted
// without the hold. The holder trusts its lease for 10 s (watchdog=10000ms): only the check the
// client makes when it learns of the failover can tell it in time.
TEST_F(cluster_faults, kill_minus_9_of_the_master_promotes_a_replica_lacking_a_hold) {
  cluster_probe probe{cluster_url(""), probe_name()};
  const auto m = cluster_.master_of(slot());
  const auto replica = cluster_.replicas_of(m).at(0);
  cluster_.node(replica).pause();
  ASSERT_EQ(cluster_.node(m).command({"CLIENT", "KILL", "TYPE", "replica"}), ":1");
  auto& holder = spawn("holder", cluster_url("watchdog=10000ms"),
                       {"--count", "1", "--hold-first", "8000", "--wait", "10000"});
  ASSERT_TRUE(wait_line(holder, "enter ", 10s)) << holder.diagnostics();
  spawn_contenders(2, 10, 20);
  ASSERT_TRUE(shard_listeners(2)) << "the contenders never waited on the shard channel";
  const auto at = fault("kill -9 of the lock's master, its replica stopped since the hold");
  cluster_.kill(m);
  cluster_.node(replica).resume();
  ASSERT_EQ(cluster_.wait_for_promotion_of_replica_of(m), replica);
  const auto promoted = fault("replica promoted");
  measured("kill -9: replica promoted " + ms_text(promoted - at) + " ms after the kill");
  wait_all_exit(40s);
  probe.stop();
  const auto r = finish();
  expect_fenced_safety(r);
  const auto* lost = first_event("lost", "holder", at);
  ASSERT_NE(lost, nullptr) << "the hold the promoted replica lacks never ended in lease_lost\n"
                           << report_json_;
  const auto bound =
      std::chrono::duration_cast<std::chrono::nanoseconds>(cluster_.options().node_timeout + 3s);
  EXPECT_LE(lost->t - at, bound.count()) << report_json_;
  // Told by the check made on learning of the failover, not by a renewal (every 3.3 s here).
  EXPECT_LE(lost->t - promoted, std::chrono::nanoseconds{1s}.count()) << report_json_;
  measured("kill -9: the holder the promoted replica lacks saw lease_lost " +
           ms_text(lost->t - at) + " ms after the kill (" + ms_text(lost->t - promoted) +
           " ms after the promotion); " + std::to_string(r.overlaps.size()) + " overlap(s), " +
           std::to_string(r.token_regressions) + " token regression(s), " +
           std::to_string(r.fenced_rejections) + " fenced access(es) refused");
  EXPECT_EQ(r.token_regressions, 0u) << report_json_;  // the new master's clock is ahead
  expect_recovered(r, at, "kill -9 of the master");
  expect_nothing_sent_after_demotion(probe);
}

// By hand, so that ASK and TRYAGAIN are certain: IMPORTING/MIGRATING, then a pause with the
// keys on the old master (a missing key is asked for at the new one, where a script whose keys
// are not all there gets TRYAGAIN), MIGRATE of every key of the slot, a pause, SETSLOT NODE.
// A holder renews every 400 ms (watchdog=1200ms) across the whole migration.
TEST_F(cluster_faults, resharding_the_slot_by_hand_while_held_and_waited) {
  cluster_probe probe{cluster_url(""), probe_name()};
  auto& holder = spawn("holder", cluster_url("watchdog=1200ms"),
                       {"--count", "1", "--hold-first", "2500", "--wait", "10000"});
  ASSERT_TRUE(wait_line(holder, "enter ", 10s)) << holder.diagnostics();
  spawn_contenders(2, 20, 20);
  ASSERT_TRUE(shard_listeners(2)) << "the contenders never waited on the shard channel";
  const auto from = cluster_.master_of(slot());
  std::size_t to = from;
  for (auto m : cluster_.masters()) {
    if (m != from) to = m;
  }
  const auto at = fault("resharding: MIGRATING/IMPORTING");
  cluster_.migrate_slot_begin(slot(), from, to);
  // At least 300 ms, and until the probe has met the migration (slower under sanitizers).
  auto redirected = [&] {
    const auto c = probe.on_router<dlock::topology::router::redirect_counts>(
        [](auto& rt) { return rt.redirected(); });
    return c.ask + c.try_again;
  };
  std::this_thread::sleep_for(300ms);
  EXPECT_TRUE(dlock::test::wait_until([&] { return redirected() > 0; }, 10s));
  const auto keys =
      cluster_.node(from).command({"CLUSTER", "GETKEYSINSLOT", std::to_string(slot()), "100"});
  const auto names = list_items(keys);
  fault("resharding: MIGRATE of " + std::to_string(names.size()) + " key(s)");
  if (!names.empty()) cluster_.migrate_keys(slot(), from, to, names);
  std::this_thread::sleep_for(300ms);
  cluster_.migrate_slot_end(slot(), to);
  const auto done = fault("resharding: SETSLOT NODE");
  std::this_thread::sleep_for(300ms);
  wait_all_exit(40s);
  probe.stop();
  const auto r = finish();
  expect_fenced_safety(r);
  EXPECT_TRUE(r.overlaps.empty()) << report_json_;
  EXPECT_EQ(r.token_regressions, 0u) << report_json_;
  EXPECT_EQ(r.errors, 0u) << report_json_;
  EXPECT_EQ(r.lost_events, 0u) << "a renewal failed across the migration\n" << report_json_;
  const auto counts = probe.on_router<dlock::topology::router::redirect_counts>(
      [](auto& rt) { return rt.redirected(); });
  EXPECT_GT(counts.ask, 0u);
  EXPECT_GT(counts.try_again, 0u);
  EXPECT_EQ(probe.metrics().redirects, counts.ask + counts.moved);  // as client::metrics() says
  EXPECT_EQ(probe.failures(), 0) << "the probe's lock calls failed";
  measured("resharding by hand (the slot migrating for " + ms_text(done - at) + " ms): the " +
           "probe followed " + std::to_string(counts.ask) + " ASK, " +
           std::to_string(counts.try_again) + " TRYAGAIN, " + std::to_string(counts.moved) +
           " MOVED; its longest lock+unlock of a free lock took " +
           std::to_string(probe.longest_ms()) + " ms; the holder renewing every 400 ms across " +
           "it kept its lease");
}

TEST_F(cluster_faults, whole_cluster_restart_while_held_and_waited) {
  spawn_contenders(3, 40, 30);  // enough sections left for after the restart
  ASSERT_TRUE(wait_line(*workers_[0], "enter ", 10s));
  ASSERT_TRUE(shard_listeners(2));
  fault("restart of every node (no persistence: every lock key is gone)");
  cluster_.restart_all();
  const auto back = fault("cluster ok again");
  wait_all_exit(40s);
  const auto r = finish();
  expect_fenced_safety(r);
  expect_recovered(r, back, "whole-cluster restart");
  EXPECT_EQ(r.token_regressions, 0u) << report_json_;  // tokens follow the servers' clocks
  measured("whole-cluster restart: " + std::to_string(r.lost_events) + " lease_lost, " +
           std::to_string(r.token_regressions) + " token regression(s) (the slot's fencing " +
           "counter was lost with the data)");
}

}  // namespace
}  // namespace dlock::faults::test
