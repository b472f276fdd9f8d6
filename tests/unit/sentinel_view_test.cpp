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

reply address(std::string host, std::string port) {
  return reply::make_array({reply::make_bulk(std::move(host)), reply::make_bulk(std::move(port))});
}

sentinel_view three() { return sentinel_view{{{"s1", 1}, {"s2", 2}, {"s3", 3}}, "mymaster"}; }

TEST(sentinel_view, the_first_sentinel_that_names_the_master_ends_the_round) {
  auto v = three();
  ASSERT_EQ(v.begin_round(), 0u);
  auto s = v.on_reply(0, errc::connection_refused, {});
  ASSERT_EQ(s.ask, 1u);
  s = v.on_reply(1, {}, address("10.0.0.9", "6380"));
  EXPECT_FALSE(s.ask);
  EXPECT_FALSE(s.failed);
  ASSERT_TRUE(s.found);
  EXPECT_EQ(*s.found, (endpoint{"10.0.0.9", 6380}));
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
  v.on_reply(0, {}, reply::make_nil());
  v.on_reply(1, errc::connection_refused, {});
  EXPECT_EQ(v.on_reply(2, errc::connection_refused, {}).failed, errc::unknown_master);
  // A new round starts clean, and wraps around from the preferred sentinel.
  auto w = three();
  w.begin_round();
  w.on_reply(0, errc::connection_refused, {});
  w.on_reply(1, {}, address("h", "7"));
  EXPECT_EQ(w.begin_round(), 1u);
  EXPECT_EQ(w.on_reply(1, errc::connection_refused, {}).ask, 2u);
  EXPECT_EQ(w.on_reply(2, errc::connection_refused, {}).ask, 0u);
  EXPECT_EQ(w.on_reply(0, errc::connection_refused, {}).failed, errc::connection_refused);
}

TEST(sentinel_view, malformed_answers_are_not_addresses) {
  EXPECT_FALSE(sentinel_view::parse_address(reply::make_nil()));
  EXPECT_FALSE(sentinel_view::parse_address(address("", "6379")));
  EXPECT_FALSE(sentinel_view::parse_address(address("h", "0")));
  EXPECT_FALSE(sentinel_view::parse_address(address("h", "65536")));
  EXPECT_FALSE(sentinel_view::parse_address(address("h", "63x")));
  EXPECT_FALSE(sentinel_view::parse_address(reply::make_array({reply::make_bulk("h")})));
  EXPECT_FALSE(sentinel_view::parse_address(
      reply::make_array({reply::make_bulk("h"), reply::make_integer(6379)})));
  auto v = sentinel_view{{{"s1", 1}}, "m"};
  v.begin_round();
  EXPECT_EQ(v.on_reply(0, {}, reply::make_simple("OK")).failed, errc::protocol_error);
}

TEST(sentinel_view, adopting_another_master_is_a_failover) {
  auto v = three();
  EXPECT_FALSE(v.adopt({"a", 1}));
  EXPECT_FALSE(v.adopt({"a", 1}));
  EXPECT_TRUE(v.adopt({"b", 1}));
  EXPECT_TRUE(v.adopt({"b", 2}));
  EXPECT_EQ(v.master(), (endpoint{"b", 2}));
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
