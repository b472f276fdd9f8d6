// topology::slot_map and parse_redirect: CLUSTER SHARDS replies as Redis 7.0 sends them (RESP2),
// MOVED corrections, and the redirection errors' text; topology::redirects: what a request does
// with each cluster error, within its deadline.
#include "topology/slot_map.hpp"

#include <gtest/gtest.h>

#include "topology/redirects.hpp"

namespace {

using dlock::endpoint;
using dlock::reply;
using dlock::topology::parse_redirect;
using dlock::topology::redirects;
using dlock::topology::slot_map;

reply bulk(std::string s) { return reply::make_bulk(std::move(s)); }
reply num(std::int64_t v) { return reply::make_integer(v); }

reply node(std::string ip, std::int64_t port, std::string role, std::string health = "online",
           std::string ep = {}) {
  return reply::make_array({bulk("id"), bulk("0123abcd"), bulk("port"), num(port), bulk("ip"),
                            bulk(ip), bulk("endpoint"), bulk(ep.empty() ? ip : ep), bulk("role"),
                            bulk(std::move(role)), bulk("replication-offset"), num(42),
                            bulk("health"), bulk(std::move(health))});
}

reply shard(std::vector<std::int64_t> ranges, std::vector<reply> nodes) {
  std::vector<reply> slots;
  for (auto v : ranges) slots.push_back(num(v));
  return reply::make_array({bulk("slots"), reply::make_array(std::move(slots)), bulk("nodes"),
                            reply::make_array(std::move(nodes))});
}

// The seeds' cluster: three masters, each with one replica.
reply three_shards() {
  return reply::make_array(
      {shard({0, 5460}, {node("10.0.0.1", 7000, "master"), node("10.0.0.4", 7003, "replica")}),
       shard({5461, 10922}, {node("10.0.0.5", 7004, "replica"), node("10.0.0.2", 7001, "master")}),
       shard({10923, 16383},
             {node("10.0.0.3", 7002, "master"), node("10.0.0.6", 7005, "replica")})});
}

const endpoint asked{"10.0.0.1", 7000};

TEST(slot_map, reads_the_masters_of_every_range) {
  std::string why;
  auto m = slot_map::from_shards(three_shards(), asked, false, why);
  ASSERT_TRUE(m) << why;
  EXPECT_EQ(m->unserved(), 0u);
  EXPECT_EQ(*m->master(0), (endpoint{"10.0.0.1", 7000}));
  EXPECT_EQ(*m->master(5460), (endpoint{"10.0.0.1", 7000}));
  EXPECT_EQ(*m->master(5461), (endpoint{"10.0.0.2", 7001}));
  EXPECT_EQ(*m->master(16383), (endpoint{"10.0.0.3", 7002}));
  EXPECT_EQ(m->masters().size(), 3u);
  EXPECT_EQ(m->nodes().size(), 6u) << "replicas are named too (refresh candidates)";
}

TEST(slot_map, several_ranges_per_shard_and_unserved_slots) {
  std::string why;
  auto m = slot_map::from_shards(
      reply::make_array({shard({0, 9, 20, 29}, {node("h", 1, "master")})}), asked, false, why);
  ASSERT_TRUE(m) << why;
  EXPECT_NE(m->master(5), nullptr);
  EXPECT_EQ(m->master(15), nullptr);
  EXPECT_NE(m->master(29), nullptr);
  EXPECT_EQ(m->unserved(), 16384u - 20u);
}

TEST(slot_map, a_failed_master_or_a_shard_without_master_serves_nothing) {
  for (const char* health : {"fail", "failed"}) {  // Redis 7.0 sends `fail`; its docs say `failed`
    SCOPED_TRACE(health);
    std::string why;
    auto m = slot_map::from_shards(
        reply::make_array(
            {shard({0, 99}, {node("a", 1, "master", health), node("b", 2, "replica")}),
             shard({100, 199}, {node("c", 3, "replica")})}),
        asked, false, why);
    ASSERT_TRUE(m) << why;
    EXPECT_EQ(m->master(0), nullptr);
    EXPECT_EQ(m->master(150), nullptr);
    EXPECT_TRUE(m->masters().empty());
  }
}

TEST(slot_map, an_empty_endpoint_is_the_node_asked_and_an_unknown_one_is_skipped) {
  std::string why;
  auto m = slot_map::from_shards(
      reply::make_array({shard({0, 16383}, {node("", 7001, "master", "online", "")})}),
      endpoint{"127.0.0.1", 7001}, false, why);
  ASSERT_TRUE(m) << why;
  EXPECT_EQ(*m->master(7), (endpoint{"127.0.0.1", 7001}));
  auto unknown = slot_map::from_shards(
      reply::make_array({shard({0, 16383}, {node("10.1.1.1", 7001, "master", "online", "?")})}),
      asked, false, why);
  ASSERT_TRUE(unknown) << why;
  EXPECT_EQ(unknown->master(7), nullptr);
}

TEST(slot_map, tls_uses_the_tls_port) {
  auto n = reply::make_array({bulk("port"), num(0), bulk("tls-port"), num(7443), bulk("ip"),
                              bulk("h"), bulk("endpoint"), bulk("h"), bulk("role"), bulk("master"),
                              bulk("health"), bulk("online")});
  std::string why;
  auto m = slot_map::from_shards(reply::make_array({shard({0, 16383}, {n})}), asked, true, why);
  ASSERT_TRUE(m) << why;
  EXPECT_EQ(m->master(1)->port, 7443);
  auto plain =
      slot_map::from_shards(reply::make_array({shard({0, 16383}, {n})}), asked, false, why);
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->master(1), nullptr) << "port 0: no plain-text port";
}

