// transport::subscriptions, pub/sub bookkeeping without sockets: resubscribing after a
// reconnect, error replies, PONG, replies that make no sense, deadlines and disconnects.
// (Fixture: subscriptions_fixture.hpp.)
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "dlock/error.hpp"
#include "dlock/reply.hpp"
#include "subscriptions_fixture.hpp"
#include "transport/subscriptions.hpp"

using namespace dlock::test::subscriptions_fixture;

namespace {

TEST_F(subscriptions_test, reconnect_resubscribes_everything_in_one_command_per_kind) {
  add(1, "a");
  add(2, "b");
  add(3, "b");
  add_pattern(4, "p*");
  subscribe(kind::channel, {"a", "b"});
  subscribe(kind::pattern, {"p*"});
  subs_.on_reply(confirmation("subscribe", "a", 1));
  subs_.on_reply(confirmation("subscribe", "b", 2));
  subs_.on_reply(confirmation("psubscribe", "p*", 3));
  events_.clear();

  subs_.on_disconnect();
  EXPECT_FALSE(subs_.awaiting());
  EXPECT_FALSE(subs_.confirmed(kind::channel, "a"));
  EXPECT_FALSE(subs_.confirmed(kind::pattern, "p*"));

  std::string out;
  subs_.resubscribe_all(out, deadline_);
  EXPECT_EQ(out,
            "*3\r\n$9\r\nSUBSCRIBE\r\n$1\r\na\r\n$1\r\nb\r\n"
            "*2\r\n$10\r\nPSUBSCRIBE\r\n$2\r\np*\r\n")
      << "one command per kind";
  EXPECT_TRUE(subs_.awaiting());
  EXPECT_TRUE(events_.empty());

  EXPECT_TRUE(subs_.on_reply(confirmation("subscribe", "a", 1)));
  EXPECT_TRUE(subs_.on_reply(confirmation("subscribe", "b", 2)));
  EXPECT_TRUE(subs_.on_reply(confirmation("psubscribe", "p*", 3)));
  EXPECT_FALSE(subs_.awaiting());
  EXPECT_EQ(ids(), (std::vector<listener_id>{1, 2, 3, 4}));
  for (const auto& e : events_) EXPECT_EQ(e.what, type::resubscribed);
  EXPECT_EQ(events_[3].pattern, "p*");

  // Every reconnect marks the listeners again.
  events_.clear();
  subs_.on_disconnect();
  out.clear();
  subs_.resubscribe_all(out, deadline_);
  subs_.on_reply(confirmation("subscribe", "a", 1));
  ASSERT_FALSE(events_.empty());
  EXPECT_EQ(events_[0].what, type::resubscribed);
}

TEST_F(subscriptions_test, resubscribe_with_nothing_subscribed_writes_nothing) {
  std::string out;
  subs_.resubscribe_all(out, deadline_);
  EXPECT_EQ(out, "");
  EXPECT_FALSE(subs_.awaiting());
}

TEST_F(subscriptions_test, resubscribe_only_patterns) {
  add_pattern(1, "x*");
  std::string out;
  subs_.resubscribe_all(out, deadline_);
  EXPECT_EQ(out, "*2\r\n$10\r\nPSUBSCRIBE\r\n$2\r\nx*\r\n");
}

TEST_F(subscriptions_test, error_reply_to_subscribe_fails_its_listeners) {
  add(1, "secret");
  add(2, "secret");
  add(3, "open");
  subscribe(kind::channel, {"secret"});
  EXPECT_TRUE(subs_.on_reply(reply::make_error(
      "NOPERM this user has no permissions to access one of the channels used as arguments")));
  EXPECT_FALSE(subs_.awaiting());
  EXPECT_FALSE(subs_.confirmed(kind::channel, "secret"));
  ASSERT_EQ(events_.size(), 2u);
  EXPECT_EQ(ids(), (std::vector<listener_id>{1, 2}));
  for (const auto& e : events_) {
    EXPECT_EQ(e.what, type::failed);
    EXPECT_EQ(e.ec, errc::no_permission);
    EXPECT_EQ(e.channel, "secret");
  }
}

// Redis refuses a whole SUBSCRIBE when one of its channels is not permitted: the refused
// resubscription is sent again channel by channel, and the refused one fails alone.
TEST_F(subscriptions_test, a_refused_channel_does_not_fail_the_others_at_a_resubscription) {
  add(1, "open");
  add(2, "secret");
  std::string out;
  subs_.resubscribe_all(out, deadline_);
  EXPECT_TRUE(subs_.on_reply(reply::make_error("NOPERM no")));
  EXPECT_TRUE(events_.empty());
  EXPECT_TRUE(subs_.split_refused(out, deadline_));
  EXPECT_TRUE(subs_.on_reply(confirmation("subscribe", "open", 1)));
  EXPECT_TRUE(subs_.on_reply(reply::make_error("NOPERM no")));
  EXPECT_FALSE(subs_.awaiting());
  EXPECT_TRUE(subs_.confirmed(kind::channel, "open"));
  ASSERT_EQ(events_.size(), 2u);
  EXPECT_EQ(events_[0].what, type::subscribed);
  EXPECT_EQ(events_[1].what, type::failed);
  EXPECT_EQ(events_[1].channel, "secret");
}

TEST_F(subscriptions_test, error_reply_to_psubscribe_names_the_pattern) {
  add_pattern(1, "p*");
  subscribe(kind::pattern, {"p*"});
  EXPECT_TRUE(subs_.on_reply(reply::make_error("NOPERM no")));
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_EQ(events_[0].what, type::failed);
  EXPECT_EQ(events_[0].pattern, "p*");
  EXPECT_EQ(events_[0].channel, "");
}

TEST_F(subscriptions_test, error_reply_to_unsubscribe_or_ping_notifies_nobody) {
  add(1, "ch");
  std::string out;
  subs_.unsubscribe_command(out, kind::channel, {"ch"}, deadline_);
  subs_.ping_command(out, deadline_);
  EXPECT_TRUE(subs_.on_reply(reply::make_error("ERR x")));
  EXPECT_TRUE(subs_.awaiting());
  EXPECT_TRUE(subs_.on_reply(reply::make_error("ERR y")));
  EXPECT_FALSE(subs_.awaiting());
  EXPECT_TRUE(events_.empty());
}

TEST_F(subscriptions_test, error_reply_with_nothing_pending_is_refused) {
  EXPECT_FALSE(subs_.on_reply(reply::make_error("ERR x")));
}

TEST_F(subscriptions_test, pong_in_subscribed_mode) {
  std::string out;
  subs_.ping_command(out, deadline_);
  EXPECT_TRUE(subs_.awaiting());
  EXPECT_TRUE(subs_.on_reply(reply::make_array({bulk("pong"), bulk("")})));
  EXPECT_FALSE(subs_.awaiting());
}

TEST_F(subscriptions_test, pong_outside_subscribed_mode) {
  // With no channel subscribed the server answers PING with a plain +PONG.
  std::string out;
  subs_.ping_command(out, deadline_);
  EXPECT_TRUE(subs_.on_reply(reply::make_simple("PONG")));
  EXPECT_FALSE(subs_.awaiting());
}

TEST_F(subscriptions_test, pong_without_ping_is_refused) {
  EXPECT_FALSE(subs_.on_reply(reply::make_array({bulk("pong"), bulk("")})));
  EXPECT_FALSE(subs_.on_reply(reply::make_simple("PONG")));
  add(1, "ch");
  subscribe(kind::channel, {"ch"});
  EXPECT_FALSE(subs_.on_reply(reply::make_array({bulk("pong"), bulk("")})));
}

TEST_F(subscriptions_test, replies_that_make_no_sense_are_refused) {
  add(1, "ch");
  // Confirmation with nothing pending.
  EXPECT_FALSE(subs_.on_reply(confirmation("subscribe", "ch", 1)));
  EXPECT_FALSE(subs_.on_reply(confirmation("unsubscribe", "ch", 0)));
  subscribe(kind::channel, {"ch"});
  // Unknown type, wrong shapes, non-arrays.
  EXPECT_FALSE(subs_.on_reply(confirmation("wat", "ch", 1)));
  EXPECT_FALSE(subs_.on_reply(reply::make_array({})));
  EXPECT_FALSE(subs_.on_reply(reply::make_array({reply::make_integer(1), bulk("ch"), bulk("x")})));
  EXPECT_FALSE(subs_.on_reply(reply::make_array({bulk("message"), bulk("ch")})));
  EXPECT_FALSE(subs_.on_reply(reply::make_array({bulk("subscribe"), bulk("ch")})));
  EXPECT_FALSE(subs_.on_reply(reply::make_simple("OK")));
  EXPECT_FALSE(subs_.on_reply(reply::make_integer(1)));
  EXPECT_FALSE(subs_.on_reply(reply::make_nil()));
  EXPECT_FALSE(subs_.on_reply(bulk("message")));
  // None of it disturbed the pending SUBSCRIBE.
  EXPECT_TRUE(subs_.awaiting());
  EXPECT_TRUE(events_.empty());
  EXPECT_TRUE(subs_.on_reply(confirmation("subscribe", "ch", 1)));
}

TEST_F(subscriptions_test, confirmation_for_a_channel_nobody_listens_to_any_more) {
  add(1, "ch");
  subscribe(kind::channel, {"ch"});
  subs_.remove(1);
  EXPECT_TRUE(subs_.on_reply(confirmation("subscribe", "ch", 1)));
  EXPECT_FALSE(subs_.awaiting());
  EXPECT_TRUE(events_.empty());
}

TEST_F(subscriptions_test, overdue_after_the_oldest_deadline) {
  EXPECT_FALSE(subs_.overdue(t0_ + 1h));  // nothing pending
  add(1, "ch");
  subscribe(kind::channel, {"ch"});
  EXPECT_FALSE(subs_.overdue(t0_));
  EXPECT_FALSE(subs_.overdue(deadline_ - 1ms));
  EXPECT_TRUE(subs_.overdue(deadline_));
  EXPECT_TRUE(subs_.overdue(deadline_ + 1s));
  subs_.on_reply(confirmation("subscribe", "ch", 1));
  EXPECT_FALSE(subs_.overdue(deadline_ + 1s));
}

TEST_F(subscriptions_test, disconnect_voids_pending_commands) {
  add(1, "ch");
  subscribe(kind::channel, {"ch"});
  subs_.on_disconnect();
  EXPECT_FALSE(subs_.awaiting());
  EXPECT_FALSE(subs_.overdue(deadline_ + 1s));
  EXPECT_FALSE(subs_.on_reply(confirmation("subscribe", "ch", 1)));
}

TEST_F(subscriptions_test, first_connect_says_subscribed_and_only_a_reconnect_says_resubscribed) {
  add(1, "early");  // added before any connection
  std::string out;
  subs_.resubscribe_all(out, deadline_);
  subs_.on_reply(confirmation("subscribe", "early", 1));
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_EQ(events_[0].what, type::subscribed);

  subs_.on_disconnect();
  add(2, "late");  // added while the link is down: nothing to have missed yet
  events_.clear();
  out.clear();
  subs_.resubscribe_all(out, deadline_);
  subs_.on_reply(confirmation("subscribe", "early", 1));
  subs_.on_reply(confirmation("subscribe", "late", 2));
  ASSERT_EQ(events_.size(), 2u);
  EXPECT_EQ(events_[0].what, type::resubscribed);
  EXPECT_EQ(events_[1].what, type::subscribed);
}

}  // namespace
