// The Redis Sentinel fixture itself (tests/support/redis_sentinel.hpp): a master, two replicas
// and three sentinels, all real processes. Each group costs 2-3 s to start, so the checks are
// grouped, and each group makes at most one failover (a sentinel that led one waits 2 ×
// failover-timeout before leading another). The fixture's costs are printed as "[ timing ]".
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/redis_sentinel.hpp"
#include "test_util.hpp"

using namespace std::chrono_literals;

namespace {

using dlock::test::command_options;
using dlock::test::report_timing;
using dlock::test::send_command;
using dlock::test::sentinel_group;
using dlock::test::sentinel_group_options;
using dlock::test::since;
using steady = std::chrono::steady_clock;

constexpr auto failover_bound = 10s;  // measured 1.1-2.4 s (TOPOLOGY.md); generous for CI

std::string addr_reply(std::uint16_t port) { return "[127.0.0.1, " + std::to_string(port) + "]"; }

std::vector<std::string> get_master_addr(const sentinel_group& g) {
  return {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", g.master_name()};
}

// Whether every replica of the current master holds `key` = `value`, within `limit`.
bool replicated(const sentinel_group& g, const std::string& key, const std::string& value,
                std::chrono::milliseconds limit) {
  return dlock::test::wait_until(
      [&] {
        for (const auto port : g.replicas()) {
          if (g.node(port).command({"GET", key}) != value) return false;
        }
        return true;
      },
      limit);
}

TEST(sentinel_fixture, comes_up_replicates_survives_a_partition_and_fails_over_on_kill9) {
  const auto started = steady::now();
  sentinel_group g{sentinel_group_options{.proxied_sentinels = {2}}};
  report_timing("start (1 master, 2 replicas, 3 sentinels, all discovered)", since(started));

  // The initial master, as every sentinel reports it, with both replicas and two peers each.
  const auto old = g.master_port();
  EXPECT_EQ(old, g.data_node(0).port());
  EXPECT_EQ(g.replicas().size(), 2u);
  for (std::size_t i = 0; i < g.sentinel_count(); ++i) {
    EXPECT_EQ(g.sentinel(i).command(get_master_addr(g)), addr_reply(old)) << "sentinel " << i;
    EXPECT_EQ(g.sentinel_entries(i).size(), 2u) << "sentinel " << i;
  }
  EXPECT_NE(g.sentinel_port(2), g.sentinel(2).port()) << "sentinel 2 is reached via its proxy";
  EXPECT_EQ(g.url("timeout=1s"),
            "redis+sentinel://127.0.0.1:" + std::to_string(g.sentinel_port(0)) +
                ",127.0.0.1:" + std::to_string(g.sentinel_port(1)) +
                ",127.0.0.1:" + std::to_string(g.sentinel_port(2)) + "/mymaster?timeout=1s");
  // The peers know sentinel 2 by its announced (proxy) port.
  bool announced = false;
  for (const auto& e : g.sentinel_entries(0))
    announced |= e.at("port") == std::to_string(g.sentinel_port(2));
  EXPECT_TRUE(announced);

  // A write on the master reaches both replicas.
  ASSERT_EQ(g.master().command({"SET", "fixture:k", "v1"}), "+OK");
  EXPECT_TRUE(replicated(g, "fixture:k", "v1", 5s));

  // Partitioned through its proxy, sentinel 2 is unreachable; the others still answer.
  g.sentinel_proxy(2).blackhole();
  EXPECT_THROW(send_command(g.sentinel_port(2), {"PING"}, {.timeout = 300ms}), std::runtime_error);
  EXPECT_EQ(send_command(g.sentinel_port(0), get_master_addr(g)), addr_reply(old));
  EXPECT_EQ(send_command(g.sentinel_port(1), get_master_addr(g)), addr_reply(old));
  g.sentinel_proxy(2).pass();
  EXPECT_EQ(send_command(g.sentinel_port(2), {"PING"}), "+PONG");

  // kill -9 of the master: a replica is promoted and takes writes.
  const auto killed = steady::now();
  g.node(old).kill9();
  const auto now = g.wait_new_master(old, failover_bound);
  report_timing("kill -9 of the master -> new master (majority + ROLE)", since(killed));
  EXPECT_NE(now, old);
  EXPECT_EQ(g.master_port(), now);
  EXPECT_EQ(g.node(now).command({"SET", "fixture:k", "v2"}), "+OK");
  g.wait_replicas_online(1, failover_bound);
  EXPECT_TRUE(replicated(g, "fixture:k", "v2", 5s));

  // A restarted sentinel keeps what it learned: its configuration file survives.
  g.sentinel(1).restart();
  EXPECT_EQ(g.sentinel(1).command(get_master_addr(g)), addr_reply(now));
}

TEST(sentinel_fixture, acl_data_nodes_and_a_password_sentinel_fail_over_on_request) {
  sentinel_group g{sentinel_group_options{
      .data_username = "app", .data_password = "apppass", .sentinel_password = "spass"}};
  const auto old = g.master_port();

  // The sentinel refuses a client that has not authenticated, and answers one that has.
  const auto port = g.sentinel_port(0);
  EXPECT_EQ(send_command(port, get_master_addr(g), {.authenticate = false}).rfind("-NOAUTH", 0),
            0u);
  EXPECT_EQ(send_command(port, get_master_addr(g), {.password = "spass"}), addr_reply(old));
  // The data nodes' default user is off: only `app` gets in.
  EXPECT_EQ(send_command(old, {"PING"}, {.authenticate = false}).rfind("-NOAUTH", 0), 0u);
  EXPECT_EQ(send_command(old, {"PING"}, {.username = "app", .password = "apppass"}), "+PONG");
  EXPECT_EQ(g.url().substr(0, 34), "redis+sentinel://app:apppass@127.0");
  EXPECT_NE(g.url().find("/mymaster?sentinel_password=spass"), std::string::npos) << g.url();

  // SENTINEL FAILOVER: another node becomes master and the other replica follows it. (The old
  // master is demoted only ~11 s later, by sentinel's +convert-to-slave: not waited for here.)
  const auto asked = steady::now();
  EXPECT_EQ(g.failover(), old);
  const auto now = g.wait_new_master(old, failover_bound);
  report_timing("SENTINEL FAILOVER -> new master", since(asked));
  EXPECT_NE(now, old);
  g.wait_replicas_online(1, failover_bound);
  ASSERT_EQ(g.node(now).command({"SET", "fixture:k", "v"}), "+OK");
  EXPECT_TRUE(replicated(g, "fixture:k", "v", 5s));
}

TEST(sentinel_fixture, held_replication_then_kill9_loses_the_write_double_grant) {
  sentinel_group g{sentinel_group_options{.proxied_replication = true,
                                          .data_password = "dpass",
                                          .sentinel_username = "watch",
                                          .sentinel_password = "wpass"}};
  // An ACL user on the sentinel: refused without AUTH or with a wrong password.
  const auto port = g.sentinel_port(1);
  EXPECT_EQ(send_command(port, get_master_addr(g), {.authenticate = false}).rfind("-NOAUTH", 0),
            0u);
  EXPECT_THROW(send_command(port, get_master_addr(g), {.username = "watch", .password = "no"}),
               std::runtime_error);
  const auto old = g.master_port();
  EXPECT_EQ(send_command(port, get_master_addr(g), {.username = "watch", .password = "wpass"}),
            addr_reply(old));
  EXPECT_NE(g.url().find("?sentinel_user=watch&sentinel_password=wpass"), std::string::npos);

  // The sentinels watch the master through the replication proxy.
  ASSERT_EQ(old, g.replication_proxy().port());
  ASSERT_EQ(&g.node(old), &g.data_node(0));

  // Hold the master→replica streams, then write: the replicas do not get it.
  g.replication_proxy().freeze(dlock::test::direction::server_to_client, "REPLCONF");
  ASSERT_EQ(g.node(old).command({"SET", "fixture:lock", "holder-1", "NX"}), "+OK");
  EXPECT_FALSE(replicated(g, "fixture:lock", "holder-1", 300ms));

  // kill -9: the promoted replica never saw the write, so a second holder gets the lock.
  const auto killed = steady::now();
  g.node(old).kill9();
  const auto now = g.wait_new_master(old, failover_bound);
  report_timing("kill -9 of a proxied master -> new master", since(killed));
  EXPECT_EQ(g.node(now).command({"GET", "fixture:lock"}), "$-1");
  EXPECT_EQ(g.node(now).command({"SET", "fixture:lock", "holder-2", "NX"}), "+OK");
}

}  // namespace
