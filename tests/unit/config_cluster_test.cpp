// Redis Cluster configuration: redis+cluster:// and rediss+cluster:// URIs, config::cluster_nodes
// and what config::validate checks in cluster mode.
#include <gtest/gtest.h>

#include <chrono>
#include <ostream>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "config_parse.hpp"
#include "dlock/config.hpp"
#include "dlock/error.hpp"

namespace dlock {
// Readable failures: gtest finds this by ADL. Static, so another test file may have its own.
[[maybe_unused]] static void PrintTo(const endpoint& e, std::ostream* os) {
  *os << e.host << ':' << e.port;
}
}  // namespace dlock

namespace {

using namespace std::chrono_literals;
using dlock::config;
using dlock::endpoint;
using dlock::errc;
using nodes = std::vector<endpoint>;

using dlock::test::invalid;
using dlock::test::parse_ok;
using dlock::test::refused;

config cluster_config(nodes seeds) {
  config cfg;
  cfg.cluster_nodes = std::move(seeds);
  return cfg;
}

// ---------------------------------------------------------------------------------------------
// Good URIs

TEST(config_cluster_uri, one_seed) {
  const auto cfg = parse_ok("redis+cluster://10.0.0.5:7000");
  EXPECT_TRUE(cfg.cluster());
  EXPECT_EQ(cfg.cluster_nodes, (nodes{{"10.0.0.5", 7000}}));
  EXPECT_EQ(cfg.host, "10.0.0.5");  // the first seed, for messages
  EXPECT_EQ(cfg.port, 7000);
  EXPECT_FALSE(cfg.tls.enabled);
  EXPECT_EQ(cfg.database, 0);
}

TEST(config_cluster_uri, port_defaults_to_6379) {
  EXPECT_EQ(parse_ok("redis+cluster://h").cluster_nodes, (nodes{{"h", 6379}}));
  EXPECT_EQ(parse_ok("redis+cluster://a,b:7001").cluster_nodes, (nodes{{"a", 6379}, {"b", 7001}}));
}

TEST(config_cluster_uri, several_seeds_in_order) {
  const auto cfg = parse_ok("redis+cluster://a:7000,b.example:7001,10.0.0.3:7002");
  EXPECT_EQ(cfg.cluster_nodes, (nodes{{"a", 7000}, {"b.example", 7001}, {"10.0.0.3", 7002}}));
  EXPECT_EQ(cfg.host, "a");
  EXPECT_EQ(cfg.port, 7000);
}

TEST(config_cluster_uri, ipv6_seeds) {
  const auto cfg = parse_ok("redis+cluster://[::1]:7000,[fd00::7],h:1");
  EXPECT_EQ(cfg.cluster_nodes, (nodes{{"::1", 7000}, {"fd00::7", 6379}, {"h", 1}}));
  EXPECT_EQ(cfg.host, "::1");
}

TEST(config_cluster_uri, tls) {
  const auto cfg = parse_ok(
      "rediss+cluster://a:7000,b:7001?ca=/etc/ca.pem&cert=/c.pem&key=/k.pem&sni=redis.internal");
  EXPECT_TRUE(cfg.tls.enabled);
  EXPECT_EQ(cfg.cluster_nodes, (nodes{{"a", 7000}, {"b", 7001}}));
  EXPECT_EQ(cfg.tls.ca_file, "/etc/ca.pem");
  EXPECT_EQ(cfg.tls.cert_file, "/c.pem");
  EXPECT_EQ(cfg.tls.key_file, "/k.pem");
  EXPECT_EQ(cfg.tls.server_name, "redis.internal");
  // Without sni each node's certificate is checked against that node's own host.
  EXPECT_TRUE(parse_ok("rediss+cluster://a,b").tls.server_name.empty());
}

TEST(config_cluster_uri, parameters_apply) {
  const auto cfg = parse_ok(
      "redis+cluster://a:1,b:2?timeout=500ms&watchdog=10s&name=app&fencing=off&wait_replicas=1"
      "&recheck=2s&max_name=64");
  EXPECT_EQ(cfg.command_timeout, 500ms);
  EXPECT_EQ(cfg.watchdog_lease, 10s);
  EXPECT_EQ(cfg.client_name, "app");
  EXPECT_EQ(cfg.fencing, config::fencing_mode::off);
  EXPECT_EQ(cfg.wait_replicas, 1u);
  EXPECT_EQ(cfg.wait_recheck, 2s);
  EXPECT_EQ(cfg.max_name_length, 64u);
}

TEST(config_cluster_uri, userinfo_for_every_node) {
  const auto cfg = parse_ok("redis+cluster://app%40x:p%3As%2Cs@a:1,b:2");
  EXPECT_EQ(cfg.username, "app@x");
  EXPECT_EQ(cfg.password, "p:s,s");
  EXPECT_EQ(cfg.cluster_nodes, (nodes{{"a", 1}, {"b", 2}}));
  const auto pw_only = parse_ok("redis+cluster://:secret@a:1");
  EXPECT_TRUE(pw_only.username.empty());
  EXPECT_EQ(pw_only.password, "secret");
  EXPECT_EQ(parse_ok("redis+cluster://secret@a:1").password, "secret");  // as redis-cli reads it
}

TEST(config_cluster_uri, database_zero_or_none) {
  EXPECT_EQ(parse_ok("redis+cluster://a:1/0").database, 0);
  EXPECT_EQ(parse_ok("redis+cluster://a:1,b:2/").database, 0);
  EXPECT_EQ(parse_ok("redis+cluster://a:1/0?timeout=1s").command_timeout, 1s);
}

TEST(config_cluster_uri, parsed_config_validates) {
  std::string reason;
  EXPECT_FALSE(parse_ok("rediss+cluster://u:p@a:1,[::1]:2/0?sni=x").validate(reason)) << reason;
}

TEST(config_cluster_uri, throwing_form) {
  EXPECT_EQ(config::from_uri("redis+cluster://a:1,b:2").cluster_nodes.size(), 2u);
  try {
    config::from_uri("redis+cluster://a:1,,b:2");
    FAIL() << "no exception";
  } catch (const dlock::lock_error& e) {
    EXPECT_EQ(e.code(), errc::invalid_uri);
    EXPECT_NE(std::string(e.what()).find("empty"), std::string::npos) << e.what();
  }
}

TEST(config_cluster_uri, plain_schemes_are_not_cluster) {
  EXPECT_FALSE(parse_ok("redis://h:6380/2").cluster());
  EXPECT_TRUE(parse_ok("redis://h:6380/2").cluster_nodes.empty());
  EXPECT_FALSE(parse_ok("rediss://h?sni=x").cluster());
  EXPECT_FALSE(config{}.cluster());
}

// ---------------------------------------------------------------------------------------------
// Bad URIs

TEST(config_cluster_uri, refuses_empty_node_list) {
  EXPECT_TRUE(refused("redis+cluster://", "at least one node"));
  EXPECT_TRUE(refused("rediss+cluster://", "at least one node"));
  EXPECT_TRUE(refused("redis+cluster://?timeout=1s", "at least one node"));
  EXPECT_TRUE(refused("redis+cluster:///0", "at least one node"));
  EXPECT_TRUE(refused("redis+cluster://u:p@", "at least one node"));
}

TEST(config_cluster_uri, refuses_empty_elements) {
  EXPECT_TRUE(refused("redis+cluster://a:1,,b:2", "node 2 of the node list is empty"));
  EXPECT_TRUE(refused("redis+cluster://,a:1", "node 1 of the node list is empty"));
  EXPECT_TRUE(refused("redis+cluster://a:1,", "node 2 of the node list is empty"));
  EXPECT_TRUE(refused("redis+cluster://,", "node 1 of the node list is empty"));
  EXPECT_TRUE(refused("redis+cluster://a:1,/0", "node 2 of the node list is empty"));
}

TEST(config_cluster_uri, refuses_bad_ports) {
  EXPECT_TRUE(refused("redis+cluster://a:0", "node 1 ('a:0'): port must be 1..65535"));
  EXPECT_TRUE(refused("redis+cluster://a:65536", "port must be 1..65535, got '65536'"));
  EXPECT_TRUE(refused("redis+cluster://a:x", "port must be 1..65535, got 'x'"));
  EXPECT_TRUE(refused("redis+cluster://a:-1", "port must be 1..65535"));
  EXPECT_TRUE(refused("redis+cluster://a:1,b:99999", "node 2 ('b:99999'): port"));
  EXPECT_TRUE(refused("redis+cluster://a:1,b:", "node 2 ('b:'): empty port"));
  EXPECT_TRUE(refused("redis+cluster://a:1:2", "port must be 1..65535, got '1:2'"));
  EXPECT_TRUE(refused("redis+cluster://[::1]:0", "port must be 1..65535"));
  EXPECT_TRUE(refused("redis+cluster://[::1]:", "empty port"));
}

TEST(config_cluster_uri, refuses_bad_hosts) {
  EXPECT_TRUE(refused("redis+cluster://:7000", "node 1 (':7000'): missing host"));
  EXPECT_TRUE(refused("redis+cluster://a:1,[]:2", "node 2 ('[]:2'): missing host"));
  EXPECT_TRUE(refused("redis+cluster://[::1", "unterminated [IPv6] host"));
  EXPECT_TRUE(refused("redis+cluster://a,[::1:7000", "node 2"));
  EXPECT_TRUE(refused("redis+cluster://[::1]x", "unexpected text after ]"));
  EXPECT_TRUE(refused("redis+cluster://a:1, b:2", "space or control character"));
  EXPECT_TRUE(refused("redis+cluster://a\tb:1", "space or control character"));
}

TEST(config_cluster_uri, refuses_databases_other_than_zero) {
  EXPECT_TRUE(refused("redis+cluster://a:1/1", "Redis Cluster has only database 0"));
  EXPECT_TRUE(refused("redis+cluster://a:1,b:2/2", "Redis Cluster has only database 0"));
  EXPECT_TRUE(refused("redis+cluster://a:1/x", "Redis Cluster has only database 0"));
  EXPECT_TRUE(refused("redis+cluster://a:1/-1", "Redis Cluster has only database 0"));
  EXPECT_TRUE(refused("redis+cluster://a:1/00", "Redis Cluster has only database 0"));
  EXPECT_TRUE(refused("redis+cluster://a:1/0/1", "Redis Cluster has only database 0"));
  EXPECT_TRUE(refused("rediss+cluster://a:1/3", "Redis Cluster has only database 0"));
}

TEST(config_cluster_uri, refuses_bad_parameters) {
  EXPECT_TRUE(refused("redis+cluster://a:1?foo=1", "unknown parameter 'foo'"));
  EXPECT_TRUE(refused("redis+cluster://a:1?ca=/x", "needs rediss://, rediss+cluster://"));
  EXPECT_TRUE(refused("redis+cluster://a:1?sni=x", "needs rediss://, rediss+cluster://"));
  EXPECT_TRUE(refused("redis+cluster://a:1?timeout=abc", "bad duration for 'timeout'"));
  EXPECT_TRUE(refused("redis+cluster://a:1?io_threads=2", "io_threads"));
  EXPECT_TRUE(refused("rediss+cluster://a:1?sni=", "empty value for 'sni'"));
}

TEST(config_cluster_uri, refuses_bad_userinfo) {
  EXPECT_TRUE(refused("redis+cluster://u:%zz@a:1,b:2", "bad percent-encoding"));
  EXPECT_TRUE(refused("redis+cluster://user:@a:1", "a user name needs a password"));
}

TEST(config_cluster_uri, refuses_bad_schemes) {
  EXPECT_TRUE(refused("redis+clusters://a:1", "scheme must be"));
  EXPECT_TRUE(refused("redis+cluster:/a:1", "scheme must be"));
  EXPECT_TRUE(refused("cluster://a:1", "scheme must be"));
  EXPECT_TRUE(refused("REDIS+CLUSTER://a:1", "scheme must be"));
}

TEST(config_cluster_uri, plain_scheme_refuses_a_node_list) {
  EXPECT_TRUE(refused("redis://a:1,b:2", "needs redis+cluster://"));
  EXPECT_TRUE(refused("rediss://a,b", "needs redis+cluster://"));
}

// ---------------------------------------------------------------------------------------------
// validate

TEST(config_cluster_validate, good_seeds) {
  std::string reason;
  EXPECT_FALSE(cluster_config({{"a", 7000}, {"::1", 7001}}).validate(reason)) << reason;
}

TEST(config_cluster_validate, host_and_port_unused) {
  auto cfg = cluster_config({{"a", 7000}});
  cfg.host.clear();
  cfg.port = 0;
  std::string reason;
  EXPECT_FALSE(cfg.validate(reason)) << reason;
}

TEST(config_cluster_validate, refuses_empty_seed_host) {
  EXPECT_TRUE(invalid(cluster_config({{"", 7000}}), "cluster node 1: missing host"));
  EXPECT_TRUE(invalid(cluster_config({{"a", 7000}, {"", 7001}}), "cluster node 2: missing host"));
}

TEST(config_cluster_validate, refuses_zero_seed_port) {
  EXPECT_TRUE(invalid(cluster_config({{"a", 0}}), "cluster node 1 (a): port must be 1..65535"));
  EXPECT_TRUE(invalid(cluster_config({{"a", 1}, {"b", 0}}), "cluster node 2 (b): port"));
}

TEST(config_cluster_validate, refuses_databases_other_than_zero) {
  auto cfg = cluster_config({{"a", 7000}});
  cfg.database = 1;
  EXPECT_TRUE(invalid(cfg, "Redis Cluster has only database 0"));
  cfg.database = -1;
  EXPECT_TRUE(invalid(cfg, "Redis Cluster has only database 0"));
}

TEST(config_cluster_validate, other_checks_still_apply) {
  auto cfg = cluster_config({{"a", 7000}});
  cfg.command_timeout = 0ms;
  EXPECT_TRUE(invalid(cfg, "timeout must be positive"));
}

TEST(config_cluster_validate, standalone_still_needs_host_and_port) {
  config cfg;
  cfg.host.clear();
  EXPECT_TRUE(invalid(cfg, "missing host"));
  cfg.host = "h";
  cfg.port = 0;
  EXPECT_TRUE(invalid(cfg, "port must be 1..65535"));
}

TEST(config_cluster_endpoint, defaults_and_equality) {
  endpoint e;
  e.host = "h";
  EXPECT_EQ(e.port, 6379);
  EXPECT_EQ(e, (endpoint{"h", 6379}));
  EXPECT_NE(e, (endpoint{"h", 6380}));
  EXPECT_NE(e, (endpoint{"g", 6379}));
}

}  // namespace
