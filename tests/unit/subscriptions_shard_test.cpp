// transport::subscriptions: Redis Cluster shard channels (SSUBSCRIBE, smessage, a node's
// unsolicited sunsubscribe when its slot moves) and a multi-channel SUBSCRIBE refused as a whole,
// sent again channel by channel. (Fixture: subscriptions_fixture.hpp.)
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "subscriptions_fixture.hpp"

using namespace dlock::test::subscriptions_fixture;

namespace {

class shard_channels : public subscriptions_test {
 protected:
  bool add_shard(listener_id id, const std::string& channel) {
    return subs_.add(id, kind::shard, channel, record(id));
  }
};

TEST_F(shard_channels, are_ssubscribed_and_hear_smessages) {
  EXPECT_TRUE(add_shard(1, "{a}x"));
  EXPECT_TRUE(add_shard(2, "{a}y"));
  EXPECT_EQ(subscribe(kind::shard, {"{a}x", "{a}y"}),
            "*3\r\n$10\r\nSSUBSCRIBE\r\n$4\r\n{a}x\r\n$4\r\n{a}y\r\n");
  EXPECT_TRUE(subs_.on_reply(confirmation("ssubscribe", "{a}x", 1)));
  EXPECT_TRUE(subs_.on_reply(confirmation("ssubscribe", "{a}y", 2)));
  EXPECT_TRUE(subs_.confirmed(kind::shard, "{a}x"));
  EXPECT_FALSE(subs_.awaiting());
  EXPECT_TRUE(subs_.on_reply(reply::make_array({bulk("smessage"), bulk("{a}y"), bulk("0")})));
  ASSERT_EQ(events_.size(), 3u);
  EXPECT_EQ(events_[0].what, type::subscribed);
  EXPECT_EQ(events_[0].channel, "{a}x");
  EXPECT_EQ(events_[2].what, type::message);
  EXPECT_EQ(events_[2].id, 2u);
  EXPECT_EQ(events_[2].payload, "0");
  // A plain message on a channel of the same name is another topic.
  EXPECT_TRUE(subs_.on_reply(message("{a}y", "1")));
  EXPECT_EQ(events_.size(), 3u);
}

TEST_F(shard_channels, unsubscribe_is_sunsubscribe_and_its_confirmation_is_expected) {
  add_shard(1, "{a}x");
  subscribe(kind::shard, {"{a}x"});
  subs_.on_reply(confirmation("ssubscribe", "{a}x", 1));
  ASSERT_TRUE(subs_.remove(1));
  std::string out;
  subs_.unsubscribe_command(out, kind::shard, {"{a}x"}, deadline_);
  EXPECT_EQ(out, "*2\r\n$12\r\nSUNSUBSCRIBE\r\n$4\r\n{a}x\r\n");
  EXPECT_TRUE(subs_.on_reply(confirmation("sunsubscribe", "{a}x", 0)));
  EXPECT_FALSE(subs_.awaiting());
}

TEST_F(shard_channels, an_unsolicited_sunsubscribe_drops_the_topic_and_says_moved) {
  add_shard(1, "{a}x");
  add_shard(2, "{a}x");
  add_shard(3, "{b}z");
  subscribe(kind::shard, {"{a}x", "{b}z"});
  subs_.on_reply(confirmation("ssubscribe", "{a}x", 1));
  subs_.on_reply(confirmation("ssubscribe", "{b}z", 2));
  events_.clear();
  EXPECT_TRUE(subs_.on_reply(confirmation("sunsubscribe", "{a}x", 1)));
  ASSERT_EQ(events_.size(), 2u);
  EXPECT_EQ(ids(), (std::vector<listener_id>{1, 2}));
  for (const auto& e : events_) {
    EXPECT_EQ(e.what, type::moved);
    EXPECT_EQ(e.channel, "{a}x");
  }
  EXPECT_FALSE(subs_.confirmed(kind::shard, "{a}x"));
  EXPECT_EQ(subs_.listeners(), 1u) << "the moved listeners are gone from this connection";
  EXPECT_FALSE(subs_.remove(1)) << "already removed";
  EXPECT_TRUE(subs_.confirmed(kind::shard, "{b}z"));
  // Also for a channel nobody listens to: nothing to tell.
  EXPECT_TRUE(subs_.on_reply(confirmation("sunsubscribe", "{q}q", 0)));
  // A plain unsubscribe nobody asked for still makes no sense.
  EXPECT_FALSE(subs_.on_reply(confirmation("unsubscribe", "{b}z", 0)));
}

TEST_F(shard_channels, a_refused_ssubscribe_names_moved) {
  add_shard(1, "{a}x");
  subscribe(kind::shard, {"{a}x"});
  EXPECT_TRUE(subs_.on_reply(reply::make_error("MOVED 1234 127.0.0.1:7001")));
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_EQ(events_[0].what, type::failed);
  EXPECT_EQ(events_[0].ec, errc::moved);
}

// NOPERM refuses a whole SUBSCRIBE for one channel: the channels are asked again one by one, so
// that those allowed are heard and only the refused one fails.
TEST_F(subscriptions_test, a_refused_multi_channel_subscribe_is_sent_again_channel_by_channel) {
  add(1, "open");
  add(2, "secret");
  add(3, "gone");
  subscribe(kind::channel, {"open", "secret", "gone"});
  EXPECT_TRUE(subs_.on_reply(reply::make_error("NOPERM no")));
  EXPECT_TRUE(events_.empty()) << "nobody is told yet";
  EXPECT_FALSE(subs_.awaiting());
  subs_.remove(3);  // left meanwhile: not asked again
  std::string out;
  EXPECT_TRUE(subs_.split_refused(out, deadline_));
  EXPECT_EQ(out,
            "*2\r\n$9\r\nSUBSCRIBE\r\n$4\r\nopen\r\n"
            "*2\r\n$9\r\nSUBSCRIBE\r\n$6\r\nsecret\r\n");
  out.clear();
  EXPECT_FALSE(subs_.split_refused(out, deadline_)) << "once";
  EXPECT_TRUE(subs_.on_reply(confirmation("subscribe", "open", 1)));
  EXPECT_TRUE(subs_.on_reply(reply::make_error("NOPERM no")));
  ASSERT_EQ(events_.size(), 2u);
  EXPECT_EQ(events_[0].what, type::subscribed);
  EXPECT_EQ(events_[1].what, type::failed);
  EXPECT_EQ(events_[1].channel, "secret");
  EXPECT_FALSE(subs_.split_refused(out, deadline_)) << "a single channel's refusal is final";
}

}  // namespace
