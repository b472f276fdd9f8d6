// dlock::mutex's leases against a real redis-server: the watchdog keeps a lock alive, an
// explicit lease is not renewed and its end is signalled, a renewal that finds the hold gone
// signals lease_lost, on_lost callbacks run (one that throws does not stop the client), an
// explicit-lease re-entry shortens no watchdog lock, and a failed unlock keeps the hold renewed.
// (Helpers: mutex_helpers.hpp.)
#include <gtest/gtest.h>

#include <asio/use_future.hpp>
#include <chrono>
#include <future>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>

#include "dlock/mutex.hpp"
#include "mutex_helpers.hpp"
#include "queued_waiter.hpp"
#include "support/redis_server.hpp"
#include "support/tcp_proxy.hpp"
#include "test_util.hpp"

using namespace std::chrono_literals;
using dlock::errc;
using steady = std::chrono::steady_clock;

namespace {

using namespace dlock::test;

TEST(mutex, watchdog_keeps_a_lock_alive_across_three_leases) {
  dlock::test::redis_server srv;
  dlock::client c{config_for(srv, "watchdog=600ms")};
  dlock::mutex m{c, dlock::test::unique_name("lock")};
  m.lock();
  auto lost = m.lease_lost();
  const auto end = steady::now() + 1800ms;  // 3 x the lease: time must pass, by design
  while (steady::now() < end) {
    ASSERT_EQ(exists(c, m.name()), 1);
    ASSERT_GT(m.remaining_lease().count(), 0);
    // Renewed every 200 ms: the local deadline never comes closer than half the lease (minus
    // the drift margin and a scheduling slop).
    ASSERT_GT(m.lease_time_left().count(), 150);
    ASSERT_LE(m.lease_time_left().count(), 600);
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_FALSE(lost.stop_requested());
  EXPECT_GE(impl(c).watchdog().renewals_sent(), 4u) << "every 200 ms";
  m.unlock();
  EXPECT_EQ(exists(c, m.name()), 0);
}

TEST(mutex, an_explicit_lease_is_not_renewed_and_its_end_is_signalled) {
  dlock::test::redis_server srv;
  dlock::client c{config_for(srv)};
  dlock::mutex m{c, dlock::test::unique_name("lock")};
  m.lock(400ms);
  auto lost = m.lease_lost();
  EXPECT_LE(m.remaining_lease().count(), 400);
  EXPECT_GT(m.lease_time_left().count(), 0);
  EXPECT_LE(m.lease_time_left().count(), 400 - 6) << "lease - drift (400/100 + 2 ms)";
  // The local deadline passes on the caller's clock, whatever the I/O thread is doing.
  std::this_thread::sleep_for(400ms);
  EXPECT_EQ(m.lease_time_left().count(), 0);
  EXPECT_TRUE(dlock::test::wait_until([&] { return exists(c, m.name()) == 0; }, 3s));
  EXPECT_TRUE(dlock::test::wait_until([&] { return lost.stop_requested(); }, 1s));
  EXPECT_EQ(impl(c).watchdog().renewals_sent(), 0u);
  std::error_code ec;
  m.unlock(ec);
  EXPECT_EQ(ec, errc::lease_lost);
}

// The hold vanishes behind the holder's back (DEL, eviction, failover): the next renewal finds
// it gone, lost() is requested, on_lost runs, and unlock reports lease_lost without touching
// the lock another owner holds by then.
TEST(mutex, renewal_finding_the_hold_gone_signals_lease_lost) {
  dlock::test::redis_server srv;
  dlock::client c{config_for(srv, "watchdog=900ms")}, other{config_for(srv)};
  const auto name = dlock::test::unique_name("lock");
  dlock::mutex m{c, name}, o{other, name};
  m.lock();
  auto lost = m.lease_lost();
  c.execute({"DEL", name});
  ASSERT_TRUE(o.try_lock());
  const auto theirs = other.execute({"HGETALL", name});
  EXPECT_TRUE(dlock::test::wait_until([&] { return lost.stop_requested(); }, 2s))
      << "within one renewal period (300 ms) plus slop";
  std::error_code ec;
  m.unlock(ec);
  EXPECT_EQ(ec, errc::lease_lost);
  EXPECT_EQ(other.execute({"HGETALL", name}), theirs);
  EXPECT_GT(impl(c).watchdog().leases_lost(), 0u);
  o.unlock();
}

TEST(mutex, lease_on_lost_runs_when_the_lease_goes) {
  dlock::test::redis_server srv;
  dlock::client c{config_for(srv)};
  dlock::mutex m{c, dlock::test::unique_name("lock")};
  auto l = m.async_lock_for(1s, 300ms, asio::use_future).get();
  std::promise<void> ran;
  l.on_lost([&] { ran.set_value(); });
  EXPECT_EQ(ran.get_future().wait_for(3s), std::future_status::ready);
  EXPECT_TRUE(l.lost().stop_requested());
  std::error_code ec;
  l.unlock(ec);
  EXPECT_EQ(ec, errc::lease_lost);
}

// Review finding: a re-entered explicit-lease hold was turned into a renewed one, and its short
// lease was applied (PEXPIRE) to the watchdog locks renewed in the same batch.
TEST(mutex, explicit_lease_reentry_neither_renews_it_nor_shortens_watchdog_locks) {
  dlock::test::redis_server srv;
  dlock::client c{config_for(srv, "watchdog=3s")};
  dlock::mutex a{c, dlock::test::unique_name("a")}, b{c, dlock::test::unique_name("b")};
  b.lock();  // watchdog lease, renewed every second
  a.lock(700ms);
  a.lock(700ms);  // re-entry: the lease is reset, still explicit
  auto a_lost = a.lease_lost();
  EXPECT_TRUE(dlock::test::wait_until([&] { return !a.is_locked(); }, 3s)) << "A ends at its lease";
  EXPECT_TRUE(dlock::test::wait_until([&] { return a_lost.stop_requested(); }, 1s));
  // Let B be renewed a few times (time must pass, by design), never below ~2/3 of 3 s.
  const auto end = steady::now() + 2500ms;
  while (steady::now() < end) {
    ASSERT_GT(b.remaining_lease().count(), 1500) << "B's renewal must use the watchdog lease";
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_FALSE(b.lease_lost().stop_requested());
  b.unlock();
}

// Review finding: a failed final unlock took the hold out of the watchdog for good; the lock,
// still held, then expired unrenewed while its holder was never told.
TEST(mutex, a_failed_unlock_keeps_the_hold_renewed) {
  dlock::test::redis_server srv;
  dlock::client c{config_for(srv, "watchdog=600ms")};
  dlock::mutex m{c, dlock::test::unique_name("lock")};
  m.lock();
  auto lost = m.lease_lost();
  // The final release's DEL is denied (ACLs apply to the commands a script calls); HEXISTS
  // and PEXPIRE, which renewals use, are not.
  srv.command({"ACL", "SETUSER", "default", "-del"});
  std::error_code ec;
  m.unlock(ec);
  EXPECT_EQ(ec, errc::no_permission);
  // Still held and still renewed across 3 leases (time must pass, by design).
  const auto end = steady::now() + 1800ms;
  while (steady::now() < end) {
    ASSERT_EQ(exists(c, m.name()), 1) << "the watchdog must go on renewing";
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_FALSE(lost.stop_requested());
  srv.command({"ACL", "SETUSER", "default", "+del"});
  m.unlock(ec);  // calling again is safe, and now succeeds
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_EQ(exists(c, m.name()), 0);
}

// Review finding: an on_lost callback that throws terminated the process.
TEST(mutex, a_throwing_on_lost_callback_does_not_stop_the_client) {
  dlock::test::redis_server srv;
  dlock::client c{config_for(srv)};
  dlock::mutex m{c, dlock::test::unique_name("lock")};
  auto l = m.async_lock_for(1s, 200ms, asio::use_future).get();
  std::promise<void> second;
  l.on_lost([] { throw std::runtime_error("user callback failed"); });
  l.on_lost([&] { second.set_value(); });
  EXPECT_EQ(second.get_future().wait_for(3s), std::future_status::ready);
  EXPECT_EQ(c.execute({"ECHO", "alive"}).str(), "alive");
}

}  // namespace

// std::lock_guard calls the throwing unlock() from its destructor: a lease lost under it, or a
// last release that cannot reach Redis, must not throw there (std::terminate), and the thread
// must be left holding nothing.
namespace guard_unlock {

TEST(mutex_guard, a_guard_over_a_lost_lease_or_an_unreachable_server_unlocks_without_throwing) {
  dlock::test::redis_server srv;
  dlock::test::tcp_proxy proxy{srv.port()};
  auto cfg = dlock::config::from_uri("redis://127.0.0.1:" + std::to_string(proxy.port()) +
                                     "?watchdog=600ms&timeout=100ms");
  dlock::client c{cfg};
  const auto name = dlock::test::unique_name("guard");
  dlock::mutex m{c, name};
  {
    std::lock_guard guard{m};
    c.execute({"DEL", name});  // lost under the guard
    EXPECT_TRUE(dlock::test::wait_until([&] { return m.lease_lost().stop_requested(); }, 2s));
  }
  EXPECT_FALSE(m.is_held_by_current_thread());
  {
    std::lock_guard guard{m};
    proxy.blackhole(dlock::test::direction::both);  // the release cannot get through
  }
  proxy.pass();
  EXPECT_THROW(m.unlock(), dlock::lock_error);  // holds nothing now: a caller's mistake
  // The abandoned hold is no longer renewed: its lease runs out and the lock is free again.
  dlock::client other{dlock::test::config_for(srv)};
  dlock::mutex next{other, name};
  EXPECT_TRUE(next.try_lock_for(3s));
  next.unlock();
}

}  // namespace guard_unlock
