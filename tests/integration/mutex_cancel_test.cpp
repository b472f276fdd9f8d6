// dlock::mutex against a real redis-server: cancellation (Asio per-operation cancellation, a
// std::stop_token), deadlines kept, lock names whose keys cannot share a cluster slot, the checks
// of explicit leases, trust capped by the key's PTTL after a reconnect, and a re-entry abandoned
// after Redis applied it.
#include <gtest/gtest.h>

#include <asio/co_spawn.hpp>
#include <asio/error.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/experimental/awaitable_operators.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/use_future.hpp>
#include <chrono>
#include <future>
#include <stop_token>
#include <string>
#include <variant>

#include "dlock/keys.hpp"
#include "dlock/mutex.hpp"
#include "queued_waiter.hpp"
#include "runtime/owner.hpp"
#include "support/async_code.hpp"
#include "support/redis_server.hpp"
#include "support/tcp_proxy.hpp"
#include "test_util.hpp"

using namespace std::chrono_literals;
using dlock::errc;
using steady = std::chrono::steady_clock;

namespace {

using dlock::test::config_for;
using dlock::test::impl;

// How late a call may return after its deadline or its cancellation: a round trip to the
// client's I/O thread and the scheduling of a loaded host (twice that under sanitizers).
#ifdef DLOCK_TEST_SANITIZED
constexpr auto slack = 100ms;
#else
constexpr auto slack = 50ms;
#endif

template <class F>
auto on_thread(F f) {
  return std::async(std::launch::async, std::move(f));
}

// The owner field of the calling thread's holds on client `c`.
std::string own_field(dlock::client& c) {
  return dlock::detail::owner_field(c.id(), dlock::detail::this_thread_number());
}

// Nothing of a cancelled waiter remains: the lock hash holds `holder_fields` alone, and the
// waiter left the queue (its give-back runs in the background: polled, bounded).
void expect_nothing_left_by_the_waiter(dlock::test::redis_server& srv, const std::string& name,
                                       const std::string& holder_fields) {
  EXPECT_EQ(srv.command({"HGETALL", name}), holder_fields);
  EXPECT_TRUE(dlock::test::wait_until(
      [&] {
        return srv.command({"EXISTS", dlock::keys::waiter_queue(name)}) == ":0";
      },
      2s))
      << srv.command({"ZRANGE", dlock::keys::waiter_queue(name), "0", "-1"});
  EXPECT_TRUE(dlock::test::wait_until(
      [&] {
        return srv.command({"EXISTS", dlock::keys::waiter_records(name)}) == ":0";
      },
      2s));
  EXPECT_EQ(srv.command({"HGETALL", name}), holder_fields);
}

// `async_lock(use_awaitable) || timer.async_wait(use_awaitable)` (Asio's awaitable operators)
// with the lock held elsewhere: the expression completes when the timer fires, the lock's branch
// having completed with operation_aborted, and the cancelled waiter holds nothing and leaves the
// queue — the holder's unlock then frees the lock (no hand-off to a waiter that is gone).
TEST(mutex_cancel, an_awaited_lock_raced_against_a_timer_returns_when_the_timer_fires) {
  using namespace asio::experimental::awaitable_operators;
  dlock::test::holder_and_waiter l;
  auto& [srv, name, holder, waiter, h, w] = l;
  h.lock();
  const auto holder_fields = "[" + own_field(holder) + ", 1]";
  constexpr auto timeout = 300ms;
  asio::io_context ioc;

  // The expression as an application writes it: which branch won, and when.
  auto plain = [&]() -> asio::awaitable<std::pair<std::size_t, steady::duration>> {
    asio::steady_timer timer{co_await asio::this_coro::executor, timeout};
    const auto start = steady::now();
    auto won =
        co_await (w.async_lock(asio::use_awaitable) || timer.async_wait(asio::use_awaitable));
    co_return std::pair{won.index(), steady::now() - start};
  };
  auto first = asio::co_spawn(ioc, plain(), asio::use_future);
  ioc.run_for(10s);
  ASSERT_EQ(first.wait_for(0s), std::future_status::ready);
  const auto [winner, took] = first.get();
  EXPECT_EQ(winner, 1u) << "the timer's branch";
  EXPECT_GE(took, timeout);
  EXPECT_LT(took, timeout + slack);
  expect_nothing_left_by_the_waiter(srv, name, holder_fields);

  // The same with the lock's branch in a coroutine of its own, to see how it completed.
  std::error_code lock_ec;
  bool owned = true;
  auto locking = [&]() -> asio::awaitable<void> {
    auto [ec, lease] = co_await w.async_lock(asio::experimental::as_tuple(asio::use_awaitable));
    lock_ec = ec;
    owned = lease.owns();
  };
  auto observed = [&]() -> asio::awaitable<steady::duration> {
    asio::steady_timer timer{co_await asio::this_coro::executor, timeout};
    const auto start = steady::now();
    co_await (locking() || timer.async_wait(asio::use_awaitable));
    co_return steady::now() - start;
  };
  ioc.restart();
  auto second = asio::co_spawn(ioc, observed(), asio::use_future);
  ioc.run_for(10s);
  ASSERT_EQ(second.wait_for(0s), std::future_status::ready);
  const auto took2 = second.get();
  EXPECT_EQ(lock_ec, asio::error::operation_aborted) << lock_ec.message();
  EXPECT_FALSE(owned);
  EXPECT_GE(took2, timeout);
  EXPECT_LT(took2, timeout + slack);
  expect_nothing_left_by_the_waiter(srv, name, holder_fields);

  h.unlock();
  EXPECT_EQ(srv.command({"EXISTS", name}), ":0") << "freed, handed to nobody";
}

// mutex::lock(std::stop_token) (Redisson's lockInterruptibly): a thread blocked in it returns
// with operation_aborted as soon as a stop is requested, holding nothing; a token stopped already
// makes it return at once.
TEST(mutex_cancel, lock_with_a_stop_token_returns_when_a_stop_is_requested) {
  dlock::test::holder_and_waiter l;
  auto& [srv, name, holder, waiter, h, w] = l;
  h.lock();
  const auto holder_fields = "[" + own_field(holder) + ", 1]";
  std::stop_source stop;
  auto t = on_thread([&] {
    std::error_code ec;
    w.lock(stop.get_token(), ec);
    const auto returned = steady::now();
    return std::tuple{ec, returned, w.fencing_token(), w.lease_time_left()};
  });
  ASSERT_NO_FATAL_FAILURE(dlock::test::await_queued_waiter(srv, waiter, name));
  const auto requested = steady::now();
  stop.request_stop();
  ASSERT_EQ(t.wait_for(5s), std::future_status::ready);
  const auto [ec, returned, token, left] = t.get();
  EXPECT_EQ(ec, asio::error::operation_aborted) << ec.message();
  EXPECT_LT(returned - requested, slack);
  EXPECT_EQ(token, 0u) << "the stopped thread holds nothing";
  EXPECT_EQ(left, 0ms);
  expect_nothing_left_by_the_waiter(srv, name, holder_fields);

  auto again = on_thread([&] {
    std::error_code e;
    const auto start = steady::now();
    w.lock(stop.get_token(), e);  // stopped already
    return std::pair{e, steady::now() - start};
  });
  ASSERT_EQ(again.wait_for(5s), std::future_status::ready);
  const auto [e, took] = again.get();
  EXPECT_EQ(e, asio::error::operation_aborted) << e.message();
  EXPECT_LT(took, slack + 50ms) << "at most one attempt's round trip";
  expect_nothing_left_by_the_waiter(srv, name, holder_fields);
  h.unlock();
  EXPECT_EQ(srv.command({"EXISTS", name}), ":0");
}

// A name whose derived keys cannot hash to its own cluster slot (an unbalanced or empty hash
// tag) is refused by every form; a name with a hash tag keeps it, and works end to end
// (a hand-off through its queue and channels included).
TEST(mutex_cancel, names_whose_keys_cannot_share_its_slot_are_refused) {
  dlock::test::holder_and_waiter l;
  auto& [srv, unused_name, holder, waiter, h, w] = l;
  for (const std::string bad : {"a{b", "x{}y", "a}b"}) {
    SCOPED_TRACE(bad);
    EXPECT_FALSE(dlock::keys::same_slot(bad));
    dlock::mutex m{holder, bad};
    std::error_code ec;
    m.lock(ec);
    EXPECT_EQ(ec, errc::invalid_argument);
    EXPECT_FALSE(m.try_lock(ec));
    EXPECT_EQ(ec, errc::invalid_argument);
    auto f = dlock::test::async_code([&](auto done) { m.async_lock(std::move(done)); });
    ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
    EXPECT_EQ(f.get(), errc::invalid_argument);
  }
  EXPECT_EQ(srv.command({"DBSIZE"}), ":0") << "nothing was written";

  const std::string name = "orders{42}";
  ASSERT_TRUE(dlock::keys::same_slot(name));
  EXPECT_EQ(dlock::keys::waiter_queue(name), "dlock_lock_queue:orders{42}");
  dlock::mutex a{holder, name}, b{waiter, name};
  a.lock();
  EXPECT_GT(a.fencing_token(), 0u);
  EXPECT_EQ(srv.command({"HGETALL", name}), "[" + own_field(holder) + ", 1]");
  auto t = on_thread([&] {
    const bool got = b.try_lock_for(10s);
    if (got) b.unlock();
    return got;
  });
  ASSERT_NO_FATAL_FAILURE(dlock::test::await_queued_waiter(srv, waiter, name));
  a.unlock();
  ASSERT_EQ(t.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(t.get());
  EXPECT_EQ(srv.command({"EXISTS", name}), ":0");
}

// A hold with an explicit lease is not renewed but checked every third of its lease: a hold that
// vanished behind the holder's back (DEL, eviction, a failover) is noticed then, not when the
// lease would have ended.
TEST(mutex_cancel, an_explicit_lease_hold_is_checked_every_third_of_its_lease) {
  dlock::test::redis_server srv;
  dlock::client c{config_for(srv)};
  const auto name = dlock::test::unique_name("lock");
  dlock::mutex m{c, name};
  constexpr auto lease = 3s;
  m.lock(lease);
  const auto locked = steady::now();
  auto lost = m.lease_lost();
  srv.command({"DEL", name});
  ASSERT_TRUE(dlock::test::wait_until([&] { return lost.stop_requested(); }, 5s));
  const auto noticed = steady::now() - locked;
  EXPECT_LT(noticed, lease / 3 + 300ms) << "by the first check, not the lease's end";
  EXPECT_EQ(m.lease_time_left(), 0ms);
  EXPECT_EQ(impl(c).watchdog().renewals_sent(), 0u) << "checked, never renewed";
  std::error_code ec;
  m.unlock(ec);
  EXPECT_EQ(ec, errc::lease_lost);
}

// A connection dropped and made again (the server may have restarted or failed over meanwhile)
// makes the client check every hold at once, capping its trust by the key's PTTL: a key that now
// ends sooner than the client believed is trusted no longer than that. Here the key is shortened
// to 2 s behind the holder's back, then the client's connections are killed.
TEST(mutex_cancel, a_reconnect_caps_the_trust_of_a_hold_by_its_pttl) {
  dlock::test::redis_server srv;
  dlock::client c{config_for(srv)};
  const auto name = dlock::test::unique_name("lock");
  dlock::mutex m{c, name};
  m.lock(30s);  // explicit: checked, never renewed (a watchdog hold is renewed: see below)
  auto lost = m.lease_lost();
  EXPECT_GT(m.lease_time_left(), 25s);
  const auto connects = impl(c).connection().connects();
  ASSERT_EQ(srv.command({"PEXPIRE", name, "2000"}), ":1");
  const auto shortened = steady::now();
  srv.command({"CLIENT", "KILL", "TYPE", "normal"});
  ASSERT_TRUE(
      dlock::test::wait_until([&] { return impl(c).connection().connects() > connects; }, 5s));
  EXPECT_TRUE(dlock::test::wait_until([&] { return m.lease_time_left() <= 2000ms; }, 2s))
      << m.lease_time_left().count() << " ms left";
  EXPECT_LE(m.lease_time_left(), 2000ms - (steady::now() - shortened));
  // The key ends at 2 s: so does the hold.
  EXPECT_TRUE(dlock::test::wait_until([&] { return lost.stop_requested(); }, 3s));
  EXPECT_LT(steady::now() - shortened, 2500ms);
  std::error_code ec;
  m.unlock(ec);
  EXPECT_EQ(ec, errc::lease_lost);
}

// The same for a watchdog hold: its check after the reconnect finds the key ending sooner than
// its next renewal (10 s away) and renews it at once, so the hold lives on.
TEST(mutex_cancel, a_reconnect_renews_a_watchdog_hold_whose_key_ends_sooner_at_once) {
  dlock::test::redis_server srv;
  dlock::client c{config_for(srv)};  // watchdog lease 30 s: renewed every 10 s
  const auto name = dlock::test::unique_name("lock");
  dlock::mutex m{c, name};
  m.lock();
  auto lost = m.lease_lost();
  const auto renewals = impl(c).watchdog().renewals_sent();
  const auto connects = impl(c).connection().connects();
  ASSERT_EQ(srv.command({"PEXPIRE", name, "2000"}), ":1");
  srv.command({"CLIENT", "KILL", "TYPE", "normal"});
  ASSERT_TRUE(
      dlock::test::wait_until([&] { return impl(c).connection().connects() > connects; }, 5s));
  EXPECT_TRUE(
      dlock::test::wait_until([&] { return impl(c).watchdog().renewals_sent() > renewals; }, 3s))
      << "renewed after the check, not at its next period";
  EXPECT_TRUE(dlock::test::wait_until(
      [&] {
        return std::stoll(srv.command({"PTTL", name}).substr(1)) > 20000;
      },
      3s))
      << srv.command({"PTTL", name});
  // The server has run the renewal; the client trusts it once it has read the reply.
  EXPECT_TRUE(dlock::test::wait_until([&] { return m.lease_time_left() > 20s; }, 3s))
      << m.lease_time_left().count() << " ms";
  EXPECT_FALSE(lost.stop_requested());
  m.unlock();
  EXPECT_EQ(srv.command({"EXISTS", name}), ":0");
}

// A timed call keeps its deadline: against a held lock it returns by then (a sleeping waiter
// wakes at the deadline), and with its attempt still in flight (the server stopped) by the
// deadline and a short grace (50 ms), whatever the attempt then did being given back.
TEST(mutex_cancel, try_lock_for_keeps_its_deadline) {
  dlock::test::holder_and_waiter l;
  auto& [srv, name, holder, waiter, h, w] = l;
  h.lock();
  for (int round = 0; round < 3; ++round) {
    const auto start = steady::now();
    EXPECT_FALSE(w.try_lock_for(300ms));
    const auto took = steady::now() - start;
    EXPECT_GE(took, 300ms);
    EXPECT_LT(took, 300ms + slack) << "round " << round;
  }
  h.unlock();

  // The attempt goes out and stays unanswered: the server is stopped.
  waiter.ping();
  const auto evalsha = dlock::test::command_stat(srv, "evalsha");
  srv.pause();
  const auto start = steady::now();
  std::error_code ec;
  const bool got = w.try_lock_for(300ms, ec);
  const auto took = steady::now() - start;
  srv.resume();
  EXPECT_FALSE(got);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_GE(took, 300ms);
  EXPECT_LT(took, 300ms + 50ms + slack) << "the deadline and the grace, not the command timeout";
  // The attempt ran once the server resumed, and took the free lock: the give-back behind it
  // released it.
  EXPECT_TRUE(dlock::test::wait_until(
      [&] { return dlock::test::command_stat(srv, "evalsha") >= evalsha + 2; }, 5s))
      << "the attempt and its give-back";
  EXPECT_EQ(srv.command({"EXISTS", name}), ":0") << srv.command({"HGETALL", name});
  EXPECT_TRUE(w.try_lock());
  w.unlock();
}

// A re-entry whose attempt Redis applied but whose reply never came (the replies were lost on
// the way back) leaves the count on Redis one above the caller's, until the give-back that
// follows the failed call lands. No hold is left behind: the give-back brings the count back,
// and the owner's one unlock then frees the lock.
TEST(mutex_cancel, a_re_entry_abandoned_after_redis_applied_it_leaves_no_hold_behind) {
  dlock::test::redis_server srv;
  dlock::test::tcp_proxy proxy{srv.port()};
  auto cfg = dlock::config::from_uri("redis://127.0.0.1:" + std::to_string(proxy.port()) +
                                     "?timeout=300ms&connect_timeout=300ms&health_check=0");
  cfg.reconnect_min = 10ms;
  cfg.reconnect_max = 100ms;
  dlock::client c{cfg};
  const auto name = dlock::test::unique_name("lock");
  dlock::mutex m{c, name};
  m.lock();
  const auto field = own_field(c);
  ASSERT_EQ(srv.command({"HGET", name, field}), "1");
  proxy.blackhole(dlock::test::direction::server_to_client);  // requests arrive, replies vanish
  std::error_code ec;
  EXPECT_FALSE(m.try_lock(ec)) << "its reply never came";
  EXPECT_EQ(srv.command({"HGET", name, field}), "2") << "Redis applied the re-entry";
  proxy.pass();
  EXPECT_TRUE(dlock::test::wait_until(
      [&] {
        return srv.command({"HGET", name, field}) == "1";
      },
      5s))
      << "the give-back brought the count back: " << srv.command({"HGET", name, field});
  EXPECT_FALSE(m.lease_lost().stop_requested());
  m.unlock();
  EXPECT_EQ(srv.command({"EXISTS", name}), ":0") << "no hold left behind";
  EXPECT_EQ(m.fencing_token(), 0u);
}

}  // namespace