TEST(slot_map, malformed_replies_are_refused_with_a_reason) {
  std::string why;
  EXPECT_FALSE(
      slot_map::from_shards(reply::make_error("ERR unknown subcommand"), asked, false, why));
  EXPECT_NE(why.find("not an array"), std::string::npos) << why;
  EXPECT_FALSE(slot_map::from_shards(reply::make_array({bulk("x")}), asked, false, why));
  EXPECT_FALSE(slot_map::from_shards(reply::make_array({shard({0}, {node("h", 1, "master")})}),
                                     asked, false, why));
  EXPECT_FALSE(slot_map::from_shards(reply::make_array({shard({10, 5}, {node("h", 1, "master")})}),
                                     asked, false, why));
  EXPECT_FALSE(slot_map::from_shards(
      reply::make_array({shard({0, 16384}, {node("h", 1, "master")})}), asked, false, why));
}

TEST(slot_map, moved_redirects_one_slot_only) {
  std::string why;
  auto m = slot_map::from_shards(three_shards(), asked, false, why);
  ASSERT_TRUE(m);
  m->moved(100, endpoint{"10.0.0.9", 7009});
  EXPECT_EQ(*m->master(100), (endpoint{"10.0.0.9", 7009}));
  EXPECT_EQ(*m->master(101), (endpoint{"10.0.0.1", 7000}));
  EXPECT_EQ(m->masters().size(), 4u);
  m->moved(16384, endpoint{"x", 1});  // out of range: ignored
  EXPECT_EQ(m->masters().size(), 4u);
}

TEST(slot_map, describes_every_node_shard_by_shard_in_slot_order) {
  using dlock::node_role;
  using dlock::slot_range;
  std::string why;
  auto m = slot_map::from_shards(three_shards(), asked, false, why);
  ASSERT_TRUE(m) << why;
  const auto nodes = m->describe();
  ASSERT_EQ(nodes.size(), 6u);
  const std::vector<std::pair<std::uint16_t, node_role>> expected = {
      {7000, node_role::master},  {7003, node_role::replica}, {7001, node_role::master},
      {7004, node_role::replica}, {7002, node_role::master},  {7005, node_role::replica}};
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    EXPECT_EQ(nodes[i].address.port, expected[i].first) << i;
    EXPECT_EQ(nodes[i].role, expected[i].second) << i;
  }
  EXPECT_EQ(nodes[2].slots, (std::vector<slot_range>{{5461, 10922}}));
  EXPECT_TRUE(nodes[3].slots.empty());
  EXPECT_EQ(nodes[3].replica_of, (endpoint{"10.0.0.2", 7001})) << "its shard's master";
  EXPECT_FALSE(nodes[0].replica_of);

  // A MOVED slot leaves a hole in its old master's ranges and makes its new one (a former
  // replica here) a master serving it.
  m->moved(100, endpoint{"10.0.0.4", 7003});
  const auto after = m->describe();
  EXPECT_EQ(after[0].address.port, 7000);
  EXPECT_EQ(after[0].slots, (std::vector<slot_range>{{0, 99}, {101, 5460}}));
  EXPECT_EQ(after[1].address.port, 7003);
  EXPECT_EQ(after[1].role, node_role::master);
  EXPECT_EQ(after[1].slots, (std::vector<slot_range>{{100, 100}}));
}

TEST(slot_map, describes_a_failed_master_as_a_master_serving_nothing) {
  std::string why;
  auto m = slot_map::from_shards(
      reply::make_array(
          {shard({0, 99}, {node("b", 2, "replica"), node("a", 1, "master", "failed")}),
           shard({100, 16383}, {node("c", 3, "master")})}),
      asked, false, why);
  ASSERT_TRUE(m) << why;
  const auto nodes = m->describe();
  ASSERT_EQ(nodes.size(), 3u);
  EXPECT_EQ(nodes[0].address.host, "c") << "the shard serving slots comes first";
  EXPECT_EQ(nodes[1].address.host, "a");
  EXPECT_EQ(nodes[1].role, dlock::node_role::master);
  EXPECT_TRUE(nodes[1].slots.empty());
  EXPECT_EQ(nodes[2].address.host, "b");
  EXPECT_EQ(nodes[2].replica_of, (endpoint{"a", 1}));
}

