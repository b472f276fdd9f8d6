// dlock::leased_semaphore and dlock::counting_semaphore in one process against a real
// redis-server: Redisson's layouts, N holders at most, leases renewed, reclaimed and lost,
// bounded waits (also when a message is lost), cancellation that leaks nothing, bad input.
// Across processes and with Redisson-protocol clients: semaphore_process_test.cpp.
#include <gtest/gtest.h>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/use_future.hpp>
#include <chrono>
#include <future>
#include <string>
#include <thread>

#include "dlock/counting_semaphore.hpp"
#include "dlock/keys.hpp"
#include "dlock/leased_semaphore.hpp"
#include "mutex_helpers.hpp"
#include "support/redis_server.hpp"
#include "support/tcp_proxy.hpp"
#include "test_util.hpp"

using namespace std::chrono_literals;
using dlock::errc;

namespace semaphore_tests {

using namespace dlock::test;
using clock_type = std::chrono::steady_clock;

std::int64_t number(dlock::client& c, std::vector<std::string> cmd) {
  return c.execute(std::move(cmd)).to_integer().value_or(-1);
}

std::int64_t ms_since(clock_type::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - t).count();
}

TEST(leased_semaphore, leaves_redissons_layout_and_counts_back_exactly) {
  redis_server srv;
  dlock::client c{config_for(srv)};
  dlock::leased_semaphore s{c, unique_name("sem")};
  EXPECT_EQ(s.available(), 0) << "no counter yet";
  EXPECT_TRUE(s.try_set_permits(2));
  EXPECT_FALSE(s.try_set_permits(5)) << "only if absent";
  auto p = s.try_acquire();
  ASSERT_TRUE(p);
  EXPECT_EQ(p.count(), 1u);
  ASSERT_EQ(p.ids().size(), 1u);
  EXPECT_EQ(p.ids()[0].size(), 32u);
  EXPECT_EQ(c.execute({"GET", s.name()}).str(), "1");
  const auto timeouts = dlock::keys::permit_timeouts(s.name());
  EXPECT_EQ(timeouts, "{" + s.name() + "}:timeout");
  const auto members = c.execute({"ZRANGE", timeouts, "0", "-1", "WITHSCORES"});
  ASSERT_EQ(members.elements().size(), 2u);
  EXPECT_EQ(members.elements()[0].str().size(), 16u) << "the raw 16 bytes, as Redisson stores";
  const auto now_ms = std::stoll(c.execute({"TIME"}).elements()[0].str()) * 1000;
  const auto deadline = std::stoll(members.elements()[1].str());
  EXPECT_GT(deadline, now_ms + 25'000) << "server time + the 30 s watchdog lease";
  EXPECT_LT(deadline, now_ms + 32'000);
  EXPECT_EQ(s.leased(), 1);
  auto two = s.try_acquire(2);
  EXPECT_FALSE(two) << "1 left";
  p.release();
  EXPECT_FALSE(p);
  EXPECT_EQ(s.available(), 2);
  EXPECT_EQ(s.leased(), 0);
  std::error_code ec;
  p.release(ec);
  EXPECT_EQ(ec, errc::not_owner);
  {
    auto both = s.try_acquire(2);
    EXPECT_EQ(both.count(), 2u);
    EXPECT_EQ(s.available(), 0);
  }  // released by its destructor, in the background
  ASSERT_TRUE(wait_until([&] { return s.available() == 2; }, 5s));
  s.add_permits(-1);
  EXPECT_EQ(s.available(), 1);
}

TEST(leased_semaphore, a_waiter_wakes_on_a_release_not_on_its_recheck) {
  redis_server srv;
  auto cfg = config_for(srv);
  cfg.wait_recheck = 20s;
  dlock::client c{cfg};
  dlock::leased_semaphore s{c, unique_name("sem")};
  s.try_set_permits(1);
  auto held = s.acquire();
  auto waiter = on_thread([&] { return s.try_acquire_for(10s).count(); });
  std::this_thread::sleep_for(300ms);
  const auto released = clock_type::now();
  held.release();
  EXPECT_EQ(waiter.get(), 1u);
  EXPECT_LT(ms_since(released), 3000) << "woken by redisson_sc:{name}";
}

// A permit whose holder stops renewing comes back when its lease ends: the waiter sleeps until
// the nearest deadline, and the late release reports lease_lost without adding a permit twice.
TEST(leased_semaphore, an_expired_permit_is_reclaimed_and_its_release_reports_lease_lost) {
  redis_server srv;
  auto cfg = config_for(srv);
  cfg.wait_recheck = 20s;
  dlock::client c{cfg};
  dlock::leased_semaphore s{c, unique_name("sem")};
  s.try_set_permits(1);
  auto stale = s.acquire(1, 400ms);
  const auto start = clock_type::now();
  auto next = s.try_acquire_for(5s);
  EXPECT_TRUE(next);
  EXPECT_LT(ms_since(start), 2000) << "woken at the nearest deadline";
  EXPECT_TRUE(stale.lost().stop_requested());
  std::error_code ec;
  stale.release(ec);
  EXPECT_EQ(ec, errc::lease_lost);
  EXPECT_EQ(s.available(), 0) << "the reclaimed permit is not added again";
  next.release();
  EXPECT_EQ(s.available(), 1);
}

TEST(leased_semaphore, the_watchdog_renews_a_permit_and_reports_it_lost) {
  redis_server srv;
  auto cfg = config_for(srv);
  cfg.watchdog_lease = 600ms;
  dlock::client c{cfg};
  dlock::leased_semaphore s{c, unique_name("sem")};
  s.try_set_permits(1);
  auto p = s.acquire();
  std::this_thread::sleep_for(1500ms);
  EXPECT_FALSE(p.lost().stop_requested()) << "renewed past its 600 ms lease";
  EXPECT_GT(p.time_left(), 0ms);
  EXPECT_FALSE(s.try_acquire());
  // Someone removes the permit (as a reclaim by a Redisson host with a fast clock would).
  c.execute({"DEL", dlock::keys::permit_timeouts(s.name())});
  ASSERT_TRUE(wait_until([&] { return p.lost().stop_requested(); }, 3s));
  EXPECT_EQ(p.time_left(), 0ms);
}

// A permit dropped while Redis is out of reach: its release (sent by the destructor, which waits
// for nobody) fails, and nothing would ever release it again. It must not go back to the
// watchdog, which would renew it for the client's life: its lease runs out and it comes back.
TEST(leased_semaphore, a_permit_whose_background_release_failed_is_not_renewed) {
  redis_server srv;
  dlock::test::tcp_proxy proxy{srv.port()};
  auto cfg = dlock::config::from_uri("redis://127.0.0.1:" + std::to_string(proxy.port()) +
                                     "?timeout=200ms&connect_timeout=200ms&health_check=0");
  cfg.reconnect_min = 10ms;
  cfg.reconnect_max = 100ms;
  cfg.watchdog_lease = 4s;
  dlock::client c{cfg};
  const auto name = unique_name("sem");
  dlock::leased_semaphore s{c, name};
  s.try_set_permits(1);
  {
    auto p = s.acquire();
    proxy.blackhole(dlock::test::direction::both);
  }  // the release goes out into the blackhole, and fails
  std::this_thread::sleep_for(2s);
  proxy.pass();
  const auto healed = clock_type::now();
  // Leased at most 4 s before the heal: reclaimed by then, unless renewed meanwhile.
  EXPECT_TRUE(wait_until(
      [&] {
        std::error_code ec;  // the client may still be reconnecting
        return s.available(ec) == 1;
      },
      8s))
      << "still leased " << ms_since(healed) << " ms after the heal";
}

TEST(leased_semaphore, waits_are_bounded_when_the_message_is_lost) {
  redis_server srv;
  auto cfg = config_for(srv);
  cfg.wait_recheck = 400ms;
  dlock::client c{cfg};
  dlock::leased_semaphore s{c, unique_name("sem")};
  c.execute({"SET", s.name(), "0"});
  auto waiter = on_thread([&] { return s.try_acquire_for(5s).count(); });
  std::this_thread::sleep_for(200ms);
  c.execute({"INCRBY", s.name(), "1"});  // a permit, without the message
  const auto added = clock_type::now();
  EXPECT_EQ(waiter.get(), 1u);
  EXPECT_LT(ms_since(added), 1500) << "found by the re-check";
}

TEST(leased_semaphore, cancelled_and_stopped_waits_end_at_once_and_leak_nothing) {
  redis_server srv;
  dlock::client c{config_for(srv)};
  dlock::leased_semaphore s{c, unique_name("sem")};
  s.try_set_permits(1);
  auto held = s.acquire();
  asio::cancellation_signal cancel;
  auto f = s.async_acquire(1, asio::bind_cancellation_slot(cancel.slot(), asio::use_future));
  std::this_thread::sleep_for(200ms);
  cancel.emit(asio::cancellation_type::terminal);
  try {
    f.get();
    ADD_FAILURE() << "acquired";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), asio::error::operation_aborted);
  }
  std::stop_source stop;
  auto stopped = on_thread([&] {
    std::error_code ec;
    auto p = s.acquire(stop.get_token(), 1, ec);
    return std::pair{ec, p.owns()};
  });
  std::this_thread::sleep_for(200ms);
  stop.request_stop();
  const auto [ec, owns] = stopped.get();
  EXPECT_EQ(ec, asio::error::operation_aborted);
  EXPECT_FALSE(owns);
  held.release();
  EXPECT_EQ(s.available(), 1);
  EXPECT_EQ(s.leased(), 0);
  auto async_got = s.async_acquire_for(1s, 1, asio::use_future).get();
  EXPECT_EQ(async_got.count(), 1u);
}

