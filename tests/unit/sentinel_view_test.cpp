// topology::sentinel_view step by step: discovery rounds over the sentinels, their answers, and
// +switch-master messages.
#include "topology/sentinel_view.hpp"

#include <gtest/gtest.h>

#include "dlock/error.hpp"

namespace {

using dlock::endpoint;
using dlock::errc;
using dlock::reply;
using dlock::topology::sentinel_view;

// SENTINEL MASTER's reply, the fields that matter among others.
reply master(std::string host, std::string port, std::string epoch = "0") {
  std::vector<reply> r;
  for (auto [k, v] : {std::pair<std::string, std::string>{"name", "mymaster"},
                      {"ip", std::move(host)},
                      {"port", std::move(port)},
                      {"flags", "master"},
                      {"config-epoch", std::move(epoch)},
                      {"num-slaves", "2"}}) {
    r.push_back(reply::make_bulk(k));
    r.push_back(reply::make_bulk(v));
  }
  return reply::make_array(std::move(r));
}

reply no_such_master() { return reply::make_error("ERR No such master with that name"); }

sentinel_view three() { return sentinel_view{{{"s1", 1}, {"s2", 2}, {"s3", 3}}, "mymaster"}; }

TEST(sentinel_view, the_first_sentinel_that_names_the_master_ends_the_round) {
  auto v = three();
  ASSERT_EQ(v.begin_round(), 0u);
  auto s = v.on_reply(0, errc::connection_refused, {});
  ASSERT_EQ(s.ask, 1u);
  s = v.on_reply(1, {}, master("10.0.0.9", "6380"));
  EXPECT_FALSE(s.ask);
  EXPECT_FALSE(s.failed);
  ASSERT_TRUE(s.found);
  EXPECT_EQ(s.found->at, (endpoint{"10.0.0.9", 6380}));
  EXPECT_FALSE(v.adopt(*s.found)) << "the first master found is no failover";
  EXPECT_EQ(v.begin_round(), 1u) << "the sentinel that answered is asked first next time";
}

TEST(sentinel_view, a_round_fails_with_the_last_error_when_no_sentinel_answers) {
  auto v = three();
  v.begin_round();
  EXPECT_EQ(v.on_reply(0, errc::connection_refused, {}).ask, 1u);
  EXPECT_EQ(v.on_reply(1, errc::connect_timeout, {}).ask, 2u);
  const auto s = v.on_reply(2, errc::auth_failed, {});
  EXPECT_FALSE(s.ask);
  EXPECT_FALSE(s.found);
  EXPECT_EQ(s.failed, errc::auth_failed);
}

TEST(sentinel_view, a_master_no_sentinel_knows_is_unknown_master) {
  auto v = three();
  v.begin_round();
  v.on_reply(0, errc::server_error, no_such_master());
  v.on_reply(1, errc::connection_refused, {});
  EXPECT_EQ(v.on_reply(2, errc::connection_refused, {}).failed, errc::unknown_master);
  // A new round starts clean, and wraps around from the preferred sentinel.
  auto w = three();
  w.begin_round();
  w.on_reply(0, errc::connection_refused, {});
  w.on_reply(1, {}, master("h", "7"));
  EXPECT_EQ(w.begin_round(), 1u);
  EXPECT_EQ(w.on_reply(1, errc::connection_refused, {}).ask, 2u);
  EXPECT_EQ(w.on_reply(2, errc::connection_refused, {}).ask, 0u);
  EXPECT_EQ(w.on_reply(0, errc::connection_refused, {}).failed, errc::connection_refused);
}

// A client that never saw the new epoch takes a lagging sentinel's word for the old master; when
// that master does not serve, the next round starts with another sentinel.
TEST(sentinel_view, a_doubted_master_has_the_next_sentinel_asked_first) {
  auto v = three();
  v.begin_round();
  v.adopt(*v.on_reply(0, {}, master("old", "1", "4")).found);
  EXPECT_EQ(v.begin_round(true), 1u);
  const auto s = v.on_reply(1, {}, master("new", "2", "5"));
  ASSERT_TRUE(s.found);
  EXPECT_TRUE(v.adopt(*s.found));
  EXPECT_EQ(v.begin_round(), 1u) << "then the one that answered, as before";
  EXPECT_EQ(v.begin_round(true), 2u);
  EXPECT_EQ(v.begin_round(true), 0u) << "round and round";
}

TEST(sentinel_view, malformed_answers_are_not_masters) {
  EXPECT_FALSE(sentinel_view::parse_master(reply::make_nil()));
  EXPECT_FALSE(sentinel_view::parse_master(master("", "6379")));
  EXPECT_FALSE(sentinel_view::parse_master(master("h", "0")));
  EXPECT_FALSE(sentinel_view::parse_master(master("h", "65536")));
  EXPECT_FALSE(sentinel_view::parse_master(master("h", "63x")));
  EXPECT_FALSE(sentinel_view::parse_master(master("h", "1", "")));
  EXPECT_FALSE(sentinel_view::parse_master(master("h", "1", "-1")));
  EXPECT_FALSE(sentinel_view::parse_master(reply::make_array({reply::make_bulk("ip")})));
  const auto m = sentinel_view::parse_master(master("h", "6380", "7"));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->at, (endpoint{"h", 6380}));
  EXPECT_EQ(m->epoch, 7u);
  auto v = sentinel_view{{{"s1", 1}}, "m"};
  v.begin_round();
  EXPECT_EQ(v.on_reply(0, {}, reply::make_simple("OK")).failed, errc::protocol_error);
}

