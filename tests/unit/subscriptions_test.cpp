// transport::subscriptions: pub/sub bookkeeping of a subscriber connection, without sockets.
#include "transport/subscriptions.hpp"

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

namespace {

using namespace std::chrono_literals;
using dlock::errc;
using dlock::reply;
using dlock::transport::listener_id;
using dlock::transport::pubsub_event;
using dlock::transport::subscriptions;
using kind = subscriptions::kind;
using type = pubsub_event::type;

// An event with its views copied, so it can be inspected after the callback returned.
struct seen {
  listener_id id;
  type what;
  std::string channel;
  std::string pattern;
  std::string payload;
  std::error_code ec;
};

reply bulk(std::string s) { return reply::make_bulk(std::move(s)); }

// ["<what>", "<name>", count]
reply confirmation(std::string what, std::string name, std::int64_t count) {
  return reply::make_array(
      {bulk(std::move(what)), bulk(std::move(name)), reply::make_integer(count)});
}
reply message(std::string channel, std::string payload) {
  return reply::make_array({bulk("message"), bulk(std::move(channel)), bulk(std::move(payload))});
}
reply pmessage(std::string pattern, std::string channel, std::string payload) {
  return reply::make_array({bulk("pmessage"), bulk(std::move(pattern)), bulk(std::move(channel)),
                            bulk(std::move(payload))});
}

class subscriptions_test : public testing::Test {
 protected:
  dlock::transport::pubsub_listener record(listener_id id) {
    return [this, id](const pubsub_event& ev) {
      events_.push_back({id, ev.what, std::string(ev.channel), std::string(ev.pattern),
                         std::string(ev.payload), ev.ec});
    };
  }
  bool add(listener_id id, const std::string& channel) {
    return subs_.add(id, kind::channel, channel, record(id));
  }
  bool add_pattern(listener_id id, const std::string& pattern) {
    return subs_.add(id, kind::pattern, pattern, record(id));
  }
  std::string subscribe(kind k, std::vector<std::string> names) {
    std::string out;
    subs_.subscribe_command(out, k, names, deadline_);
    return out;
  }
  std::vector<listener_id> ids() const {
    std::vector<listener_id> out;
    for (const auto& e : events_) out.push_back(e.id);
    return out;
  }

  const dlock::transport::subscriptions::clock::time_point t0_ = subscriptions::clock::now();
  const subscriptions::clock::time_point deadline_ = t0_ + 3s;
  subscriptions subs_;
  std::vector<seen> events_;
};

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
            "*2\r\n$9\r\nSUBSCRIBE\r\n$1\r\na\r\n"
            "*2\r\n$9\r\nSUBSCRIBE\r\n$1\r\nb\r\n"
            "*2\r\n$10\r\nPSUBSCRIBE\r\n$2\r\np*\r\n")
      << "one command per topic";
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

