// transport::subscriptions, pub/sub bookkeeping without sockets: listeners and the topics they
// share, the SUBSCRIBE commands, confirmations, messages and pattern messages, unsubscribing.
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

TEST_F(subscriptions_test, first_listener_needs_subscribe_second_does_not) {
  EXPECT_TRUE(add(1, "ch"));
  EXPECT_FALSE(add(2, "ch"));
  EXPECT_TRUE(add(3, "other"));
  EXPECT_TRUE(add_pattern(4, "ch"));  // a pattern is another topic than a channel of that name
  EXPECT_EQ(subs_.channels(), 3u);
  EXPECT_EQ(subs_.listeners(), 4u);
  EXPECT_TRUE(events_.empty());
}

TEST_F(subscriptions_test, removing_the_last_listener_returns_the_channel) {
  add(1, "ch");
  add(2, "ch");
  EXPECT_FALSE(subs_.remove(1).has_value());
  const auto last = subs_.remove(2);
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->first, kind::channel);
  EXPECT_EQ(last->second, "ch");
  EXPECT_EQ(subs_.channels(), 0u);
  EXPECT_EQ(subs_.listeners(), 0u);
  EXPECT_FALSE(subs_.remove(2).has_value());   // already gone
  EXPECT_FALSE(subs_.remove(99).has_value());  // never existed
}

TEST_F(subscriptions_test, removing_the_last_pattern_listener_returns_the_pattern) {
  add_pattern(1, "lock:*");
  const auto last = subs_.remove(1);
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->first, kind::pattern);
  EXPECT_EQ(last->second, "lock:*");
}

TEST_F(subscriptions_test, command_bytes) {
  EXPECT_EQ(subscribe(kind::channel, {"ch"}), "*2\r\n$9\r\nSUBSCRIBE\r\n$2\r\nch\r\n");
  EXPECT_EQ(subscribe(kind::pattern, {"p*", "q"}),
            "*3\r\n$10\r\nPSUBSCRIBE\r\n$2\r\np*\r\n$1\r\nq\r\n");
  std::string out;
  subs_.unsubscribe_command(out, kind::channel, {"ch"}, deadline_);
  EXPECT_EQ(out, "*2\r\n$11\r\nUNSUBSCRIBE\r\n$2\r\nch\r\n");
  out.clear();
  subs_.unsubscribe_command(out, kind::pattern, {"p*"}, deadline_);
  EXPECT_EQ(out, "*2\r\n$12\r\nPUNSUBSCRIBE\r\n$2\r\np*\r\n");
  out = "x";
  subs_.ping_command(out, deadline_);
  EXPECT_EQ(out, "x*1\r\n$4\r\nPING\r\n");
  EXPECT_TRUE(subs_.awaiting());
}

TEST_F(subscriptions_test, confirmation_notifies_subscribed) {
  add(1, "ch");
  add(2, "ch");
  subscribe(kind::channel, {"ch"});
  EXPECT_TRUE(subs_.awaiting());
  EXPECT_FALSE(subs_.confirmed(kind::channel, "ch"));
  EXPECT_TRUE(subs_.on_reply(confirmation("subscribe", "ch", 1)));
  EXPECT_TRUE(subs_.confirmed(kind::channel, "ch"));
  EXPECT_FALSE(subs_.awaiting());
  ASSERT_EQ(events_.size(), 2u);
  EXPECT_EQ(ids(), (std::vector<listener_id>{1, 2}));
  for (const auto& e : events_) {
    EXPECT_EQ(e.what, type::subscribed);
    EXPECT_EQ(e.channel, "ch");
    EXPECT_EQ(e.pattern, "");
    EXPECT_FALSE(e.ec);
  }
}

TEST_F(subscriptions_test, one_command_for_several_channels_needs_every_confirmation) {
  add(1, "a");
  add(2, "b");
  subscribe(kind::channel, {"a", "b"});
  EXPECT_TRUE(subs_.on_reply(confirmation("subscribe", "a", 1)));
  EXPECT_TRUE(subs_.awaiting());
  EXPECT_TRUE(subs_.on_reply(confirmation("subscribe", "b", 2)));
  EXPECT_FALSE(subs_.awaiting());
  EXPECT_EQ(ids(), (std::vector<listener_id>{1, 2}));
  EXPECT_TRUE(subs_.confirmed(kind::channel, "a"));
  EXPECT_TRUE(subs_.confirmed(kind::channel, "b"));
}

TEST_F(subscriptions_test, listener_added_after_confirmation_is_told_at_once) {
  add(1, "ch");
  subscribe(kind::channel, {"ch"});
  subs_.on_reply(confirmation("subscribe", "ch", 1));
  events_.clear();
  EXPECT_FALSE(add(2, "ch"));
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_EQ(events_[0].id, 2u);
  EXPECT_EQ(events_[0].what, type::subscribed);
  EXPECT_EQ(events_[0].channel, "ch");
}

