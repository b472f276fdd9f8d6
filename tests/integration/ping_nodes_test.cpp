// client::ping_nodes against real servers: a single server is one standalone entry (an
// unreachable one reports its error in the entry, not the call); a 3+3 Redis Cluster lists every
// node with its role, slots and master; a node killed is reported, the others still answer; and
// a shutdown ends a call that waits on a dead node at once.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <string>
#include <system_error>
#include <vector>

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "support/redis_cluster.hpp"
#include "test_util.hpp"

using namespace std::chrono_literals;
using dlock::errc;
using dlock::node_role;

namespace {

const dlock::node_status* find_port(const std::vector<dlock::node_status>& nodes, int port) {
  for (const auto& n : nodes) {
    if (n.address.port == port) return &n;
  }
  return nullptr;
}

TEST(ping_nodes, a_single_server_is_one_standalone_entry) {
  dlock::test::redis_server srv;
  dlock::client c{dlock::test::config_for(srv)};
  const auto nodes = c.ping_nodes();
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0].address, (dlock::endpoint{"127.0.0.1", srv.port()}));
  EXPECT_EQ(nodes[0].role, node_role::standalone);
  EXPECT_TRUE(nodes[0].slots.empty());
  EXPECT_FALSE(nodes[0].error) << nodes[0].error.message();
  EXPECT_GT(nodes[0].rtt.count(), 0);
}

TEST(ping_nodes, an_unreachable_server_is_an_entry_with_its_error) {
  const auto port = dlock::test::free_port();  // nothing listens here
  dlock::client c{dlock::config::from_uri("redis://127.0.0.1:" + std::to_string(port) +
                                          "?connect_timeout=300ms")};
  std::error_code ec;
  const auto nodes = c.ping_nodes(ec);
  EXPECT_FALSE(ec) << ec.message();
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0].error, errc::connection_refused);
  EXPECT_EQ(nodes[0].rtt.count(), 0);
}

TEST(ping_nodes, a_cluster_lists_every_node_then_reports_a_killed_one) {
  dlock::test::redis_cluster cluster;
  dlock::client c{dlock::config::from_uri(cluster.url() + "?connect_timeout=500ms")};
  auto nodes = c.ping_nodes();
  ASSERT_EQ(nodes.size(), 6u);
  std::size_t served = 0;
  for (const auto m : cluster.masters()) {
    const auto* n = find_port(nodes, cluster.node(m).port());
    ASSERT_NE(n, nullptr) << "master " << m;
    EXPECT_EQ(n->role, node_role::master);
    EXPECT_FALSE(n->error) << n->error.message();
    for (const auto& r : n->slots) served += static_cast<std::size_t>(r.last - r.first) + 1;
    for (const auto replica : cluster.replicas_of(m)) {
      const auto* rn = find_port(nodes, cluster.node(replica).port());
      ASSERT_NE(rn, nullptr) << "replica " << replica;
      EXPECT_EQ(rn->role, node_role::replica);
      EXPECT_EQ(rn->replica_of, n->address);
      EXPECT_FALSE(rn->error) << rn->error.message();
    }
  }
  EXPECT_EQ(served, 16384u);
  EXPECT_EQ(nodes[0].role, node_role::master) << "shard by shard, each master first";
  EXPECT_EQ(nodes[0].slots.front().first, 0);

  const auto replica = cluster.replicas_of(cluster.masters().at(2)).at(0);
  cluster.kill(replica);
  nodes = c.ping_nodes();
  ASSERT_EQ(nodes.size(), 6u);
  for (const auto& n : nodes) {
    if (n.address.port == cluster.node(replica).port()) {
      EXPECT_EQ(n.error, errc::connection_refused);
    } else {
      EXPECT_FALSE(n.error) << n.address.port << ": " << n.error.message();
    }
  }
}

TEST(ping_nodes, shutdown_ends_a_call_waiting_on_a_dead_node) {
  dlock::test::redis_cluster cluster;
  const auto dead = cluster.replicas_of(cluster.masters().at(0)).at(0);
  const auto live = cluster.replicas_of(cluster.masters().at(1)).at(0);
  cluster.kill(dead);
  dlock::client c{dlock::config::from_uri(cluster.url() + "?connect_timeout=10s&timeout=10s")};
  const auto pings_before = dlock::test::command_stat(cluster.node(live), "ping");
  auto call = std::async(std::launch::async, [&] {
    std::error_code ec;
    c.ping_nodes(ec);
    return ec;
  });
  // A live replica got its PING: the call now waits on the dead one (up to the 10 s timeout).
  ASSERT_TRUE(dlock::test::wait_until(
      [&] { return dlock::test::command_stat(cluster.node(live), "ping") > pings_before; }, 10s));
  ASSERT_EQ(call.wait_for(0s), std::future_status::timeout) << "still waiting on the dead node";
  const auto start = std::chrono::steady_clock::now();
  c.shutdown();
  ASSERT_EQ(call.wait_for(2s), std::future_status::ready) << "shutdown ended the call";
  EXPECT_EQ(call.get(), errc::shutdown);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
}

}  // namespace