TEST(leased_semaphore, bad_input_is_a_typed_error) {
  redis_server srv;
  dlock::client c{config_for(srv)};
  dlock::leased_semaphore s{c, unique_name("sem")};
  s.try_set_permits(5);
  std::error_code ec;
  EXPECT_FALSE(s.try_acquire(0, ec));
  EXPECT_EQ(ec, errc::invalid_argument);
  EXPECT_FALSE(s.try_acquire(dlock::leased_semaphore::max_permits + 1, ec));
  EXPECT_EQ(ec, errc::invalid_argument);
  EXPECT_FALSE(s.acquire(1, 0ms, ec));
  EXPECT_EQ(ec, errc::invalid_argument);
  dlock::leased_semaphore unnamed{c, ""};
  EXPECT_FALSE(unnamed.try_acquire(1, ec));
  EXPECT_EQ(ec, errc::invalid_argument);
  EXPECT_THROW(unnamed.available(), dlock::lock_error);
  dlock::leased_semaphore hashed{c, unique_name("hash")};
  c.execute({"HSET", hashed.name(), "a", "1"});
  EXPECT_FALSE(hashed.try_acquire_for(2s, 1, ec));
  EXPECT_EQ(ec, errc::wrong_type) << "at once, never waited on";
  dlock::leased_semaphore text{c, unique_name("text")};
  c.execute({"SET", text.name(), "many"});
  EXPECT_FALSE(text.try_acquire(1, ec));
  EXPECT_TRUE(ec) << "not a permit count";
  EXPECT_FALSE(s.try_set_permits(-1, ec));
  EXPECT_EQ(ec, errc::invalid_argument);
  s.add_permits(std::int64_t{1} << 40, ec);
  EXPECT_EQ(ec, errc::invalid_argument) << "beyond Redisson's int";
  EXPECT_EQ(s.available(), 5) << "nothing taken by the refused calls";
}