// Redis refuses a whole SUBSCRIBE when one of its channels is not permitted: resubscribing
// channel by channel, a refused one fails alone.
TEST_F(subscriptions_test, a_refused_channel_does_not_fail_the_others_at_a_resubscription) {
  add(1, "open");
  add(2, "secret");
  std::string out;
  subs_.resubscribe_all(out, deadline_);
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

TEST_F(subscriptions_test, listener_removing_itself_in_its_callback) {
  add(1, "ch");
  auto* subs = &subs_;
  int calls = 0;
  std::string last_payload;
  subs_.add(2, kind::channel, "ch", [subs, &calls, &last_payload](const pubsub_event& ev) {
    ++calls;
    if (ev.what != type::message) return;
    subs->remove(2);
    last_payload = std::string(ev.payload);  // uses captures after removing itself
  });
  add(3, "ch");
  subscribe(kind::channel, {"ch"});
  subs_.on_reply(confirmation("subscribe", "ch", 1));
  EXPECT_TRUE(subs_.on_reply(message("ch", "m1")));
  EXPECT_TRUE(subs_.on_reply(message("ch", "m2")));
  EXPECT_EQ(calls, 2);  // subscribed + m1
  EXPECT_EQ(last_payload, "m1");
  EXPECT_EQ(subs_.listeners(), 2u);
  // Listeners 1 and 3 got everything.
  int msgs = 0;
  for (const auto& e : events_) msgs += e.what == type::message ? 1 : 0;
  EXPECT_EQ(msgs, 4);
}

TEST_F(subscriptions_test, last_listener_removing_itself_erases_the_topic) {
  auto* subs = &subs_;
  std::optional<std::pair<kind, std::string>> removed;
  std::string payload;
  subs_.add(1, kind::channel, "ch", [subs, &removed, &payload](const pubsub_event& ev) {
    if (ev.what != type::message) return;
    removed = subs->remove(1);
    payload = std::string(ev.payload) + "/" + std::string(ev.channel);
  });
  subscribe(kind::channel, {"ch"});
  subs_.on_reply(confirmation("subscribe", "ch", 1));
  EXPECT_TRUE(subs_.on_reply(message("ch", "bye")));
  ASSERT_TRUE(removed.has_value());
  EXPECT_EQ(removed->second, "ch");
  EXPECT_EQ(payload, "bye/ch");
  EXPECT_EQ(subs_.channels(), 0u);
  EXPECT_TRUE(subs_.on_reply(message("ch", "after")));
}

TEST_F(subscriptions_test, listener_removing_another_listeners_topic) {
  auto* subs = &subs_;
  subs_.add(1, kind::channel, "ch", [subs](const pubsub_event& ev) {
    if (ev.what == type::message) {
      subs->remove(1);
      subs->remove(2);  // the topic goes away while it is being notified
    }
  });
  add(2, "ch");
  subscribe(kind::channel, {"ch"});
  subs_.on_reply(confirmation("subscribe", "ch", 1));
  events_.clear();
  EXPECT_TRUE(subs_.on_reply(message("ch", "x")));
  EXPECT_TRUE(events_.empty());  // 2 was removed before its turn
  EXPECT_EQ(subs_.channels(), 0u);
}

TEST_F(subscriptions_test, listener_removing_itself_when_told_subscribed_on_add) {
  add(1, "ch");
  subscribe(kind::channel, {"ch"});
  subs_.on_reply(confirmation("subscribe", "ch", 1));
  auto* subs = &subs_;
  std::string name;
  subs_.add(2, kind::channel, "ch", [subs, &name](const pubsub_event& ev) {
    subs->remove(2);
    name = std::string(ev.channel);  // uses captures after removing itself
  });
  EXPECT_EQ(name, "ch");
  EXPECT_EQ(subs_.listeners(), 1u);
}

TEST_F(subscriptions_test, listener_removing_itself_when_failed) {
  auto* subs = &subs_;
  std::error_code got;
  subs_.add(1, kind::channel, "ch", [subs, &got](const pubsub_event& ev) {
    subs->remove(1);
    got = ev.ec;
  });
  subscribe(kind::channel, {"ch", "ch2"});
  EXPECT_TRUE(subs_.on_reply(reply::make_error("NOPERM no")));
  EXPECT_EQ(got, errc::no_permission);
  EXPECT_EQ(subs_.channels(), 0u);
}

TEST_F(subscriptions_test, listener_adding_a_listener_in_its_callback) {
  auto* subs = &subs_;
  bool added = false;
  subs_.add(1, kind::channel, "ch", [this, subs, &added](const pubsub_event& ev) {
    if (ev.what != type::message || added) return;
    added = true;
    subs->add(2, kind::channel, "ch", record(2));  // told `subscribed` at once
  });
  subscribe(kind::channel, {"ch"});
  subs_.on_reply(confirmation("subscribe", "ch", 1));
  EXPECT_TRUE(subs_.on_reply(message("ch", "x")));
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_EQ(events_[0].id, 2u);
  EXPECT_EQ(events_[0].what, type::subscribed);
  EXPECT_EQ(subs_.listeners(), 2u);
}

}  // namespace

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
