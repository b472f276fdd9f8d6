// detail::waiter_registry: who waits on which unlock channel, and whom a pub/sub event wakes,
// with a fake subscriber and fake waiters.
#include "runtime/waiters.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "transport/subscriptions.hpp"

namespace {

using dlock::detail::waiter;
using dlock::detail::waiter_registry;
using dlock::transport::listener_id;
using dlock::transport::pubsub_event;
using dlock::transport::pubsub_listener;
using type = pubsub_event::type;

// Records (un)subscriptions and keeps each subscription's listener so events can be fed to it.
struct fake_subscriber {
  std::vector<std::string> subscribed;  // channel of each subscribe call, in order
  std::vector<listener_id> ids;         // the id each subscribe call returned
  std::vector<listener_id> unsubscribed;
  std::map<listener_id, std::pair<std::string, pubsub_listener>> live;
  listener_id next_id = 100;

  waiter_registry make_registry(std::string own_channel = {}) {
    return waiter_registry{[this](const std::string& channel, pubsub_listener fn) {
                             const listener_id id = next_id++;
                             subscribed.push_back(channel);
                             ids.push_back(id);
                             live.emplace(id, std::pair{channel, std::move(fn)});
                             return id;
                           },
                           [this](listener_id id) {
                             unsubscribed.push_back(id);
                             live.erase(id);
                           },
                           {},
                           std::move(own_channel)};
  }

  // The listener currently subscribed on `channel`, or null.
  const pubsub_listener* listener_of(const std::string& channel) const {
    for (auto& [id, l] : live) {
      if (l.first == channel) return &l.second;
    }
    return nullptr;
  }

  // Delivers an event to the channel's listener as transport::subscriptions does: through a
  // copy, since the listener may unsubscribe itself while it runs. False if nobody listens.
  bool publish(const std::string& channel, type what, std::string_view payload = {}) {
    const pubsub_listener* l = listener_of(channel);
    if (l == nullptr) return false;
    auto call = *l;
    call(pubsub_event{what, channel, {}, payload, {}});
    return true;
  }
  bool message(const std::string& channel, std::string_view payload) {
    return publish(channel, type::message, payload);
  }
};

// Counts its wake-ups; optionally starts an attempt when woken, or runs `on_wake`.
struct fake_waiter : waiter {
  int wakes = 0;
  int refusals = 0;
  int standbys = 0;
  void channel_refused() override { ++refusals; }
  void stand_by() override { ++standbys; }
  std::vector<dlock::detail::grant> grants;
  void granted(const dlock::detail::grant& g) override { grants.push_back(g); }
  bool attempt_on_wake = false;
  std::function<void()> on_wake;

