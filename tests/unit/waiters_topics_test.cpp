// detail::waiter_registry for the other lock kinds: a fair_mutex waiter listens on its own
// channel (redisson_lock__channel:{name}:<owner>), shared_mutex waiters on
// redisson_rwlock:{name}, where `0` and `1` both wake every waiter of the name; topics of
// different kinds on one name never share a subscription.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dlock/keys.hpp"
#include "runtime/waiters.hpp"
#include "waiters_fixture.hpp"

namespace {

using namespace waiters_fixture;
using dlock::detail::lock_kind;
using dlock::detail::wait_topic;

using waiter_topics = fixture;

const wait_topic fair_a{lock_kind::fair, lock_name, "c0ffee:1"};
const wait_topic fair_b{lock_kind::fair, lock_name, "c0ffee:2"};
const wait_topic reader{lock_kind::read, lock_name, "c0ffee:3"};
const wait_topic writer{lock_kind::write, lock_name, "c0ffee:4"};

TEST_F(waiter_topics, a_fair_waiter_subscribes_its_own_channel_only) {
  fake_waiter a{reg.make_ticket()}, b{reg.make_ticket()};
  reg.add(fair_a, &a);
  reg.add(fair_b, &b);
  EXPECT_EQ(subscribed, (std::vector<std::string>{"redisson_lock__channel:{orders}:c0ffee:1",
                                                  "redisson_lock__channel:{orders}:c0ffee:2"}));
  EXPECT_EQ(subscribed[0], dlock::keys::fair_waiter_channel(lock_name, "c0ffee:1"));
  EXPECT_EQ(subscribe_calls, 2) << "one subscription per waiter";
  EXPECT_EQ(reg.names(), 2u);
  // Its confirmation wakes it for one more check; the head's `0` wakes the head only.
  publish(subscribed[0], type::subscribed);
  EXPECT_EQ(a.wakes.size(), 1u);
  EXPECT_EQ(message(subscribed[1], "0"), 1);
  EXPECT_EQ(a.wakes.size(), 1u);
  EXPECT_EQ(b.wakes.size(), 1u);
  reg.remove(fair_a, &a);
  EXPECT_EQ(unsubscribe_calls, 1);
  EXPECT_EQ(message(subscribed[0], "0"), 0) << "unsubscribed";
  reg.remove(fair_b, &b);
  EXPECT_EQ(reg.names(), 0u);
}

TEST_F(waiter_topics, read_write_waiters_share_one_channel_and_every_message_wakes_all) {
  fake_waiter r1{reg.make_ticket()}, r2{reg.make_ticket()}, w{reg.make_ticket()};
  reg.add(reader, &r1);
  reg.add(reader, &r2);
  reg.add(writer, &w);
  EXPECT_EQ(subscribed, (std::vector<std::string>{dlock::keys::rwlock_channel(lock_name)}));
  EXPECT_EQ(subscribed[0], "redisson_rwlock:{orders}");
  EXPECT_EQ(reg.names(), 1u) << "readers and writers of a name are one topic";
  for (const char* m : {"0", "1"}) {
    message(subscribed[0], m);
  }
  EXPECT_EQ(r1.wakes.size(), 2u);
  EXPECT_EQ(r2.wakes.size(), 2u);
  EXPECT_EQ(w.wakes.size(), 2u);
  message(subscribed[0], "junk");
  EXPECT_EQ(w.wakes.size(), 2u) << "only 0 and 1 mean anything";
  reg.remove(reader, &r1);
  reg.remove(writer, &w);
  EXPECT_EQ(unsubscribe_calls, 0);
  reg.remove(reader, &r2);
  EXPECT_EQ(unsubscribe_calls, 1);
}

TEST_F(waiter_topics, kinds_on_one_name_do_not_share_subscriptions) {
  fake_waiter m{reg.make_ticket()}, f{reg.make_ticket()}, r{reg.make_ticket()};
  reg.add(mutex_topic, &m);
  reg.add(fair_a, &f);
  reg.add(reader, &r);
  EXPECT_EQ(reg.names(), 3u);
  EXPECT_EQ(subscribed.size(), 5u) << "three for the mutex, one each for the others";
  EXPECT_NE(mutex_topic.key(), fair_a.key());
  EXPECT_NE(fair_a.key(), reader.key());
  EXPECT_EQ(mutex_topic.key(), lock_name) << "a mutex's key is its name (pass_on takes it)";
  EXPECT_EQ(reader.key(), writer.key());
  // A Redisson unlock of the mutex wakes its waiter only.
  message(redisson_ch, "0");
  EXPECT_EQ(m.wakes.size(), 1u);
  EXPECT_TRUE(f.wakes.empty());
  EXPECT_TRUE(r.wakes.empty());
}

// A waiter registers after its attempt's reply: a message heard on its topic after that attempt
// was sent may have been published after the attempt ran, and came before the waiter listened.
// add() then asks the caller to wake it; a message heard before the attempt was sent does not.
TEST_F(waiter_topics, a_message_between_the_attempt_and_the_registration_wakes_the_waiter) {
  fake_waiter r1{reg.make_ticket()}, w{reg.make_ticket()}, late{reg.make_ticket()};
  EXPECT_FALSE(reg.add(reader, &r1, reg.mark())) << "a new subscription: its confirmation wakes";
  publish(subscribed[0], type::subscribed);
  const auto before_message = reg.mark();
  message(subscribed[0], "0");  // the last reader left, while w's attempt was out
  EXPECT_TRUE(reg.add(writer, &w, before_message));
  const auto after_message = reg.mark();
  EXPECT_FALSE(reg.add(reader, &late, after_message)) << "nothing heard since its attempt";
  // The mutex's topic too (a Redisson unlock's `0`).
  fake_waiter m1{reg.make_ticket()}, m2{reg.make_ticket()};
  reg.add(mutex_topic, &m1);
  const auto mark = reg.mark();
  message(redisson_ch, "0");
  EXPECT_TRUE(reg.add(mutex_topic, &m2, mark));
}

// Semaphores: both layouts share redisson_sc:{name}, whose message is the count available; it
// wakes that many waiters, in turn, as Redisson wakes that many of its own.
TEST_F(waiter_topics, a_semaphore_count_wakes_that_many_waiters_in_turn) {
  const wait_topic leased{lock_kind::permits, lock_name, "c0ffee:5"};
  const wait_topic counting{lock_kind::counting, lock_name, "c0ffee:6"};
  fake_waiter a{reg.make_ticket()}, b{reg.make_ticket()}, c{reg.make_ticket()};
  reg.add(leased, &a);
  reg.add(leased, &b);
  reg.add(counting, &c);
  EXPECT_EQ(subscribed, (std::vector<std::string>{"redisson_sc:{orders}"}));
  EXPECT_EQ(reg.names(), 1u);
  message(subscribed[0], "1");
  EXPECT_EQ(a.wakes.size() + b.wakes.size() + c.wakes.size(), 1u);
  EXPECT_EQ(a.wakes.size(), 1u) << "the longest waiting first";
  message(subscribed[0], "2");
  EXPECT_EQ(b.wakes.size(), 1u);
  EXPECT_EQ(c.wakes.size(), 1u);
  EXPECT_EQ(a.wakes.size(), 1u) << "in turn: a went to the back";
  message(subscribed[0], "9");
  EXPECT_EQ(a.wakes.size() + b.wakes.size() + c.wakes.size(), 6u) << "at most every waiter";
  for (const char* m : {"0", "-3", "junk", ""}) message(subscribed[0], m);
  EXPECT_EQ(a.wakes.size() + b.wakes.size() + c.wakes.size(), 6u) << "no permits: no wake-up";
  reg.remove(leased, &a);
  reg.remove(leased, &b);
  reg.remove(counting, &c);
  EXPECT_EQ(unsubscribe_calls, 1);
}

// A latch's `0` (open) wakes every waiter; `1` (a new count) costs them one harmless check.
TEST_F(waiter_topics, a_latch_opening_wakes_every_waiter) {
  const wait_topic latch{lock_kind::latch, lock_name, "c0ffee:7"};
  fake_waiter a{reg.make_ticket()}, b{reg.make_ticket()};
  reg.add(latch, &a);
  reg.add(latch, &b);
  EXPECT_EQ(subscribed, (std::vector<std::string>{"redisson_countdownlatch__channel__{orders}"}));
  message(subscribed[0], "0");
  EXPECT_EQ(a.wakes.size(), 1u);
  EXPECT_EQ(b.wakes.size(), 1u);
  message(subscribed[0], "junk");
  EXPECT_EQ(a.wakes.size(), 1u);
}

}  // namespace