TEST_F(subscriptions_test, listener_added_before_confirmation_waits_for_it) {
  add(1, "ch");
  subscribe(kind::channel, {"ch"});
  EXPECT_FALSE(add(2, "ch"));
  EXPECT_TRUE(events_.empty());
  subs_.on_reply(confirmation("subscribe", "ch", 1));
  EXPECT_EQ(ids(), (std::vector<listener_id>{1, 2}));
}

TEST_F(subscriptions_test, message_reaches_every_listener_of_its_channel_only) {
  add(1, "ch");
  add(2, "ch");
  add(3, "other");
  subscribe(kind::channel, {"ch", "other"});
  subs_.on_reply(confirmation("subscribe", "ch", 1));
  subs_.on_reply(confirmation("subscribe", "other", 2));
  events_.clear();

  EXPECT_TRUE(subs_.on_reply(message("ch", "0")));
  ASSERT_EQ(events_.size(), 2u);
  EXPECT_EQ(ids(), (std::vector<listener_id>{1, 2}));
  for (const auto& e : events_) {
    EXPECT_EQ(e.what, type::message);
    EXPECT_EQ(e.channel, "ch");
    EXPECT_EQ(e.pattern, "");
    EXPECT_EQ(e.payload, "0");
  }
}

TEST_F(subscriptions_test, message_for_an_unknown_channel_is_ignored) {
  add(1, "ch");
  EXPECT_TRUE(subs_.on_reply(message("gone", "x")));  // e.g. unsubscribed meanwhile
  EXPECT_TRUE(events_.empty());
}

TEST_F(subscriptions_test, pattern_subscription_and_pmessage) {
  EXPECT_TRUE(add_pattern(1, "p*"));
  add(2, "pa");  // a channel listener is not a pattern listener
  EXPECT_EQ(subscribe(kind::pattern, {"p*"}), "*2\r\n$10\r\nPSUBSCRIBE\r\n$2\r\np*\r\n");
  EXPECT_TRUE(subs_.on_reply(confirmation("psubscribe", "p*", 1)));
  EXPECT_TRUE(subs_.confirmed(kind::pattern, "p*"));
  EXPECT_FALSE(subs_.confirmed(kind::channel, "p*"));
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_EQ(events_[0].what, type::subscribed);
  EXPECT_EQ(events_[0].pattern, "p*");
  EXPECT_EQ(events_[0].channel, "");
  events_.clear();

  EXPECT_TRUE(subs_.on_reply(pmessage("p*", "pa", "x")));
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_EQ(events_[0].id, 1u);
  EXPECT_EQ(events_[0].what, type::message);
  EXPECT_EQ(events_[0].pattern, "p*");
  EXPECT_EQ(events_[0].channel, "pa");
  EXPECT_EQ(events_[0].payload, "x");
}

TEST_F(subscriptions_test, confirmation_of_the_wrong_kind_is_refused) {
  add(1, "ch");
  subscribe(kind::channel, {"ch"});
  EXPECT_FALSE(subs_.on_reply(confirmation("psubscribe", "ch", 1)));
  EXPECT_FALSE(subs_.on_reply(confirmation("unsubscribe", "ch", 0)));
  EXPECT_TRUE(events_.empty());
}

TEST_F(subscriptions_test, unsubscribe_confirmation) {
  add(1, "ch");
  subscribe(kind::channel, {"ch"});
  subs_.on_reply(confirmation("subscribe", "ch", 1));
  const auto last = subs_.remove(1);
  ASSERT_TRUE(last.has_value());
  std::string out;
  subs_.unsubscribe_command(out, last->first, {last->second}, deadline_);
  EXPECT_TRUE(subs_.on_reply(confirmation("unsubscribe", "ch", 0)));
  EXPECT_FALSE(subs_.awaiting());
}

TEST_F(subscriptions_test, resubscribed_after_an_unsubscribe_race) {
  // The last listener leaves (UNSUBSCRIBE sent), a new one arrives (SUBSCRIBE sent) before the
  // UNSUBSCRIBE is confirmed: only the second confirmation makes the channel subscribed.
  add(1, "ch");
  subscribe(kind::channel, {"ch"});
  subs_.on_reply(confirmation("subscribe", "ch", 1));
  ASSERT_TRUE(subs_.remove(1).has_value());
  std::string out;
  subs_.unsubscribe_command(out, kind::channel, {"ch"}, deadline_);
  EXPECT_TRUE(add(2, "ch"));
  subscribe(kind::channel, {"ch"});
  events_.clear();
  EXPECT_TRUE(subs_.on_reply(confirmation("unsubscribe", "ch", 0)));
  EXPECT_FALSE(subs_.confirmed(kind::channel, "ch"));
  EXPECT_TRUE(events_.empty());
  EXPECT_TRUE(subs_.on_reply(confirmation("subscribe", "ch", 1)));
  EXPECT_TRUE(subs_.confirmed(kind::channel, "ch"));
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_EQ(events_[0].id, 2u);
  EXPECT_EQ(events_[0].what, type::subscribed);
}

}  // namespace