  void wake() override {
    ++wakes;
    if (attempt_on_wake) attempting = true;
    if (on_wake) on_wake();
  }
};

// Gives each waiter a ticket of `reg` and registers it on `channel`, in this order (as their
// attempts would, once each has queued).
void queue(waiter_registry& reg, const std::string& channel, std::initializer_list<fake_waiter*> ws) {
  for (auto* w : ws) {
    w->ticket = reg.make_ticket();
    reg.add(channel, w);
  }
}

const std::string chan_a = "redisson_lock__channel:{a}";
const std::string chan_b = "redisson_lock__channel:{b}";

TEST(waiters, first_add_on_a_channel_subscribes_once) {
  fake_subscriber sub;
  auto reg = sub.make_registry();
  fake_waiter w1, w2;
  EXPECT_EQ(reg.channels(), 0u);
  EXPECT_EQ(reg.waiters(chan_a), 0u);

  reg.add(chan_a, &w1);
  EXPECT_EQ(sub.subscribed, std::vector<std::string>{chan_a});
  EXPECT_EQ(reg.channels(), 1u);
  EXPECT_EQ(reg.waiters(chan_a), 1u);

  reg.add(chan_a, &w2);
  EXPECT_EQ(sub.subscribed.size(), 1u);  // shared
  EXPECT_EQ(reg.channels(), 1u);
  EXPECT_EQ(reg.waiters(chan_a), 2u);
  EXPECT_TRUE(sub.unsubscribed.empty());
  EXPECT_EQ(w1.wakes + w2.wakes, 0);  // adding wakes nobody
}

TEST(waiters, waiters_of_two_channels_are_independent) {
  fake_subscriber sub;
  auto reg = sub.make_registry();
  fake_waiter a1, a2, b1;
  reg.add(chan_a, &a1);
  reg.add(chan_b, &b1);
  reg.add(chan_a, &a2);
  EXPECT_EQ(sub.subscribed, (std::vector<std::string>{chan_a, chan_b}));
  ASSERT_EQ(sub.ids.size(), 2u);
  EXPECT_NE(sub.ids[0], sub.ids[1]);
  EXPECT_EQ(reg.channels(), 2u);
  EXPECT_EQ(reg.waiters(chan_a), 2u);
  EXPECT_EQ(reg.waiters(chan_b), 1u);

  ASSERT_TRUE(sub.message(chan_b, "1"));
  EXPECT_EQ(a1.wakes, 0);
  EXPECT_EQ(a2.wakes, 0);
  EXPECT_EQ(b1.wakes, 1);

  ASSERT_TRUE(sub.message(chan_a, "0"));
  EXPECT_EQ(a1.wakes, 1);
  EXPECT_EQ(a2.wakes, 0);
  EXPECT_EQ(b1.wakes, 1);

  reg.remove(chan_b, &b1);
  EXPECT_EQ(sub.unsubscribed, std::vector<listener_id>{sub.ids[1]});
  EXPECT_EQ(reg.channels(), 1u);
  EXPECT_EQ(reg.waiters(chan_a), 2u);
  EXPECT_EQ(reg.waiters(chan_b), 0u);
}

TEST(waiters, remove_of_the_last_waiter_unsubscribes_with_its_id) {
  fake_subscriber sub;
  auto reg = sub.make_registry();
  fake_waiter other, w1, w2;
  reg.add(chan_b, &other);  // so the channel of interest gets a different id than the first
  reg.add(chan_a, &w1);
  reg.add(chan_a, &w2);
  ASSERT_EQ(sub.ids.size(), 2u);
  const listener_id id_a = sub.ids[1];

  reg.remove(chan_a, &w1);
  EXPECT_TRUE(sub.unsubscribed.empty());
  EXPECT_EQ(reg.waiters(chan_a), 1u);
  reg.remove(chan_a, &w1);  // again: not there any more
  EXPECT_TRUE(sub.unsubscribed.empty());
  reg.remove(chan_a, &other);  // registered, but on another channel
  EXPECT_TRUE(sub.unsubscribed.empty());
  EXPECT_EQ(reg.waiters(chan_a), 1u);

  reg.remove(chan_a, &w2);
  EXPECT_EQ(sub.unsubscribed, std::vector<listener_id>{id_a});
  EXPECT_EQ(reg.channels(), 1u);
  EXPECT_EQ(reg.waiters(chan_a), 0u);

  reg.remove(chan_a, &w2);  // the channel is gone: no-op
  EXPECT_EQ(sub.unsubscribed.size(), 1u);

  // A new waiter subscribes afresh.
  reg.add(chan_a, &w1);
  EXPECT_EQ(sub.subscribed, (std::vector<std::string>{chan_b, chan_a, chan_a}));
  EXPECT_NE(sub.ids.back(), id_a);
  reg.remove(chan_a, &w1);
  EXPECT_EQ(sub.unsubscribed, (std::vector<listener_id>{id_a, sub.ids.back()}));
}

TEST(waiters, unlock_message_wakes_the_first_waiter_not_attempting_in_fifo_order) {
  fake_subscriber sub;
  auto reg = sub.make_registry();
  fake_waiter w1, w2, w3, w4;
  for (auto* w : {&w1, &w2, &w3, &w4}) {
    w->attempt_on_wake = true;
    reg.add(chan_a, w);
  }
  w2.attempting = true;

  ASSERT_TRUE(sub.message(chan_a, "0"));
  EXPECT_EQ(w1.wakes, 1);
  EXPECT_EQ(w2.wakes + w3.wakes + w4.wakes, 0);

  ASSERT_TRUE(sub.message(chan_a, "0"));  // w1 is attempting now, w2 still is
  EXPECT_EQ(w1.wakes, 1);
  EXPECT_EQ(w2.wakes, 0);
  EXPECT_EQ(w3.wakes, 1);
  EXPECT_EQ(w4.wakes, 0);

  w1.attempting = false;  // its attempt failed: the longest-waiting one is first again
  ASSERT_TRUE(sub.message(chan_a, "0"));
  EXPECT_EQ(w1.wakes, 2);
  EXPECT_EQ(w4.wakes, 0);

  for (auto* w : {&w1, &w2, &w3, &w4}) EXPECT_FALSE(w->wake_pending);
}

TEST(waiters, unlock_message_when_all_attempt_marks_the_first_pending_and_wakes_none) {
  fake_subscriber sub;
  auto reg = sub.make_registry();
  fake_waiter w1, w2, w3;
  for (auto* w : {&w1, &w2, &w3}) {
    w->attempting = true;
    reg.add(chan_a, w);
  }
  ASSERT_TRUE(sub.message(chan_a, "0"));
  EXPECT_EQ(w1.wakes + w2.wakes + w3.wakes, 0);
  EXPECT_TRUE(w1.wake_pending);
  EXPECT_FALSE(w2.wake_pending);
  EXPECT_FALSE(w3.wake_pending);

  // Once the first has left, the next first gets it.
  reg.remove(chan_a, &w1);
  ASSERT_TRUE(sub.message(chan_a, "0"));
  EXPECT_TRUE(w2.wake_pending);
  EXPECT_FALSE(w3.wake_pending);
  EXPECT_EQ(w2.wakes + w3.wakes, 0);
}

// Tickets: dlock's unlock names the head of the lock's waiter queue, then publishes 0.
TEST(waiters, tickets_are_numbers_no_message_can_be_and_each_is_new) {
  fake_subscriber sub;
  auto reg = sub.make_registry();
  const auto t1 = reg.make_ticket(), t2 = reg.make_ticket();
  EXPECT_NE(t1, t2);
  EXPECT_EQ(t1 >> 32, t2 >> 32) << "one client, one tag";
  EXPECT_NE(t1 >> 32, 0u);
  EXPECT_LT(t1, std::uint64_t{1} << 63) << "a Java long, as Redisson's LongCodec decodes it";
  EXPECT_EQ(waiter_registry::parse_ticket(waiter_registry::ticket_text(t1)), t1);
  for (std::string_view not_a_ticket : {"0", "1", "", "42", "4294967295", "-4294967296",
                                        "4294967296x", "99999999999999999999", " 4294967296"}) {
    EXPECT_EQ(waiter_registry::parse_ticket(not_a_ticket), 0u) << not_a_ticket;
  }
  EXPECT_EQ(waiter_registry::parse_ticket("4294967296"), 4294967296u);
}

TEST(waiters, a_ticket_wakes_exactly_its_waiter_and_the_zero_after_it_wakes_nobody) {
  fake_subscriber sub;
  auto reg = sub.make_registry();
  fake_waiter w1, w2, w3;
  queue(reg, chan_a, {&w1, &w2, &w3});
  ASSERT_TRUE(sub.message(chan_a, waiter_registry::ticket_text(w2.ticket)));
  ASSERT_TRUE(sub.message(chan_a, "0"));
  EXPECT_EQ(w1.wakes, 0);
  EXPECT_EQ(w2.wakes, 1);
  EXPECT_EQ(w3.wakes, 0);
  EXPECT_TRUE(w2.named) << "its next attempt keeps its place in the queue";
  EXPECT_FALSE(w1.named);
  // A 0 that no ticket announced (Redisson's unlock) wakes the first waiter as before.
  ASSERT_TRUE(sub.message(chan_a, "0"));
  EXPECT_EQ(w1.wakes, 1);
  EXPECT_EQ(w2.wakes, 1);
  EXPECT_EQ(w3.wakes, 0);
}

TEST(waiters, another_clients_ticket_wakes_none_of_ours_nor_does_its_zero) {
  fake_subscriber sub, other_sub;
  auto reg = sub.make_registry();
  auto other = other_sub.make_registry();
  auto theirs = other.make_ticket();
  if ((theirs >> 32) == (reg.make_ticket() >> 32)) GTEST_SKIP() << "two random tags collided";
  fake_waiter w1, w2;
  queue(reg, chan_a, {&w1, &w2});
  ASSERT_TRUE(sub.message(chan_a, waiter_registry::ticket_text(theirs)));
  ASSERT_TRUE(sub.message(chan_a, "0"));
  EXPECT_EQ(w1.wakes + w2.wakes, 0);
}

TEST(waiters, a_ticket_of_ours_whose_waiter_left_passes_the_wake_up_on) {
  fake_subscriber sub;
  auto reg = sub.make_registry();
  fake_waiter gone, w2;
  queue(reg, chan_a, {&gone, &w2});
  reg.remove(chan_a, &gone);
  ASSERT_TRUE(sub.message(chan_a, waiter_registry::ticket_text(gone.ticket)));
  ASSERT_TRUE(sub.message(chan_a, "0"));
  EXPECT_EQ(gone.wakes, 0);
  EXPECT_EQ(w2.wakes, 1);
}

// The unlock that names a waiter can reach the client (subscriber connection) before the reply
// that queued that waiter (command connection): the waiter registers after its name came. It
// must still get its wake-up, as the named one (it is no longer in the queue).
TEST(waiters, a_ticket_named_before_its_waiter_registered_wakes_it_when_it_does) {
  fake_subscriber sub;
  auto reg = sub.make_registry();
  fake_waiter w1, late;
  w1.ticket = reg.make_ticket();
  late.ticket = reg.make_ticket();
  reg.add(chan_a, &w1);  // another waiter keeps the channel subscribed
  ASSERT_TRUE(sub.message(chan_a, waiter_registry::ticket_text(late.ticket)));
  ASSERT_TRUE(sub.message(chan_a, "0"));
  reg.add(chan_a, &late);
  EXPECT_TRUE(late.named);
  EXPECT_TRUE(late.wake_pending) << "it re-checks at once, as the named waiter";
  // Remembered once: a second registration of that ticket is not woken again.
  reg.remove(chan_a, &late);
  late.named = late.wake_pending = false;
  reg.add(chan_a, &late);
  EXPECT_FALSE(late.wake_pending);
}

// Ticket, stand-by, 0: the named waiter wakes, the next in line stands by (it will re-check
// when the hand-off's window ends), and the 0 still wakes nobody.
TEST(waiters, a_standby_message_reaches_only_its_waiter_and_keeps_the_zero_announced) {
  fake_subscriber sub;
  auto reg = sub.make_registry();
  fake_waiter named, next, other;
  queue(reg, chan_a, {&named, &next, &other});
  ASSERT_TRUE(sub.message(chan_a, waiter_registry::ticket_text(named.ticket)));
  ASSERT_TRUE(sub.message(chan_a, "-" + waiter_registry::ticket_text(next.ticket)));
  ASSERT_TRUE(sub.message(chan_a, "0"));
  EXPECT_EQ(named.wakes, 1);
  EXPECT_EQ(next.standbys, 1);
  EXPECT_EQ(next.wakes + other.wakes + other.standbys + named.standbys, 0);
  EXPECT_EQ(waiter_registry::parse_standby("-" + waiter_registry::ticket_text(next.ticket)), next.ticket);
  EXPECT_EQ(waiter_registry::parse_standby("-1"), 0u) << "not a ticket";
  EXPECT_EQ(waiter_registry::parse_standby("-"), 0u);
  EXPECT_EQ(waiter_registry::parse_standby(waiter_registry::ticket_text(next.ticket)), 0u);
}

TEST(waiters, a_ticket_for_a_waiter_mid_attempt_makes_it_check_again) {
  fake_subscriber sub;
  auto reg = sub.make_registry();
  fake_waiter w1, w2;
  queue(reg, chan_a, {&w1, &w2});
  w2.attempting = true;
  ASSERT_TRUE(sub.message(chan_a, waiter_registry::ticket_text(w2.ticket)));
  ASSERT_TRUE(sub.message(chan_a, "0"));
  EXPECT_EQ(w1.wakes + w2.wakes, 0);
  EXPECT_TRUE(w2.wake_pending);
  EXPECT_FALSE(w1.wake_pending);
}

TEST(waiters, a_resubscription_forgets_a_ticket_whose_zero_did_not_come) {
  fake_subscriber sub;
  auto reg = sub.make_registry();
  fake_waiter w1;
  queue(reg, chan_a, {&w1});
  ASSERT_TRUE(sub.message(chan_a, "9999999999"));  // someone else's, then the link broke
  ASSERT_TRUE(sub.publish(chan_a, type::resubscribed));
  EXPECT_EQ(w1.wakes, 1);
  ASSERT_TRUE(sub.message(chan_a, "0"));
  EXPECT_EQ(w1.wakes, 2) << "this 0 is a new unlock";
}

TEST(waiters, read_unlock_message_wakes_all) {
  fake_subscriber sub;
  auto reg = sub.make_registry();
  fake_waiter w1, w2, w3;
  w2.attempting = true;
  for (auto* w : {&w1, &w2, &w3}) reg.add(chan_a, w);
  ASSERT_TRUE(sub.message(chan_a, "1"));
  EXPECT_EQ(w1.wakes, 1);
  EXPECT_EQ(w2.wakes, 1);
  EXPECT_EQ(w3.wakes, 1);
}

TEST(waiters, subscribed_and_resubscribed_wake_all) {
  fake_subscriber sub;
  auto reg = sub.make_registry();
  fake_waiter w1, w2;
  reg.add(chan_a, &w1);
  reg.add(chan_a, &w2);
  ASSERT_TRUE(sub.publish(chan_a, type::subscribed));
  EXPECT_EQ(w1.wakes, 1);
  EXPECT_EQ(w2.wakes, 1);
  ASSERT_TRUE(sub.publish(chan_a, type::resubscribed));
  EXPECT_EQ(w1.wakes, 2);
  EXPECT_EQ(w2.wakes, 2);
}

TEST(waiters, failed_subscription_counts_as_refused_and_wakes_none) {
  fake_subscriber sub;
  auto reg = sub.make_registry();
  fake_waiter w1, w2;
  reg.add(chan_a, &w1);
  reg.add(chan_b, &w2);
  EXPECT_EQ(reg.refused(), 0u);
  ASSERT_TRUE(sub.publish(chan_a, type::failed));
  EXPECT_EQ(reg.refused(), 1u);
  ASSERT_TRUE(sub.publish(chan_b, type::failed));
  EXPECT_EQ(reg.refused(), 2u);
  EXPECT_EQ(w1.wakes + w2.wakes, 0);
  // The waiters stay registered; they fall back to their own re-checks, out of the queue.
  EXPECT_EQ(reg.waiters(chan_a), 1u);
  EXPECT_TRUE(sub.unsubscribed.empty());
  EXPECT_EQ(w1.refusals, 1);
  EXPECT_EQ(w2.refusals, 1);
}

// The client's own channel (keys::waiter_channel): subscribed with the first waiter, before the
// lock's channel, and kept; a ticket on it wakes exactly its waiter whatever the lock, with no
// `0` to skip; a stand-by reaches its waiter; its (re)subscription wakes every waiter; its
// refusal takes every waiter out of the queue.
const std::string own = "dlock_waiter__channel:me";

TEST(waiters, the_own_channel_is_subscribed_first_and_kept) {
  fake_subscriber sub;
  auto reg = sub.make_registry(own);
  fake_waiter w1, w2;
  reg.add(chan_a, &w1);
  reg.add(chan_b, &w2);
  EXPECT_EQ(sub.subscribed, (std::vector<std::string>{own, chan_a, chan_b}));
  // Its first confirmation wakes nobody; the lock channels' confirmations, which follow, do.
  ASSERT_TRUE(sub.publish(own, type::subscribed));
  EXPECT_EQ(w1.wakes + w2.wakes, 0);
  ASSERT_TRUE(sub.publish(chan_a, type::subscribed));
  EXPECT_EQ(w1.wakes, 1);
  reg.remove(chan_a, &w1);
  reg.remove(chan_b, &w2);
  reg.add(chan_a, &w1);
  EXPECT_EQ(sub.subscribed, (std::vector<std::string>{own, chan_a, chan_b, chan_a})) << "once per client";
  EXPECT_NE(sub.listener_of(own), nullptr) << "still subscribed";
  EXPECT_EQ(reg.channels(), 1u) << "not counted among the locks' channels";
}

TEST(waiters, a_ticket_on_the_own_channel_wakes_its_waiter_on_any_lock) {
  fake_subscriber sub;
  auto reg = sub.make_registry(own);
  fake_waiter a1, a2, b1;
  queue(reg, chan_a, {&a1, &a2});
  queue(reg, chan_b, {&b1});
  ASSERT_TRUE(sub.message(own, waiter_registry::ticket_text(b1.ticket)));
  EXPECT_EQ(b1.wakes, 1);
  EXPECT_TRUE(b1.named);
  EXPECT_EQ(a1.wakes + a2.wakes, 0);
  ASSERT_TRUE(sub.message(own, "-" + waiter_registry::ticket_text(a2.ticket)));
  EXPECT_EQ(a2.standbys, 1);
  EXPECT_EQ(a1.standbys + b1.standbys, 0);
  // No `0` follows a ticket on the own channel: Redisson's next unlock wakes a waiter at once.
  ASSERT_TRUE(sub.message(chan_a, "0"));
  EXPECT_EQ(a1.wakes, 1);
  // A ticket of ours not registered yet (its queueing reply is still on the way): add() wakes it.
  fake_waiter late;
  late.ticket = reg.make_ticket();
  ASSERT_TRUE(sub.message(own, waiter_registry::ticket_text(late.ticket)));
  EXPECT_EQ(a1.wakes + a2.wakes + b1.wakes, 2) << "nobody else woken";
  reg.add(chan_b, &late);
  EXPECT_TRUE(late.named);
  EXPECT_TRUE(late.wake_pending);
}

TEST(waiters, a_grant_message_is_parsed_exactly) {
  const auto g = waiter_registry::parse_grant("=4294967297 1700000000123456 12 98765432109876 100");
  ASSERT_TRUE(g);
  EXPECT_EQ(g->ticket, 4294967297u);
  EXPECT_EQ(g->token, 1700000000123456u);
  EXPECT_EQ(g->since, std::chrono::milliseconds{12});
  EXPECT_EQ(g->sent.time_since_epoch().count(), 98765432109876);
  EXPECT_EQ(g->window, std::chrono::milliseconds{100});
  EXPECT_TRUE(waiter_registry::parse_grant("=4294967297 0 0 0 1")) << "no token (fencing off)";
  for (const char* bad : {"", "=", "4294967297 1 2 3 4", "=4294967297 1 2 3", "=4294967297 1 2 3 4 5",
                          "=1 1 2 3 4" /* not a ticket */, "=4294967297  1 2 3 4", "=4294967297 1 2 3 4 ",
                          "=4294967297 x 2 3 4", "=4294967297 1 -2 3 4", "=4294967297 1 2 99999999999999999999 4",
                          "=4294967297 1 2 9223372036854775808 4" /* past the steady clock */, "-4294967297"}) {
    EXPECT_FALSE(waiter_registry::parse_grant(bad)) << bad;
  }
  EXPECT_EQ(waiter_registry::parse_ticket("=4294967297 1 2 3 4"), 0u) << "a grant is not a ticket";
}

// A grant on the own channel reaches exactly its waiter (on any lock), wakes nobody; one for a
// waiter not registered yet is given by add(); another client's, or one for a waiter that is
// gone, reaches nobody.
TEST(waiters, a_grant_on_the_own_channel_reaches_its_waiter_even_before_it_registers) {
  fake_subscriber sub;
  auto reg = sub.make_registry(own);
  fake_waiter a1, b1;
  queue(reg, chan_a, {&a1});
  queue(reg, chan_b, {&b1});
  const auto grant_for = [](std::uint64_t ticket) {
    return "=" + waiter_registry::ticket_text(ticket) + " 77 3 1000 100";
  };
  ASSERT_TRUE(sub.message(own, grant_for(b1.ticket)));
  ASSERT_EQ(b1.grants.size(), 1u);
  EXPECT_EQ(b1.grants[0].token, 77u);
  EXPECT_EQ(b1.wakes + a1.wakes, 0);
  EXPECT_TRUE(a1.grants.empty());
  ASSERT_TRUE(sub.message(own, grant_for(b1.ticket ^ (std::uint64_t{1} << 40))));  // another client's tag
  fake_waiter late;
  late.ticket = reg.make_ticket();
  ASSERT_TRUE(sub.message(own, grant_for(late.ticket)));
  EXPECT_TRUE(late.grants.empty());
  reg.add(chan_a, &late);
  ASSERT_EQ(late.grants.size(), 1u) << "given when it registers";
  reg.remove(chan_a, &late);
  reg.add(chan_a, &late);
  EXPECT_EQ(late.grants.size(), 1u) << "once";
  EXPECT_EQ(a1.grants.size() + b1.grants.size(), 1u);
  EXPECT_EQ(a1.wakes + b1.wakes + late.wakes, 0);
}

TEST(waiters, the_own_channels_resubscription_wakes_everyone_and_its_refusal_unqueues_everyone) {
  fake_subscriber sub;
  auto reg = sub.make_registry(own);
  fake_waiter a1, b1;
  reg.add(chan_a, &a1);
  reg.add(chan_b, &b1);
  ASSERT_TRUE(sub.publish(own, type::resubscribed));
  EXPECT_EQ(a1.wakes, 1);
  EXPECT_EQ(b1.wakes, 1);
  ASSERT_TRUE(sub.publish(own, type::failed));
  EXPECT_EQ(reg.refused(), 1u);
  EXPECT_EQ(a1.refusals, 1);
  EXPECT_EQ(b1.refusals, 1);
}

TEST(waiters, events_for_channels_without_waiters_are_ignored) {
  fake_subscriber sub;
  auto reg = sub.make_registry();
  fake_waiter w1;
  reg.add(chan_a, &w1);
  for (auto what : {type::message, type::subscribed, type::resubscribed, type::failed}) {
    reg.on_event(chan_b, pubsub_event{what, chan_b, {}, "1", {}});
  }
  EXPECT_EQ(w1.wakes, 0);
  EXPECT_EQ(reg.refused(), 0u);
  EXPECT_EQ(reg.channels(), 1u);

  // A listener whose channel was left in the meantime (its event was already on its way).
  const pubsub_listener stale = *sub.listener_of(chan_a);
  reg.remove(chan_a, &w1);
  ASSERT_EQ(reg.channels(), 0u);
  stale(pubsub_event{type::message, chan_a, {}, "1", {}});
  stale(pubsub_event{type::failed, chan_a, {}, {}, {}});
  EXPECT_EQ(w1.wakes, 0);
  EXPECT_EQ(reg.refused(), 0u);
  EXPECT_EQ(reg.channels(), 0u);
}

// Wake-alls whose waiters finish (and leave) from wake(). Waiters live on the heap and are
// deleted on removal, so waking a removed one is a use-after-free under ASan.
class waiters_reentrancy : public ::testing::Test {
 protected:
  fake_subscriber sub;
  waiter_registry reg = sub.make_registry();
  std::vector<fake_waiter*> ws;  // null once deleted
  std::vector<int> woken;        // wake count of each, kept after deletion