TEST(counting_semaphore, is_redissons_counter_with_bounded_waits) {
  redis_server srv;
  auto cfg = config_for(srv);
  cfg.wait_recheck = 400ms;
  dlock::client c{cfg};
  dlock::counting_semaphore s{c, unique_name("csem")};
  EXPECT_FALSE(s.try_acquire()) << "no counter: no permits";
  EXPECT_TRUE(s.try_set_permits(2));
  EXPECT_TRUE(s.try_acquire(2));
  EXPECT_EQ(c.execute({"GET", s.name()}).str(), "0");
  EXPECT_FALSE(s.try_acquire_for(300ms));
  auto waiter = on_thread([&] { return s.try_acquire_for(10s); });
  std::this_thread::sleep_for(200ms);
  s.release();  // publishes the count: wakes the waiter
  EXPECT_TRUE(waiter.get());
  auto lost = on_thread([&] { return s.try_acquire_for(5s); });
  std::this_thread::sleep_for(200ms);
  c.execute({"INCRBY", s.name(), "1"});  // no message
  const auto added = clock_type::now();
  EXPECT_TRUE(lost.get());
  EXPECT_LT(ms_since(added), 1500);
  s.release(2);
  EXPECT_EQ(s.available(), 2);
  std::error_code ec;
  s.release(0, ec);
  EXPECT_EQ(ec, errc::invalid_argument);
  EXPECT_FALSE(s.try_acquire(0, ec));
  EXPECT_EQ(ec, errc::invalid_argument);
}

TEST(counting_semaphore, a_cancelled_wait_takes_nothing) {
  redis_server srv;
  dlock::client c{config_for(srv)};
  dlock::counting_semaphore s{c, unique_name("csem")};
  s.try_set_permits(0);
  std::stop_source stop;
  auto stopped = on_thread([&] {
    std::error_code ec;
    s.acquire(stop.get_token(), 1, ec);
    return ec;
  });
  std::this_thread::sleep_for(200ms);
  stop.request_stop();
  EXPECT_EQ(stopped.get(), asio::error::operation_aborted);
  asio::cancellation_signal cancel;
  auto f = s.async_acquire(1, asio::bind_cancellation_slot(cancel.slot(), asio::use_future));
  std::this_thread::sleep_for(100ms);
  cancel.emit(asio::cancellation_type::terminal);
  EXPECT_THROW(f.get(), std::system_error);
  s.add_permits(1);
  EXPECT_EQ(s.available(), 1);
  s.async_acquire_for(1s, 1, asio::use_future).get();
  EXPECT_EQ(s.available(), 0);
}

}  // namespace semaphore_tests
