// detail::waiter_registry: which channels a lock name's waiters subscribe, and whom each pub/sub
// event wakes, with a fake subscriber (it keeps the listeners to feed them events) and fake
// waiters that count their wake-ups.
#include "runtime/waiters.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "dlock/error.hpp"
#include "dlock/keys.hpp"
#include "transport/subscriptions.hpp"
#include "waiters_fixture.hpp"

namespace {

using namespace waiters_fixture;
using namespace std::chrono_literals;

using waiters = fixture;

TEST_F(waiters, the_channel_names_are_the_keys_ones) {
  EXPECT_EQ(dlock::keys::waiter_channel(lock_name, client), waiter_ch);
  EXPECT_EQ(dlock::keys::dlock_channel(lock_name), dlock_ch);
  EXPECT_EQ(dlock::keys::lock_channel(lock_name), redisson_ch);
}

TEST_F(waiters, the_first_waiter_subscribes_three_channels_in_one_command_redissons_last) {
  fake_waiter a{reg.make_ticket()}, b{reg.make_ticket()};
  EXPECT_EQ(reg.names(), 0u);
  EXPECT_FALSE(reg.add(mutex_topic, &a));
  EXPECT_EQ(subscribed, (std::vector<std::string>{waiter_ch, dlock_ch, redisson_ch}));
  EXPECT_EQ(subscribe_calls, 1);
  EXPECT_EQ(reg.names(), 1u);
  EXPECT_FALSE(reg.add(mutex_topic, &b));
  EXPECT_EQ(subscribed.size(), 3u) << "the second waiter subscribes nothing";
  EXPECT_EQ(reg.waiters(lock_name), 2u);
  EXPECT_TRUE(unsubscribed.empty());
}

TEST_F(waiters, the_last_waiter_to_leave_unsubscribes_all_three_in_one_command) {
  fake_waiter a{reg.make_ticket()}, b{reg.make_ticket()};
  reg.add(mutex_topic, &a);
  reg.add(mutex_topic, &b);
  reg.remove(mutex_topic, &a);
  EXPECT_TRUE(unsubscribed.empty());
  EXPECT_EQ(reg.waiters(lock_name), 1u);
  reg.remove(mutex_topic, &b);
  EXPECT_EQ(std::multiset<listener_id>(unsubscribed.begin(), unsubscribed.end()),
            std::multiset<listener_id>(ids.begin(), ids.end()));
  EXPECT_TRUE(live.empty());
  EXPECT_EQ(reg.waiters(lock_name), 0u);
  EXPECT_EQ(reg.names(), 0u);
  EXPECT_EQ(unsubscribe_calls, 1);
  reg.remove(mutex_topic, &b);  // again: nothing
  reg.remove({.name = "other", .owner = {}}, &b);
  EXPECT_EQ(unsubscribed.size(), 3u);
  EXPECT_EQ(unsubscribe_calls, 1);
  // A later waiter subscribes again.
  reg.add(mutex_topic, &a);
  EXPECT_EQ(subscribed.size(), 6u);
  EXPECT_EQ(live.size(), 3u);
}

TEST_F(waiters, names_are_independent) {
  fake_waiter a{reg.make_ticket()}, b{reg.make_ticket()};
  reg.add(mutex_topic, &a);
  reg.add({.name = "other", .owner = {}}, &b);
  EXPECT_EQ(reg.names(), 2u);
  EXPECT_EQ(subscribed.size(), 6u);
  EXPECT_EQ(message(redisson_ch, "1"), 1);
  EXPECT_EQ(a.wakes.size(), 1u);
  EXPECT_TRUE(b.wakes.empty());
}

TEST_F(waiters, a_ticket_on_the_waiter_channel_wakes_exactly_that_waiter) {
  fake_waiter a{reg.make_ticket()}, b{reg.make_ticket()}, c{reg.make_ticket()};
  reg.add(mutex_topic, &a);
  reg.add(mutex_topic, &b);
  reg.add(mutex_topic, &c);
  EXPECT_EQ(message(waiter_ch, std::to_string(b.ticket)), 1);
  EXPECT_TRUE(a.wakes.empty());
  EXPECT_EQ(b.wakes, std::vector<bool>{false}) << "a hand-off is not foreign";
  EXPECT_TRUE(c.wakes.empty());
  EXPECT_TRUE(b.wake_bys.empty());
}

TEST_F(waiters, messages_that_are_no_ticket_wake_nobody_on_the_waiter_channel) {
  fake_waiter a{reg.make_ticket()};
  reg.add(mutex_topic, &a);
  for (std::string_view payload : {"0", "1", "y", "", "abc", "-1", "4294967295"}) {
    message(waiter_ch, payload);
  }
  EXPECT_TRUE(a.wakes.empty());
  EXPECT_TRUE(a.wake_bys.empty());
}

// The hand-off message may overtake the reply that queued the waiter: add() reports it.
TEST_F(waiters, a_ticket_for_an_unregistered_waiter_is_remembered_for_add) {
  fake_waiter a{reg.make_ticket()}, late{reg.make_ticket()}, other{reg.make_ticket()};
  reg.add(mutex_topic, &a);
  message(waiter_ch, std::to_string(late.ticket));
  EXPECT_TRUE(a.wakes.empty());
  EXPECT_FALSE(reg.add(mutex_topic, &other));
  EXPECT_TRUE(reg.add(mutex_topic, &late));
  EXPECT_TRUE(late.wakes.empty()) << "add() reports it; the caller wakes it";
  reg.remove(mutex_topic, &late);
  EXPECT_FALSE(reg.add(mutex_topic, &late)) << "reported once";
  fake_waiter no_ticket;
  EXPECT_FALSE(reg.add(mutex_topic, &no_ticket));
}

TEST_F(waiters, remembered_tickets_are_bounded_the_oldest_dropped) {
  fake_waiter a{reg.make_ticket()};
  reg.add(mutex_topic, &a);
  std::vector<fake_waiter> late;
  late.reserve(65);
  for (int i = 0; i < 65; ++i) late.emplace_back(reg.make_ticket());
  for (auto& w : late) message(waiter_ch, std::to_string(w.ticket));
  EXPECT_FALSE(reg.add(mutex_topic, &late[0])) << "the 65th dropped the first";
  for (std::size_t i = 1; i < 65; ++i) EXPECT_TRUE(reg.add(mutex_topic, &late[i])) << i;
}

TEST_F(waiters, zero_wakes_one_waiter_in_turn_as_foreign) {
  fake_waiter a{reg.make_ticket()}, b{reg.make_ticket()}, c{reg.make_ticket()};
  reg.add(mutex_topic, &a);
  reg.add(mutex_topic, &b);
  reg.add(mutex_topic, &c);
  for (int i = 0; i < 7; ++i) message(redisson_ch, "0");
  EXPECT_EQ(a.wakes, (std::vector<bool>{true, true, true}));
  EXPECT_EQ(b.wakes, (std::vector<bool>{true, true}));
  EXPECT_EQ(c.wakes, (std::vector<bool>{true, true}));
  // The order: a, b, c, a, b, c, a — the next `0` is b's.
  message(redisson_ch, "0");
  EXPECT_EQ(b.wakes.size(), 3u);
  EXPECT_EQ(a.wakes.size(), 3u);
}

TEST_F(waiters, zero_takes_a_waiter_that_left_out_of_the_turn) {
  fake_waiter a{reg.make_ticket()}, b{reg.make_ticket()};
  reg.add(mutex_topic, &a);
  reg.add(mutex_topic, &b);
  reg.remove(mutex_topic, &a);
  message(redisson_ch, "0");
  message(redisson_ch, "0");
  EXPECT_TRUE(a.wakes.empty());
  EXPECT_EQ(b.wakes.size(), 2u);
}

TEST_F(waiters, one_wakes_all_as_foreign) {
  fake_waiter a{reg.make_ticket()}, b{reg.make_ticket()};
  reg.add(mutex_topic, &a);
  reg.add(mutex_topic, &b);
  message(redisson_ch, "1");
  EXPECT_EQ(a.wakes, std::vector<bool>{true});
  EXPECT_EQ(b.wakes, std::vector<bool>{true});
  message(redisson_ch, "2");  // not an unlock message
  message(redisson_ch, std::to_string(a.ticket));
  EXPECT_EQ(a.wakes.size(), 1u);
  EXPECT_EQ(b.wakes.size(), 1u);
}

TEST_F(waiters, y_defers_every_waiter_by_the_yield_and_skips_only_the_next_zero) {
  fake_waiter a{reg.make_ticket()}, b{reg.make_ticket()};
  reg.add(mutex_topic, &a);
  reg.add(mutex_topic, &b);
  const auto before = clock_type::now();
  EXPECT_EQ(message(dlock_ch, "y"), 1);
  const auto after = clock_type::now();
  for (auto* w : {&a, &b}) {
    ASSERT_EQ(w->wake_bys.size(), 1u);
    EXPECT_GE(w->wake_bys[0], before + 21ms);
    EXPECT_LE(w->wake_bys[0], after + 21ms);
    EXPECT_TRUE(w->wakes.empty());
  }
  message(redisson_ch, "0");  // Redisson's waiters'
  EXPECT_TRUE(a.wakes.empty());
  EXPECT_TRUE(b.wakes.empty());
  message(redisson_ch, "0");  // the one after is dlock's again
  EXPECT_EQ(a.wakes, std::vector<bool>{true});
  EXPECT_TRUE(b.wakes.empty());
  message(redisson_ch, "0");
  EXPECT_EQ(b.wakes, std::vector<bool>{true});
}

TEST_F(waiters, other_messages_on_the_dlock_channel_do_nothing) {
  fake_waiter a{reg.make_ticket()};
  reg.add(mutex_topic, &a);
  for (std::string_view payload : {"0", "1", "Y", "yy", ""}) message(dlock_ch, payload);
  EXPECT_TRUE(a.wake_bys.empty());
  EXPECT_TRUE(a.wakes.empty());
  message(redisson_ch, "0");
  EXPECT_EQ(a.wakes.size(), 1u) << "no `0` skipped";
}

TEST_F(waiters, redissons_confirmation_wakes_all_the_others_do_not) {
  fake_waiter a{reg.make_ticket()}, b{reg.make_ticket()};
  reg.add(mutex_topic, &a);
  reg.add(mutex_topic, &b);
  publish(waiter_ch, type::subscribed);
  publish(dlock_ch, type::subscribed);
  EXPECT_TRUE(a.wakes.empty());
  EXPECT_TRUE(b.wakes.empty());
  publish(redisson_ch, type::subscribed);
  EXPECT_EQ(a.wakes, std::vector<bool>{false});
  EXPECT_EQ(b.wakes, std::vector<bool>{false});
}

TEST_F(waiters, a_resubscription_of_any_channel_wakes_all) {
  fake_waiter a{reg.make_ticket()}, b{reg.make_ticket()};
  reg.add(mutex_topic, &a);
  reg.add(mutex_topic, &b);
  for (const auto& ch : {waiter_ch, dlock_ch, redisson_ch}) {
    publish(ch, type::resubscribed);
    EXPECT_FALSE(a.wakes.back()) << ch;
  }
  EXPECT_EQ(a.wakes.size(), 3u);
  EXPECT_EQ(b.wakes.size(), 3u);
}

TEST_F(waiters, refusals_are_counted_and_reported_once) {
  fake_waiter a{reg.make_ticket()}, b{reg.make_ticket()};
  reg.add(mutex_topic, &a);
  reg.add({.name = "other", .owner = {}}, &b);
  EXPECT_EQ(reg.refused(), 0u);
  const std::error_code denied = dlock::errc::no_permission;
  for (const auto& ch : {waiter_ch, dlock_ch, redisson_ch}) publish(ch, type::failed, {}, denied);
  publish(dlock::keys::lock_channel("other"), type::failed, {}, denied);
  EXPECT_EQ(reg.refused(), 4u);
  EXPECT_EQ(refusals, std::vector<std::error_code>{denied});
  EXPECT_TRUE(a.wakes.empty()) << "a refusal wakes nobody: waiters fall back to re-checks";
}

TEST_F(waiters, a_waiter_that_leaves_while_woken_does_not_break_wake_all) {
  struct leaving : fake_waiter {
    waiter_registry* reg = nullptr;
    void wake(bool foreign) override {
      fake_waiter::wake(foreign);
      reg->remove(mutex_topic, this);
    }
  } a;
  a.ticket = reg.make_ticket();
  a.reg = &reg;
  fake_waiter b{reg.make_ticket()};
  reg.add(mutex_topic, &a);
  reg.add(mutex_topic, &b);
  message(redisson_ch, "1");
  EXPECT_EQ(a.wakes.size(), 1u);
  EXPECT_EQ(b.wakes.size(), 1u);
  EXPECT_EQ(reg.waiters(lock_name), 1u);
}

TEST_F(waiters, events_after_the_last_waiter_left_are_ignored) {
  fake_waiter a{reg.make_ticket()};
  reg.add(mutex_topic, &a);
  std::vector<pubsub_listener> kept;
  for (auto& [id, l] : live) kept.push_back(l.second);
  reg.remove(mutex_topic, &a);
  for (auto& l : kept) {
    l(pubsub_event{type::message, {}, {}, "1", {}});
    l(pubsub_event{type::resubscribed, {}, {}, {}, {}});
  }
  EXPECT_TRUE(a.wakes.empty());
}

// ---------------------------------------------------------------------------------------------
// Tickets

TEST(waiter_tickets, have_a_nonzero_high_half_and_parse_back) {
  waiter_registry reg{{}, {}, {}, client};
  std::set<std::uint64_t> seen;
  for (int i = 0; i < 1000; ++i) {
    const auto t = reg.make_ticket();
    EXPECT_NE(t >> 32, 0u) << t;
    EXPECT_NE(t & 0xffffffffu, 0u) << t;
    EXPECT_LT(t, std::uint64_t{1} << 63) << "fits a Java long";
    EXPECT_TRUE(seen.insert(t).second) << "repeated: " << t;
    EXPECT_EQ(waiter_registry::parse_ticket(std::to_string(t)), t);
  }
}

TEST(waiter_tickets, are_unique_across_threads) {
  waiter_registry reg{{}, {}, {}, client};
  std::vector<std::vector<std::uint64_t>> made(4);
  {
    std::vector<std::jthread> threads;
    for (auto& out : made) {
      threads.emplace_back([&reg, &out] {
        for (int i = 0; i < 5000; ++i) out.push_back(reg.make_ticket());
      });
    }
  }
  std::set<std::uint64_t> all;
  for (auto& v : made) all.insert(v.begin(), v.end());
  EXPECT_EQ(all.size(), 20'000u);
}

TEST(waiter_tickets, parse_rejects_what_is_no_ticket) {
  for (std::string_view text :
       {"0", "1", "-5", "12a", "", " 4294967296", "4294967296 ", "+4294967296", "4294967295",
        "18446744073709551615", "10000000000000000000", "99999999999999999999", "0x100000000"}) {
    EXPECT_EQ(waiter_registry::parse_ticket(text), 0u) << '"' << text << '"';
  }
  EXPECT_EQ(waiter_registry::parse_ticket("4294967296"), 4294967296u);
  EXPECT_EQ(waiter_registry::parse_ticket("9223372036854775807"), 9223372036854775807u);
}

}  // namespace