  std::size_t add(const std::string& channel) {
    ws.push_back(new fake_waiter);
    woken.push_back(0);
    const std::size_t i = ws.size() - 1;
    ws[i]->on_wake = [this, i] { ++woken[i]; };
    reg.add(channel, ws[i]);
    return i;
  }
  // Removes waiter `i` from `channel` and deletes it.
  void finish(const std::string& channel, std::size_t i) {
    if (ws[i] == nullptr) return;
    reg.remove(channel, ws[i]);
    delete ws[i];
    ws[i] = nullptr;
  }
  // Waiter `i`'s wake() runs `fn` after counting.
  void on_wake(std::size_t i, std::function<void()> fn) {
    ws[i]->on_wake = [this, i, fn = std::move(fn)] {
      ++woken[i];
      auto call = fn;  // `fn` may delete this waiter, and with it this closure
      call();
    };
  }
  void TearDown() override {
    for (auto* w : ws) delete w;
  }
};

TEST_F(waiters_reentrancy, each_waiter_removes_itself_during_wake_all) {
  for (int i = 0; i < 3; ++i) add(chan_a);
  add(chan_b);
  for (std::size_t i = 0; i < 3; ++i) on_wake(i, [this, i] { finish(chan_a, i); });

  ASSERT_TRUE(sub.message(chan_a, "1"));
  EXPECT_EQ(woken, (std::vector<int>{1, 1, 1, 0}));
  EXPECT_EQ(reg.channels(), 1u);
  EXPECT_EQ(reg.waiters(chan_a), 0u);
  EXPECT_EQ(sub.unsubscribed, std::vector<listener_id>{sub.ids[0]});
}

TEST_F(waiters_reentrancy, a_waiter_removes_another_one_during_wake_all) {
  for (int i = 0; i < 4; ++i) add(chan_a);
  on_wake(0, [this] { finish(chan_a, 2); });  // a later one: must not be woken
  on_wake(3, [this] { finish(chan_a, 1); });  // an earlier one, already woken

  ASSERT_TRUE(sub.publish(chan_a, type::resubscribed));
  EXPECT_EQ(woken, (std::vector<int>{1, 1, 0, 1}));
  EXPECT_EQ(reg.waiters(chan_a), 2u);
  EXPECT_TRUE(sub.unsubscribed.empty());

  // The registry is still consistent afterwards.
  ASSERT_TRUE(sub.publish(chan_a, type::subscribed));
  EXPECT_EQ(woken, (std::vector<int>{2, 1, 0, 2}));
}

TEST_F(waiters_reentrancy, the_first_waiter_removes_all_so_the_channel_entry_is_erased) {
  for (int i = 0; i < 4; ++i) add(chan_a);
  on_wake(0, [this] {
    finish(chan_a, 1);
    finish(chan_a, 2);
    finish(chan_a, 3);
    finish(chan_a, 0);  // the last one: the channel's entry goes, with its subscription
  });

  ASSERT_TRUE(sub.message(chan_a, "1"));
  EXPECT_EQ(woken, (std::vector<int>{1, 0, 0, 0}));
  EXPECT_EQ(reg.channels(), 0u);
  EXPECT_EQ(sub.unsubscribed, std::vector<listener_id>{sub.ids[0]});
  EXPECT_TRUE(sub.live.empty());
}

TEST_F(waiters_reentrancy, a_middle_waiter_removes_the_rest_so_the_channel_entry_is_erased) {
  for (int i = 0; i < 4; ++i) add(chan_a);
  on_wake(1, [this] {
    for (std::size_t i = 0; i < 4; ++i) finish(chan_a, i);
  });

  ASSERT_TRUE(sub.publish(chan_a, type::resubscribed));
  EXPECT_EQ(woken, (std::vector<int>{1, 1, 0, 0}));
  EXPECT_EQ(reg.channels(), 0u);
  EXPECT_EQ(sub.unsubscribed.size(), 1u);
}

TEST_F(waiters_reentrancy, the_channel_emptied_and_rejoined_during_wake_all) {
  for (int i = 0; i < 3; ++i) add(chan_a);
  std::size_t late = 0;
  on_wake(0, [this, &late] {
    finish(chan_a, 1);
    finish(chan_a, 2);
    finish(chan_a, 0);
    late = add(chan_a);  // a new entry and subscription for the same channel
  });

  ASSERT_TRUE(sub.message(chan_a, "1"));
  // The removed ones are not woken; the newcomer was not waiting when the event came.
  EXPECT_EQ(woken, (std::vector<int>{1, 0, 0, 0}));
  EXPECT_EQ(late, 3u);
  EXPECT_EQ(reg.channels(), 1u);
  EXPECT_EQ(reg.waiters(chan_a), 1u);
  EXPECT_EQ(sub.subscribed.size(), 2u);
  EXPECT_EQ(sub.unsubscribed, std::vector<listener_id>{sub.ids[0]});

  ASSERT_TRUE(sub.message(chan_a, "0"));  // through the new subscription
  EXPECT_EQ(woken[late], 1);
}

TEST_F(waiters_reentrancy, the_woken_waiter_removes_itself_during_wake_one) {
  add(chan_a);
  add(chan_a);
  on_wake(0, [this] { finish(chan_a, 0); });
  on_wake(1, [this] { finish(chan_a, 1); });

  ASSERT_TRUE(sub.message(chan_a, "0"));
  EXPECT_EQ(woken, (std::vector<int>{1, 0}));
  ASSERT_TRUE(sub.message(chan_a, "0"));  // the last one: the entry goes while waking
  EXPECT_EQ(woken, (std::vector<int>{1, 1}));
  EXPECT_EQ(reg.channels(), 0u);
  EXPECT_EQ(sub.unsubscribed.size(), 1u);
}

}  // namespace

