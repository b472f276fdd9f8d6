// The subscriber connection against a real redis-server: many channels on one connection,
// dispatch, unsubscribe after the last listener, patterns, and resubscription with a
// "missed messages" notice after the connection is killed.
#include <gtest/gtest.h>

#include "dlock/client.hpp"
#include "runtime/client_access.hpp"
#include "runtime/client_impl.hpp"
#include "support/redis_server.hpp"
#include "test_util.hpp"

using namespace std::chrono_literals;
using dlock::transport::pubsub_event;

namespace {

using dlock::test::config_for;
using dlock::test::numsub;

struct seen {
  pubsub_event::type what;
  std::string channel, payload;
  std::error_code ec;
};

dlock::transport::pubsub_listener record_into(dlock::test::recorder<seen>& rec) {
  return [&rec](const pubsub_event& ev) {
    rec.push({ev.what, std::string(ev.channel), std::string(ev.payload), ev.ec});
  };
}

auto count_of(pubsub_event::type what, const std::string& channel = {},
              const std::string& payload = {}) {
  return [=](const std::vector<seen>& v) {
    return std::count_if(v.begin(), v.end(), [&](const seen& s) {
      return s.what == what && (channel.empty() || s.channel == channel) &&
             (payload.empty() || s.payload == payload);
    });
  };
}

TEST(subscriber, carries_many_channels_and_dispatches_to_their_listeners) {
  dlock::test::redis_server srv;
  dlock::client c{config_for(srv)};
  auto& sub = dlock::detail::client_access::impl(c).subscriber();
  constexpr int channels = 50;
  std::vector<dlock::test::recorder<seen>> recs(channels);
  std::vector<std::string> names;
  for (int i = 0; i < channels; ++i) {
    names.push_back(dlock::test::unique_name("ch"));
    sub.listen(names.back(), record_into(recs[static_cast<std::size_t>(i)]));
  }
  for (int i = 0; i < channels; ++i) {
    ASSERT_TRUE(recs[static_cast<std::size_t>(i)].wait_for(5s, [&](auto& v) {
      return count_of(pubsub_event::type::subscribed)(v) +
                 count_of(pubsub_event::type::resubscribed)(v) >=
             1;
    }));
  }
  for (int i = 0; i < channels; ++i)
    srv.command({"PUBLISH", names[static_cast<std::size_t>(i)], "m" + std::to_string(i)});
  for (int i = 0; i < channels; ++i) {
    auto& rec = recs[static_cast<std::size_t>(i)];
    ASSERT_TRUE(
        rec.wait_for(5s, [&](auto& v) { return count_of(pubsub_event::type::message)(v) == 1; }));
    auto items = rec.items();
    auto msg = std::find_if(items.begin(), items.end(),
                            [](auto& s) { return s.what == pubsub_event::type::message; });
    EXPECT_EQ(msg->channel, names[static_cast<std::size_t>(i)]);
    EXPECT_EQ(msg->payload, "m" + std::to_string(i));
  }
  EXPECT_EQ(dlock::detail::client_access::impl(c).subscriber().connects(), 1u);
}

TEST(subscriber, shares_a_channel_and_unsubscribes_after_the_last_listener) {
  dlock::test::redis_server srv;
  dlock::client c{config_for(srv)};
  auto& sub = dlock::detail::client_access::impl(c).subscriber();
  const auto ch = dlock::test::unique_name("ch");
  dlock::test::recorder<seen> a, b;
  auto ida = sub.listen(ch, record_into(a));
  auto idb = sub.listen(ch, record_into(b));
  ASSERT_TRUE(dlock::test::wait_until([&] { return numsub(srv, ch) == 1; }, 5s));
  ASSERT_TRUE(b.wait_for(5s, [](auto& v) { return !v.empty(); }));
  srv.command({"PUBLISH", ch, "0"});
  EXPECT_TRUE(a.wait_for(5s, count_of(pubsub_event::type::message, ch, "0")));
  EXPECT_TRUE(b.wait_for(5s, count_of(pubsub_event::type::message, ch, "0")));
  sub.unlisten(ida);
  // Still one listener: still subscribed.
  srv.command({"PUBLISH", ch, "1"});
  EXPECT_TRUE(b.wait_for(5s, count_of(pubsub_event::type::message, ch, "1")));
  EXPECT_EQ(numsub(srv, ch), 1);
  sub.unlisten(idb);
  EXPECT_TRUE(dlock::test::wait_until([&] { return numsub(srv, ch) == 0; }, 5s));
}

TEST(subscriber, a_batch_of_channels_is_one_subscribe_and_one_unsubscribe) {
  dlock::test::redis_server srv;
  dlock::client c{config_for(srv)};
  auto& sub = dlock::detail::client_access::impl(c).subscriber();
  dlock::test::recorder<seen> rec;
  std::vector<std::string> chs;
  dlock::transport::subscriber::listeners batch;
  for (int i = 0; i < 3; ++i) {
    chs.push_back(dlock::test::unique_name("batch"));
    batch.emplace_back(chs.back(), record_into(rec));
  }
  const auto ids = sub.listen(std::move(batch));
  ASSERT_EQ(ids.size(), 3u);
  ASSERT_TRUE(
      rec.wait_for(5s, [](auto& v) { return count_of(pubsub_event::type::subscribed)(v) == 3; }));
  const auto items = rec.items();
  for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(items[i].channel, chs[i]) << "in order";
  EXPECT_EQ(dlock::test::command_stat(srv, "subscribe"), 1);
  for (auto& ch : chs) srv.command({"PUBLISH", ch, "m"});
  EXPECT_TRUE(rec.wait_for(
      5s, [](auto& v) { return count_of(pubsub_event::type::message, {}, "m")(v) == 3; }));
  sub.unlisten(ids);
  for (auto& ch : chs) {
    EXPECT_TRUE(dlock::test::wait_until([&] { return numsub(srv, ch) == 0; }, 5s)) << ch;
  }
  EXPECT_EQ(dlock::test::command_stat(srv, "unsubscribe"), 1);
}

TEST(subscriber, pattern_listeners_receive_matching_channels) {
  dlock::test::redis_server srv;
  dlock::client c{config_for(srv)};
  const auto prefix = dlock::test::unique_name("pat");
  dlock::test::recorder<seen> rec;
  dlock::detail::client_access::impl(c).subscriber().listen_pattern(prefix + ":*",
                                                                    record_into(rec));
  ASSERT_TRUE(rec.wait_for(5s, [](auto& v) { return !v.empty(); }));
  srv.command({"PUBLISH", prefix + ":a", "x"});
  srv.command({"PUBLISH", "other", "y"});
  EXPECT_TRUE(rec.wait_for(5s, count_of(pubsub_event::type::message, prefix + ":a", "x")));
  EXPECT_EQ(count_of(pubsub_event::type::message)(rec.items()), 1);
}

TEST(subscriber, resubscribes_after_client_kill_and_tells_listeners) {
  dlock::test::redis_server srv;
  dlock::client c{config_for(srv)};
  auto& sub = dlock::detail::client_access::impl(c).subscriber();
  const auto ch1 = dlock::test::unique_name("ch"), ch2 = dlock::test::unique_name("ch");
  dlock::test::recorder<seen> r1, r2;
  sub.listen(ch1, record_into(r1));
  sub.listen(ch2, record_into(r2));
  ASSERT_TRUE(
      dlock::test::wait_until([&] { return numsub(srv, ch1) == 1 && numsub(srv, ch2) == 1; }, 5s));
  const auto before = sub.connects();
  for (int round = 1; round <= 3; ++round) {
    srv.command({"CLIENT", "KILL", "TYPE", "pubsub"});
    // Each listener learns it may have missed messages, once per reconnect.
    ASSERT_TRUE(r1.wait_for(
        5s, [&](auto& v) { return count_of(pubsub_event::type::resubscribed, ch1)(v) >= round; }));
    ASSERT_TRUE(r2.wait_for(
        5s, [&](auto& v) { return count_of(pubsub_event::type::resubscribed, ch2)(v) >= round; }));
    const auto payload = "after-" + std::to_string(round);
    srv.command({"PUBLISH", ch1, payload});
    srv.command({"PUBLISH", ch2, payload});
    EXPECT_TRUE(r1.wait_for(5s, count_of(pubsub_event::type::message, ch1, payload)));
    EXPECT_TRUE(r2.wait_for(5s, count_of(pubsub_event::type::message, ch2, payload)));
  }
  EXPECT_GE(sub.connects(), before + 3);
}

TEST(subscriber, resubscribes_after_server_restart) {
  dlock::test::redis_server srv;
  dlock::client c{config_for(srv)};
  const auto ch = dlock::test::unique_name("ch");
  dlock::test::recorder<seen> rec;
  dlock::detail::client_access::impl(c).subscriber().listen(ch, record_into(rec));
  ASSERT_TRUE(dlock::test::wait_until([&] { return numsub(srv, ch) == 1; }, 5s));
  srv.restart();
  ASSERT_TRUE(rec.wait_for(10s, count_of(pubsub_event::type::resubscribed, ch)));
  srv.command({"PUBLISH", ch, "back"});
  EXPECT_TRUE(rec.wait_for(5s, count_of(pubsub_event::type::message, ch, "back")));
}

}  // namespace
