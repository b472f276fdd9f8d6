// dlock::latch in one process against a real redis-server: Redisson's RCountDownLatch layout and
// messages, an absent latch reading as open, bounded waits (also when the `0` is lost, and when
// the counter expires), cancellation, count_down past zero, bad input.
#include "dlock/latch.hpp"

#include <gtest/gtest.h>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/use_future.hpp>
#include <chrono>
#include <future>
#include <string>
#include <thread>

#include "dlock/keys.hpp"
#include "mutex_helpers.hpp"
#include "support/redis_server.hpp"
#include "test_util.hpp"

using namespace std::chrono_literals;
using dlock::errc;

namespace latch_tests {

using namespace dlock::test;
using clock_type = std::chrono::steady_clock;

std::int64_t ms_since(clock_type::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - t).count();
}

TEST(latch, an_absent_latch_is_open_and_a_set_one_opens_at_zero) {
  redis_server srv;
  auto cfg = config_for(srv);
  cfg.wait_recheck = 20s;
  dlock::client c{cfg};
  dlock::latch l{c, unique_name("latch")};
  EXPECT_TRUE(l.try_wait()) << "absent reads as 0";
  l.wait();  // returns at once
  EXPECT_EQ(l.count(), 0);
  EXPECT_TRUE(l.try_set_count(2));
  EXPECT_FALSE(l.try_set_count(3));
  EXPECT_EQ(c.execute({"GET", l.name()}).str(), "2");
  EXPECT_FALSE(l.try_wait());
  EXPECT_FALSE(l.wait_for(200ms));
  auto waiter = on_thread([&] { return l.wait_for(10s); });
  auto async_waiter = l.async_wait_for(10s, asio::use_future);
  l.count_down();
  EXPECT_EQ(l.count(), 1);
  std::this_thread::sleep_for(200ms);
  const auto opened = clock_type::now();
  l.count_down();
  EXPECT_TRUE(waiter.get());
  async_waiter.get();
  EXPECT_LT(ms_since(opened), 3000) << "woken by `0`, not by the 20 s re-check";
  EXPECT_EQ(c.execute({"EXISTS", l.name()}).integer(), 0) << "deleted at zero";
}

TEST(latch, counting_past_zero_still_publishes_the_opening) {
  redis_server srv;
  auto cfg = config_for(srv);
  cfg.wait_recheck = 20s;
  dlock::client c{cfg};
  dlock::latch l{c, unique_name("latch")};
  l.try_set_count(2);
  auto waiter = on_thread([&] { return l.wait_for(10s); });
  std::this_thread::sleep_for(300ms);
  const auto opened = clock_type::now();
  l.count_down(5);  // 2 -> -3: Redisson would publish nothing
  EXPECT_TRUE(waiter.get());
  EXPECT_LT(ms_since(opened), 3000) << "woken by `0`, not by the 20 s re-check";
  EXPECT_TRUE(l.try_wait());
  std::error_code ec;
  l.count_down(0, ec);
  EXPECT_EQ(ec, errc::invalid_argument);
  EXPECT_FALSE(l.try_set_count(0, ec));
  EXPECT_EQ(ec, errc::invalid_argument);
}

TEST(latch, waits_are_bounded_when_the_opening_is_not_heard) {
  redis_server srv;
  auto cfg = config_for(srv);
  cfg.wait_recheck = 400ms;
  dlock::client c{cfg};
  dlock::latch l{c, unique_name("latch")};
  l.try_set_count(1);
  auto waiter = on_thread([&] { return l.wait_for(5s); });
  std::this_thread::sleep_for(200ms);
  c.execute({"DEL", l.name()});  // opened without the message
  const auto opened = clock_type::now();
  EXPECT_TRUE(waiter.get());
  EXPECT_LT(ms_since(opened), 1500);
  // A counter with an expiry opens when it expires: the waiter sleeps until then.
  auto cfg2 = config_for(srv);
  cfg2.wait_recheck = 20s;
  dlock::client c2{cfg2};
  dlock::latch expiring{c2, unique_name("latch")};
  c2.execute({"SET", expiring.name(), "3", "PX", "500"});
  const auto start = clock_type::now();
  EXPECT_TRUE(expiring.wait_for(5s));
  EXPECT_LT(ms_since(start), 2000);
}

TEST(latch, waits_end_when_cancelled_or_stopped) {
  redis_server srv;
  dlock::client c{config_for(srv)};
  dlock::latch l{c, unique_name("latch")};
  l.try_set_count(1);
  std::stop_source stop;
  auto stopped = on_thread([&] {
    std::error_code ec;
    l.wait(stop.get_token(), ec);
    return ec;
  });
  asio::cancellation_signal cancel;
  auto f = l.async_wait(asio::bind_cancellation_slot(cancel.slot(), asio::use_future));
  std::this_thread::sleep_for(200ms);
  stop.request_stop();
  cancel.emit(asio::cancellation_type::terminal);
  EXPECT_EQ(stopped.get(), asio::error::operation_aborted);
  EXPECT_THROW(f.get(), std::system_error);
  EXPECT_EQ(l.count(), 1) << "waiting takes nothing";
  std::error_code ec;
  dlock::latch bad{c, ""};
  EXPECT_FALSE(bad.try_wait(ec));
  EXPECT_EQ(ec, errc::invalid_argument);
  dlock::latch text{c, unique_name("text")};
  c.execute({"SET", text.name(), "many"});
  EXPECT_FALSE(text.wait_for(1s, ec));
  EXPECT_TRUE(ec) << "not a count: an error at once";
  l.arrive_and_wait();
  EXPECT_TRUE(l.try_wait());
}

}  // namespace latch_tests