// Lingering subscriptions (config::subscription_linger): a channel stays subscribed for a
// while after its last waiter leaves.
class waiters_linger : public ::testing::Test {
 protected:
  using clock = waiter_registry::clock;
  fake_subscriber sub;
  waiter_registry reg = sub.make_registry();
  std::vector<clock::time_point> armed;  // each sweep the registry asked for
  void SetUp() override {
    reg.set_linger(std::chrono::seconds{1}, [this](clock::time_point at) { armed.push_back(at); });
  }
  // `channel` subscribed, confirmed, and left by its only waiter: it lingers.
  void lingering(const std::string& channel) {
    fake_waiter w;
    reg.add(channel, &w);
    sub.publish(channel, type::subscribed);
    reg.remove(channel, &w);
    ASSERT_GE(reg.lingering(), 1u);
  }
};

TEST_F(waiters_linger, the_last_waiter_leaving_keeps_the_channel_subscribed_until_the_sweep) {
  fake_waiter w1;
  reg.add(chan_a, &w1);
  const auto before = clock::now();
  reg.remove(chan_a, &w1);
  EXPECT_TRUE(sub.unsubscribed.empty());
  EXPECT_EQ(reg.channels(), 0u) << "no waiter on it";
  EXPECT_EQ(reg.lingering(), 1u);
  ASSERT_EQ(armed.size(), 1u);
  EXPECT_GE(armed[0], before + std::chrono::seconds{1});
  EXPECT_LE(armed[0], clock::now() + std::chrono::seconds{1});

  reg.sweep(armed[0] - std::chrono::milliseconds{1});  // early: kept, asked again
  EXPECT_TRUE(sub.unsubscribed.empty());
  ASSERT_EQ(armed.size(), 2u);
  EXPECT_EQ(armed[1], armed[0]);

  reg.sweep(armed[0]);
  EXPECT_EQ(sub.unsubscribed, std::vector<listener_id>{sub.ids[0]});
  EXPECT_EQ(reg.lingering(), 0u);
  EXPECT_EQ(armed.size(), 2u) << "nothing left to sweep";
  reg.sweep(armed[0] + std::chrono::hours{1});  // a late timer: no-op
  EXPECT_EQ(sub.unsubscribed.size(), 1u);
}

