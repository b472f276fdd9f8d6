// The Redis Cluster fixture itself (tests/support/redis_cluster.hpp): six real redis-server
// processes, 3 masters with a replica each, and the operations the cluster tests lean on —
// redirections, by-hand resharding (ASK, TRYAGAIN), graceful failover, kill -9 of a master and
// the promotion of its replica, and a whole-cluster restart that keeps the cluster's
// configuration. Each test starts its own cluster (2-3 s), so the checks are grouped. The
// fixture's costs are printed as "[ timing ] ..." lines.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/cluster_view.hpp"
#include "support/redis_cluster.hpp"
#include "test_util.hpp"

using namespace std::chrono_literals;

namespace {

using dlock::test::redis_cluster;
using dlock::test::report_timing;
using dlock::test::since;
using steady = std::chrono::steady_clock;

std::string address(const redis_cluster& cluster, std::size_t i) {
  return "127.0.0.1:" + std::to_string(cluster.node(i).port());
}

// "-MOVED <slot> 127.0.0.1:<port of node i>"
std::string moved_to(const redis_cluster& cluster, int slot, std::size_t i) {
  return "-MOVED " + std::to_string(slot) + " " + address(cluster, i);
}

std::size_t another_master(const redis_cluster& cluster, std::size_t not_this) {
  for (const auto m : cluster.masters()) {
    if (m != not_this) return m;
  }
  throw std::runtime_error("only one master");
}

// Every node's own view: each slot served by exactly one master, three masters in all.
void expect_full_coverage(const redis_cluster& cluster) {
  for (std::size_t i = 0; i < cluster.size(); ++i) {
    std::vector<int> served(dlock::test::cluster_slot_count, 0);
    int serving = 0;
    for (const auto& e : cluster.view(i)) {
      if (!e.is_master() || e.slots.empty()) continue;
      ++serving;
      for (const auto& [lo, hi] : e.slots) {
        for (int s = lo; s <= hi; ++s) ++served.at(static_cast<std::size_t>(s));
      }
    }
    EXPECT_EQ(serving, 3) << "node " << i;
    EXPECT_EQ(std::count(served.begin(), served.end(), 1), dlock::test::cluster_slot_count)
        << "node " << i << " sees every slot served once";
    EXPECT_NE(cluster.node(i).command({"CLUSTER", "INFO"}).find("cluster_state:ok"),
              std::string::npos);
  }
}

TEST(cluster_fixture, three_masters_with_a_replica_each_serve_every_slot_and_redirect) {
  const auto started = steady::now();
  redis_cluster cluster;
  report_timing("start (6 nodes, create, all agree)", since(started));

  ASSERT_EQ(cluster.size(), 6u);
  const auto masters = cluster.masters();
  ASSERT_EQ(masters.size(), 3u);
  std::string url = "redis+cluster://";
  for (const auto m : masters) {
    EXPECT_EQ(cluster.replicas_of(m).size(), 1u) << "master " << m;
    url += (url.back() == '/' ? "" : ",") + address(cluster, m);
  }
  EXPECT_EQ(cluster.url(), url);
  expect_full_coverage(cluster);

  // The cluster spec's test vector, and a hash tag.
  EXPECT_EQ(cluster.slot_of("123456789"), 12739);
  EXPECT_EQ(cluster.slot_of("{user1000}.following"), cluster.slot_of("{user1000}.followers"));

  // A key lives on its slot's master; the other masters and the replicas redirect there.
  const std::string key = "{fixture}key";
  const int slot = cluster.slot_of(key);
  const auto owner = cluster.master_of(slot);
  ASSERT_EQ(cluster.command_on_slot(slot, {"SET", key, "v"}), "+OK");
  EXPECT_EQ(cluster.node(owner).command({"GET", key}), "v");
  for (const auto m : masters) {
    if (m != owner) {
      EXPECT_EQ(cluster.node(m).command({"GET", key}), moved_to(cluster, slot, owner));
    }
  }
  EXPECT_EQ(cluster.node(cluster.replicas_of(owner).at(0)).command({"GET", key}),
            moved_to(cluster, slot, owner));
}

TEST(cluster_fixture, by_hand_migration_gives_ask_and_tryagain_until_setslot_node) {
  redis_cluster cluster;
  const std::string a = "{moving}a", b = "{moving}b";
  const int slot = cluster.slot_of(a);
  const auto from = cluster.master_of(slot);
  const auto to = another_master(cluster, from);
  ASSERT_EQ(cluster.command_on_slot(slot, {"SET", a, "1"}), "+OK");
  ASSERT_EQ(cluster.command_on_slot(slot, {"SET", b, "2"}), "+OK");

  const auto started = steady::now();
  cluster.migrate_slot_begin(slot, from, to);
  cluster.migrate_keys(slot, from, to, {a});
  const auto half = since(started);
  const auto ask = "-ASK " + std::to_string(slot) + " " + address(cluster, to);
  EXPECT_EQ(cluster.node(from).command({"GET", a}), ask) << "a migrated key: ASK";
  EXPECT_EQ(cluster.node(from).command({"GET", b}), "2") << "a key not yet moved is served";
  EXPECT_EQ(cluster.node(from).command({"MGET", a, b}).rfind("-TRYAGAIN", 0), 0u)
      << "a multi-key command with its keys split: TRYAGAIN";
  EXPECT_EQ(cluster.node(to).command({"GET", a}), moved_to(cluster, slot, from))
      << "without ASKING the destination sends the client back";

  const auto resumed = steady::now();
  cluster.migrate_keys(slot, from, to, {b});
  cluster.migrate_slot_end(slot, to);
  report_timing("migration of one slot (begin, 2 MIGRATEs, end, all agree)", half + since(resumed));
  EXPECT_EQ(cluster.master_of(slot), to);
  for (std::size_t i = 0; i < cluster.size(); ++i) {
    EXPECT_EQ(dlock::test::slot_owner(cluster.view(i), slot), cluster.id(to)) << "node " << i;
  }
  EXPECT_EQ(cluster.node(to).command({"MGET", a, b}), "[1, 2]");
  EXPECT_EQ(cluster.node(from).command({"GET", a}), moved_to(cluster, slot, to));
  EXPECT_EQ(cluster.node(from).command({"MGET", a, b}), moved_to(cluster, slot, to));
}

TEST(cluster_fixture, failover_kill_promotion_rejoin_and_whole_cluster_restart) {
  redis_cluster cluster;
  const std::string key = "{failing}key";
  const int slot = cluster.slot_of(key);
  const auto first = cluster.master_of(slot);
  const auto second = cluster.replicas_of(first).at(0);
  ASSERT_EQ(cluster.command_on_slot(slot, {"SET", key, "v"}), "+OK");

  // Graceful failover: the replica takes over, with the data; the old master follows it.
  auto started = steady::now();
  cluster.failover(second);
  report_timing("CLUSTER FAILOVER until all agree", since(started));
  EXPECT_EQ(cluster.master_of(slot), second);
  EXPECT_EQ(cluster.replicas_of(second), std::vector<std::size_t>{first});
  EXPECT_EQ(cluster.node(second).command({"GET", key}), "v");
  EXPECT_EQ(cluster.node(first).command({"ROLE"}).rfind("[slave,", 0), 0u);

  // kill -9 of that master: its replica (the first master) is promoted within the bound.
  started = steady::now();
  cluster.kill(second);
  const auto promoted = cluster.wait_for_promotion_of_replica_of(second);
  const auto took = since(started);
  report_timing("kill -9 of a master until its replica is promoted and all agree", took);
  EXPECT_EQ(promoted, first);
  EXPECT_LE(took, cluster.options().node_timeout + 3s);
  EXPECT_EQ(cluster.master_of(slot), first);
  EXPECT_EQ(cluster.node(first).command({"GET", key}), "v");

  // The killed node comes back (same ports, same nodes.conf) as the new master's replica.
  started = steady::now();
  cluster.restart_node(second);
  report_timing("restart of the killed node until it rejoined as a replica", since(started));
  EXPECT_EQ(cluster.replicas_of(first), std::vector<std::size_t>{second});

  // Whole-cluster restart: same node IDs, roles and slots (nodes.conf kept); the data is gone.
  const auto masters = cluster.masters();
  started = steady::now();
  cluster.restart_all();
  report_timing("restart_all until cluster_state:ok and all agree", since(started));
  for (std::size_t i = 0; i < cluster.size(); ++i) {
    EXPECT_EQ(cluster.node(i).command({"CLUSTER", "MYID"}), cluster.id(i)) << "node " << i;
    EXPECT_NE(cluster.node(i).command({"CLUSTER", "INFO"}).find("cluster_state:ok"),
              std::string::npos);
  }
  EXPECT_EQ(cluster.masters(), masters);
  EXPECT_EQ(cluster.master_of(slot), first);
  expect_full_coverage(cluster);
  EXPECT_EQ(cluster.node(first).command({"GET", key}), "$-1");
}

}  // namespace