TEST(parse_redirect, moved_and_ask_with_ipv4_ipv6_and_empty_hosts) {
  auto m = parse_redirect("MOVED 3999 127.0.0.1:6381");
  ASSERT_TRUE(m);
  EXPECT_FALSE(m->ask);
  EXPECT_EQ(m->slot, 3999);
  EXPECT_EQ(m->to, (endpoint{"127.0.0.1", 6381}));
  auto a = parse_redirect("ASK 0 ::1:7000");
  ASSERT_TRUE(a);
  EXPECT_TRUE(a->ask);
  EXPECT_EQ(a->to, (endpoint{"::1", 7000}));
  EXPECT_EQ(parse_redirect("ASK 1 [fd00::7]:7000")->to.host, "fd00::7");
  EXPECT_EQ(parse_redirect("MOVED 16383 :7001")->to, (endpoint{"", 7001}));
}

TEST(parse_redirect, other_errors_and_garbage_are_not_redirections) {
  for (const char* text : {"ERR x", "MOVED", "MOVED 1", "MOVED x h:1", "MOVED 16384 h:1",
                           "MOVED 1 h", "MOVED 1 h:0", "MOVED 1 h:70000", "ASK -1 h:1",
                           "TRYAGAIN Multiple keys request during rehashing of slot"}) {
    EXPECT_FALSE(parse_redirect(text)) << text;
  }
}

using clock_type = redirects::clock;
using kind = redirects::action::kind;
const clock_type::time_point at0{};

TEST(redirects, moved_updates_the_map_and_sends_at_once) {
  redirects r{at0 + std::chrono::seconds{1}};
  const auto a = r.on_error("MOVED 12 10.0.0.2:7001", asked, at0);
  EXPECT_EQ(a.what, kind::send);
  EXPECT_TRUE(a.moved);
  EXPECT_TRUE(a.refresh);
  EXPECT_EQ(a.slot, 12);
  EXPECT_EQ(a.to, (endpoint{"10.0.0.2", 7001}));
  EXPECT_EQ(a.delay, clock_type::duration::zero());
}

TEST(redirects, an_empty_host_is_the_node_that_answered) {
  redirects r{at0 + std::chrono::seconds{1}};
  EXPECT_EQ(r.on_error("ASK 12 :7001", asked, at0).to, (endpoint{"10.0.0.1", 7001}));
}

TEST(redirects, ask_sends_asking_to_the_node_named_and_leaves_the_map) {
  redirects r{at0 + std::chrono::seconds{1}};
  const auto a = r.on_error("ASK 12 10.0.0.2:7001", asked, at0);
  EXPECT_EQ(a.what, kind::send_asking);
  EXPECT_FALSE(a.moved);
  EXPECT_FALSE(a.refresh);
  EXPECT_EQ(a.to, (endpoint{"10.0.0.2", 7001}));
}

TEST(redirects, tryagain_backs_off_doubling_and_capped_without_a_refresh) {
  redirects r{at0 + std::chrono::hours{1}};
  std::vector<clock_type::duration> delays;
  for (int i = 0; i < 8; ++i) {
    const auto a =
        r.on_error("TRYAGAIN Multiple keys request during rehashing of slot", asked, at0);
    ASSERT_EQ(a.what, kind::send);
    EXPECT_FALSE(a.refresh);
    delays.push_back(a.delay);
  }
  EXPECT_EQ(delays.front(), redirects::first_backoff);
  EXPECT_EQ(delays[1], 2 * redirects::first_backoff);
  EXPECT_EQ(delays.back(), redirects::max_backoff);
  EXPECT_EQ(r.redirected(), 0) << "waits are bounded by the deadline, not counted";
}

TEST(redirects, clusterdown_backs_off_with_a_refresh_until_the_deadline) {
  const auto deadline = at0 + std::chrono::milliseconds{100};
  redirects r{deadline};
  auto now = at0;
  int sends = 0;
  for (;;) {
    const auto a = r.on_error("CLUSTERDOWN The cluster is down", asked, now);
    if (a.what == kind::deliver) break;
    EXPECT_TRUE(a.refresh);
    EXPECT_GT(a.delay, clock_type::duration::zero()) << "never a busy loop";
    now += a.delay;
    EXPECT_LT(now, deadline);
    ++sends;
  }
  EXPECT_EQ(sends, 3) << "10 + 20 + 40 ms fit in 100 ms; 80 more would not";
}

TEST(redirects, endless_redirections_are_delivered_after_the_limit) {
  redirects r{at0 + std::chrono::hours{1}};
  for (int i = 0; i < redirects::max_redirects; ++i) {
    EXPECT_EQ(r.on_error("MOVED 1 a:1", asked, at0).what, kind::send) << i;
  }
  EXPECT_EQ(r.on_error("MOVED 1 a:1", asked, at0).what, kind::deliver);
}

TEST(redirects, other_errors_are_delivered) {
  redirects r{at0 + std::chrono::hours{1}};
  EXPECT_EQ(r.on_error("ERR unknown command", asked, at0).what, kind::deliver);
  EXPECT_EQ(r.on_error("CROSSSLOT Keys in request don't hash to the same slot", asked, at0).what,
            kind::deliver);
}

}  // namespace