TEST_F(waiters_linger, a_new_waiter_takes_the_lingering_subscription_without_a_check) {
  fake_waiter w1, w2;
  reg.add(chan_a, &w1);
  sub.publish(chan_a, type::subscribed);
  EXPECT_EQ(w1.wakes, 1) << "the confirmation: one more check";
  reg.remove(chan_a, &w1);

  reg.add(chan_a, &w2, clock::now());
  EXPECT_EQ(sub.subscribed.size(), 1u) << "no second SUBSCRIBE";
  EXPECT_EQ(reg.lingering(), 0u);
  EXPECT_EQ(reg.channels(), 1u);
  EXPECT_FALSE(w2.wake_pending) << "its attempt went out while the channel was subscribed";
  EXPECT_EQ(w2.wakes, 0);
  EXPECT_TRUE(sub.message(chan_a, "0"));
  EXPECT_EQ(w2.wakes, 1) << "unlock messages reach it";

  // Its leaving and the sweep at the first one's time keep it: it lingers from its own leave.
  reg.remove(chan_a, &w2);
  reg.sweep(clock::now());
  EXPECT_TRUE(sub.unsubscribed.empty());
  EXPECT_EQ(reg.lingering(), 1u);
}

TEST_F(waiters_linger, a_message_nobody_heard_after_a_waiters_attempt_makes_it_check_again) {
  fake_waiter early, late;
  lingering(chan_a);

  const auto sent_before = clock::now();
  EXPECT_TRUE(sub.message(chan_a, "0"));  // nobody waits: heard by nobody
  const auto sent_after = clock::now() + std::chrono::microseconds{1};
  reg.add(chan_a, &early, sent_before);
  EXPECT_TRUE(early.wake_pending) << "that unlock may be the one its attempt missed";
  EXPECT_EQ(early.wakes, 0) << "the waiter acts on wake_pending itself (acquire_op)";
  reg.remove(chan_a, &early);

  reg.add(chan_a, &late, sent_after);
  EXPECT_FALSE(late.wake_pending) << "its attempt saw what that unlock did";
}

