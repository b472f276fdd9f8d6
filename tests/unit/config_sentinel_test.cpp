// Redis Sentinel configuration: redis+sentinel:// and rediss+sentinel:// URIs,
// config::sentinel_nodes / sentinel_master / sentinel_user / sentinel_password, and the replica
// policy's `auto` and its bound against the watchdog lease.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "config_parse.hpp"
#include "dlock/config.hpp"

namespace {

using namespace std::chrono_literals;
using dlock::config;
using dlock::endpoint;
using dlock::test::invalid;
using dlock::test::parse_ok;
using dlock::test::refused;

bool same(const std::vector<endpoint>& a, const std::vector<endpoint>& b) { return a == b; }

TEST(config_sentinel_uri, reads_sentinels_master_and_data_node_credentials) {
  const auto cfg = parse_ok(
      "redis+sentinel://app:s%40cret@s1:26380,10.0.0.2,[fd00::7]:26381/my%2Dmaster?timeout=500ms");
  EXPECT_TRUE(cfg.sentinel());
  EXPECT_FALSE(cfg.cluster());
  EXPECT_TRUE(same(cfg.sentinel_nodes,
                   {{"s1", 26380}, {"10.0.0.2", 26379}, {"fd00::7", 26381}}));  // default 26379
  EXPECT_EQ(cfg.sentinel_master, "my-master");
  EXPECT_EQ(cfg.username, "app");  // the userinfo is for the data nodes
  EXPECT_EQ(cfg.password, "s@cret");
  EXPECT_TRUE(cfg.sentinel_user.empty());
  EXPECT_TRUE(cfg.sentinel_password.empty());
  EXPECT_EQ(cfg.database, 0);
  EXPECT_EQ(cfg.command_timeout, 500ms);
  EXPECT_FALSE(cfg.tls.enabled);
  EXPECT_EQ(cfg.host, "s1");  // messages naming "the server" name a real node
}

TEST(config_sentinel_uri, reads_sentinel_auth_database_and_tls) {
  const auto cfg = parse_ok(
      "rediss+sentinel://:datapass@s1/mymaster/3?sentinel_user=watch&sentinel_password=p%26w"
      "&ca=/etc/ca.pem");
  EXPECT_TRUE(cfg.tls.enabled);
  EXPECT_EQ(cfg.tls.ca_file, "/etc/ca.pem");
  EXPECT_EQ(cfg.database, 3);
  EXPECT_EQ(cfg.password, "datapass");
  EXPECT_EQ(cfg.sentinel_user, "watch");
  EXPECT_EQ(cfg.sentinel_password, "p&w");
  EXPECT_EQ(parse_ok("redis+sentinel://s1/m/").database, 0);
}

TEST(config_sentinel_uri, refuses_what_it_cannot_use) {
  EXPECT_TRUE(refused("redis+sentinel://", "at least one sentinel"));
  EXPECT_TRUE(refused("redis+sentinel:///mymaster", "at least one sentinel"));
  EXPECT_TRUE(refused("redis+sentinel://s1:26379", "needs /master-name"));
  EXPECT_TRUE(refused("redis+sentinel://s1:26379/", "needs /master-name"));
  EXPECT_TRUE(refused("redis+sentinel://s1//2", "needs /master-name"));
  EXPECT_TRUE(refused("redis+sentinel://s1,,s2/m", "node 2 of the node list is empty"));
  EXPECT_TRUE(refused("redis+sentinel://s1:0/m", "port must be 1..65535"));
  EXPECT_TRUE(refused("redis+sentinel://s1/m/x", "database index"));
  EXPECT_TRUE(refused("redis+sentinel://s1/m%zz", "percent-encoding in the master name"));
  EXPECT_TRUE(refused("redis+sentinel://s1/m?sentinel_user=u", "sentinel user name needs"));
  EXPECT_TRUE(refused("redis://h?sentinel_password=p", "need redis+sentinel://"));
  EXPECT_TRUE(
      refused("redis+cluster://h?sentinel_user=u&sentinel_password=p", "need redis+sentinel://"));
  EXPECT_TRUE(refused("redis+sentinel://s1/m?ca=/x", "needs rediss://"));
  EXPECT_TRUE(refused("redis://a,b", "redis+sentinel://"));
  EXPECT_TRUE(refused("sentinel://s1/m", "redis+sentinel://"));
}

TEST(config_sentinel_validate, checks_struct_built_sentinel_configs) {
  config cfg;
  cfg.sentinel_nodes = {{"s1", 26379}};
  EXPECT_TRUE(invalid(cfg, "needs the master's name"));
  cfg.sentinel_master = "m";
  std::string reason;
  EXPECT_FALSE(cfg.validate(reason)) << reason;
  cfg.sentinel_nodes.push_back({"", 26379});
  EXPECT_TRUE(invalid(cfg, "sentinel 2: missing host"));
  cfg.sentinel_nodes.back() = {"s2", 0};
  EXPECT_TRUE(invalid(cfg, "sentinel 2 (s2): port must be 1..65535"));
  cfg.sentinel_nodes.pop_back();
  cfg.sentinel_user = "u";
  EXPECT_TRUE(invalid(cfg, "sentinel user name needs a sentinel password"));
  cfg.sentinel_password = "p";
  EXPECT_FALSE(cfg.validate(reason)) << reason;
  cfg.cluster_nodes = {{"c1", 7000}};
  EXPECT_TRUE(invalid(cfg, "exclude each other"));
}

TEST(config_replica_policy, auto_counts_online_replicas_and_wait_stays_under_a_third) {
  EXPECT_EQ(parse_ok("redis://h?wait_replicas=auto").wait_replicas, config::online_replicas);
  EXPECT_EQ(parse_ok("redis+sentinel://s/m?wait_replicas=2").wait_replicas, 2u);
  EXPECT_TRUE(refused("redis://h?wait_replicas=65", "0..64 or auto"));
  EXPECT_TRUE(refused("redis://h?wait_replicas=some", "0..64 or auto"));
  EXPECT_TRUE(refused("redis://h?wait_replicas=1&watchdog=3s&wait_timeout=1s", "under a third"));
  EXPECT_EQ(parse_ok("redis://h?wait_replicas=1&watchdog=3s&wait_timeout=999ms").wait_timeout,
            999ms);
  // Without a replica policy, wait_timeout is unused and not held to the bound.
  EXPECT_EQ(parse_ok("redis://h?watchdog=3s&wait_timeout=1s").wait_timeout, 1s);
  config cfg;
  cfg.wait_replicas = 100;
  EXPECT_TRUE(invalid(cfg, "0..64 or auto"));
}

}  // namespace
