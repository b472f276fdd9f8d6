// transport::subscriptions, pub/sub bookkeeping without sockets: listeners that remove
// themselves, or others, or add listeners from their own callbacks. (Fixture:
// subscriptions_fixture.hpp.)
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
  subscribe(kind::channel, {"ch"});
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