// A wake-up passed on by the last waiter to leave (it was woken mid-attempt, then gave up) finds
// nobody on a lingering channel: a waiter whose attempt went out before it must re-check.
TEST_F(waiters_linger, a_wake_up_passed_on_to_nobody_counts_as_unheard) {
  fake_waiter a, b;
  reg.add(chan_a, &a);
  sub.publish(chan_a, type::subscribed);
  a.wakes = 0;
  a.attempting = true;
  const auto b_sent = clock::now();   // b's attempt: it will find the lock held
  EXPECT_TRUE(sub.message(chan_a, "0"));  // the unlock: a is mid-attempt, so it is told to retry
  EXPECT_TRUE(a.wake_pending);
  EXPECT_EQ(a.wakes, 0);
  reg.remove(chan_a, &a);   // a's deadline passed: it leaves, lingering the channel...
  reg.wake_one(chan_a);     // ...and passes its wake-up on (acquire_op::finish)
  reg.add(chan_a, &b, b_sent);
  EXPECT_TRUE(b.wake_pending) << "the lock may be free: b must check";
}

// Only a wake-up that nobody took marks the channel: another client's stand-by, or another
// client's ticket and the `0` that follows it (its waiter takes the lock), wake nobody here.
TEST_F(waiters_linger, messages_for_other_clients_waiters_leave_no_mark) {
  fake_waiter w;
  lingering(chan_a);
  const auto sent = clock::now();
  const std::uint64_t theirs = (std::uint64_t{0x7fffffffu} << 32) | 5;
  if ((theirs >> 32) == (reg.make_ticket() >> 32)) GTEST_SKIP() << "two random tags collided";
  EXPECT_TRUE(sub.message(chan_a, "-" + std::to_string(theirs)));
  EXPECT_TRUE(sub.message(chan_a, std::to_string(theirs)));
  EXPECT_TRUE(sub.message(chan_a, "0"));
  reg.add(chan_a, &w, sent);
  EXPECT_FALSE(w.wake_pending);
}