TEST(sentinel_view, adopting_another_master_is_a_failover) {
  auto v = three();
  EXPECT_FALSE(v.adopt({{"a", 1}, 1}));
  EXPECT_FALSE(v.adopt({{"a", 1}, 1}));
  EXPECT_TRUE(v.adopt({{"b", 1}, 2}));
  EXPECT_TRUE(v.adopt({{"b", 2}, 2}));
  EXPECT_EQ(v.master(), (endpoint{"b", 2}));
}

// A sentinel that has not yet heard of a failover names the old master with the old epoch: the
// client must not go back there (after a graceful failover it is still a writable master).
TEST(sentinel_view, an_older_epoch_never_sends_the_client_back) {
  auto v = three();
  v.adopt({{"old", 1}, 4});
  EXPECT_FALSE(v.adopt({{"older", 1}, 3}));
  EXPECT_EQ(v.master(), (endpoint{"old", 1}));
  // The switch message comes first; a lagging sentinel's round answer is then no answer.
  EXPECT_TRUE(v.adopt_switch({"new", 2}));
  EXPECT_FALSE(v.adopt_switch({"new", 2})) << "every sentinel that switched says so";
  EXPECT_EQ(v.begin_round(), 0u);
  auto s = v.on_reply(0, {}, master("old", "1", "4"));
  ASSERT_EQ(s.ask, 1u) << "stale: ask the next sentinel";
  s = v.on_reply(1, {}, master("new", "2", "5"));
  ASSERT_TRUE(s.found);
  EXPECT_FALSE(v.adopt(*s.found)) << "the master already followed";
  EXPECT_FALSE(v.adopt({{"old", 1}, 4}));
  EXPECT_EQ(v.master(), (endpoint{"new", 2}));
  // Only stale answers: the round ends with no master found and no error.
  v.begin_round();
  v.on_reply(1, {}, master("old", "1", "4"));
  v.on_reply(2, {}, master("old", "1", "4"));
  s = v.on_reply(0, {}, master("old", "1", "4"));
  EXPECT_FALSE(s.found);
  EXPECT_FALSE(s.failed);
}

TEST(sentinel_view, switch_master_messages_of_this_master_only) {
  const auto v = three();
  EXPECT_EQ(v.switched("mymaster 127.0.0.1 6379 127.0.0.1 6380"), (endpoint{"127.0.0.1", 6380}));
  EXPECT_FALSE(v.switched("other 127.0.0.1 6379 127.0.0.1 6380"));
  EXPECT_FALSE(v.switched("mymaster2 127.0.0.1 6379 127.0.0.1 6380"));
  EXPECT_FALSE(v.switched("mymaster 127.0.0.1 6379 127.0.0.1"));
  EXPECT_FALSE(v.switched("mymaster 127.0.0.1 6379 127.0.0.1 0"));
  EXPECT_FALSE(v.switched("mymaster 127.0.0.1 6379 127.0.0.1 6380 extra"));
  EXPECT_FALSE(v.switched(""));
}

}  // namespace