TEST_F(waiters_linger, a_resubscription_while_lingering_counts_as_unheard) {
  fake_waiter w2;
  lingering(chan_a);
  const auto sent = clock::now();
  sub.publish(chan_a, type::resubscribed);  // messages may have been missed while reconnecting
  reg.add(chan_a, &w2, sent);
  EXPECT_TRUE(w2.wake_pending);
}

TEST_F(waiters_linger, at_most_max_lingering_channels_linger_the_oldest_goes_first) {
  std::vector<fake_waiter> ws(waiter_registry::max_lingering + 1);
  for (std::size_t i = 0; i < ws.size(); ++i) {
    reg.add("redisson_lock__channel:{" + std::to_string(i) + "}", &ws[i]);
  }
  for (std::size_t i = 0; i < ws.size(); ++i) {
    reg.remove("redisson_lock__channel:{" + std::to_string(i) + "}", &ws[i]);
  }
  EXPECT_EQ(reg.lingering(), waiter_registry::max_lingering);
  EXPECT_EQ(sub.unsubscribed, std::vector<listener_id>{sub.ids[0]}) << "the oldest";
  EXPECT_EQ(armed.size(), 1u) << "asked once, for the oldest";

  reg.drop_lingering();
  EXPECT_EQ(reg.lingering(), 0u);
  EXPECT_EQ(sub.unsubscribed.size(), ws.size());
  EXPECT_TRUE(sub.live.empty());
}

TEST_F(waiters_linger, a_refused_channel_never_lingers) {
  fake_waiter w1, w2, w3;
  reg.add(chan_a, &w1);
  sub.publish(chan_a, type::failed);
  EXPECT_EQ(w1.refusals, 1);
  reg.remove(chan_a, &w1);
  EXPECT_EQ(sub.unsubscribed, std::vector<listener_id>{sub.ids[0]}) << "refused: not kept";
  EXPECT_EQ(reg.lingering(), 0u);

  // Refused while lingering (a resubscription after a reconnect): counted, and let go.
  reg.add(chan_b, &w2);
  reg.remove(chan_b, &w2);
  ASSERT_EQ(reg.lingering(), 1u);
  sub.publish(chan_b, type::failed);
  EXPECT_EQ(reg.refused(), 2u);
  EXPECT_EQ(reg.lingering(), 0u);
  EXPECT_EQ(sub.unsubscribed.size(), 2u);
  reg.add(chan_b, &w3);
  EXPECT_EQ(sub.subscribed.back(), chan_b) << "a new waiter subscribes again";
  EXPECT_EQ(sub.subscribed.size(), 3u);
}

TEST_F(waiters_linger, zero_linger_unsubscribes_at_once) {
  reg.set_linger({}, {});
  fake_waiter w1;
  reg.add(chan_a, &w1);
  reg.remove(chan_a, &w1);
  EXPECT_EQ(sub.unsubscribed.size(), 1u);
  EXPECT_EQ(reg.lingering(), 0u);
}
