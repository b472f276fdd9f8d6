// dlock::mutex in one process against a real redis-server: reentrancy, ownership, std lock
// guards, timed waits, pub/sub hand-off, lost messages, the watchdog, leases, async forms and bad
// input. (Multi-process cases: mutex_process_test.cpp.)
#include "dlock/mutex.hpp"

#include <gtest/gtest.h>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/use_future.hpp>
#include <atomic>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <tuple>
#include <vector>

#include "dlock/inspect.hpp"
#include "dlock/keys.hpp"
#include "queued_waiter.hpp"
#include "runtime/client_impl.hpp"
#include "scripts/script.hpp"
#include "support/child_process.hpp"
#include "support/redis_server.hpp"
#include "test_util.hpp"

using namespace std::chrono_literals;
using dlock::errc;
using steady = std::chrono::steady_clock;

namespace {

using dlock::test::await_queued_waiter;
using dlock::test::command_stat;
using dlock::test::config_for;
using dlock::test::impl;
using dlock::test::numsub;

std::int64_t exists(dlock::client& c, const std::string& key) {
  return c.execute({"EXISTS", key}).integer();
}

template <class F>
auto on_thread(F f) {
  return std::async(std::launch::async, std::move(f));
}

TEST(mutex, is_reentrant_per_thread_and_frees_the_key_after_the_last_unlock) {
  dlock::test::redis_server srv;
  dlock::client c{config_for(srv)};
  dlock::mutex m{c, dlock::test::unique_name("lock")};
  m.lock();
  m.lock();
  m.lock();
  EXPECT_EQ(m.hold_count(), 3u);
  EXPECT_TRUE(m.is_held_by_current_thread());
  EXPECT_TRUE(m.is_locked());
  const auto token = m.fencing_token();
  EXPECT_GT(token, 0u);
  EXPECT_EQ(c.execute({"HGET", m.name(), c.id() + ":" + std::to_string(0)}).is_nil(), true)
      << "owner fields are <uuid>:<thread number>, numbers start at 1";
  m.unlock();
  EXPECT_EQ(m.hold_count(), 2u);
  m.unlock();
  EXPECT_EQ(exists(c, m.name()), 1);
  EXPECT_EQ(m.fencing_token(), token) << "re-entry keeps the token";
  m.unlock();
  EXPECT_EQ(exists(c, m.name()), 0);
  EXPECT_FALSE(m.is_locked());
  EXPECT_EQ(m.fencing_token(), 0u);
  std::error_code ec;
  m.unlock(ec);
  EXPECT_EQ(ec, errc::not_owner);
}

TEST(mutex, another_thread_cannot_unlock_or_enter) {
  dlock::test::redis_server srv;
  dlock::client c{config_for(srv)};
  dlock::mutex m{c, dlock::test::unique_name("lock")};
  m.lock();
  const auto before = c.execute({"HGETALL", m.name()});
  on_thread([&] {
    std::error_code ec;
    m.unlock(ec);
    EXPECT_EQ(ec, errc::not_owner);
    EXPECT_THROW(m.unlock(), dlock::lock_error);
    EXPECT_FALSE(m.try_lock()) << "reentrancy is per thread";
    EXPECT_FALSE(m.is_held_by_current_thread());
  }).get();
  EXPECT_EQ(c.execute({"HGETALL", m.name()}), before) << "a non-owner unlock changes nothing";
  m.unlock();
}

TEST(mutex, works_with_std_lock_guards_and_scoped_lock) {
  dlock::test::redis_server srv;
  dlock::client c{config_for(srv)};
  dlock::mutex a{c, dlock::test::unique_name("a")}, b{c, dlock::test::unique_name("b")};
  {
    std::lock_guard guard{a};
    std::unique_lock again{a};  // same thread: hold count 2
    EXPECT_EQ(a.hold_count(), 2u);
  }
  EXPECT_FALSE(a.is_locked());
  {
    std::scoped_lock both{a, b};
    EXPECT_TRUE(a.is_held_by_current_thread());
    EXPECT_TRUE(b.is_held_by_current_thread());
    // Another thread cannot take either meanwhile.
    on_thread([&] { EXPECT_FALSE(a.try_lock() || b.try_lock()); }).get();
  }
  EXPECT_FALSE(a.is_locked());
  EXPECT_FALSE(b.is_locked());
  std::unique_lock lk{a, std::defer_lock};
  EXPECT_TRUE(lk.try_lock_for(1s));
  EXPECT_TRUE(lk.owns_lock());
}

TEST(mutex, try_lock_for_returns_within_its_stated_slop) {
  dlock::test::holder_and_waiter l;
  auto& [srv, name, holder, waiter, h, w] = l;
  h.lock();
  for (auto wait : {0ms, 50ms, 300ms}) {
    const auto start = steady::now();
    EXPECT_FALSE(w.try_lock_for(wait));
    const auto took = steady::now() - start;
    EXPECT_GE(took, wait);
    EXPECT_LT(took, wait + 150ms) << "slop 150 ms: one round trip after the deadline";
  }
  const auto until = steady::now() + 100ms;
  EXPECT_FALSE(w.try_lock_until(until));
  EXPECT_GE(steady::now(), until);
  h.unlock();
}

// A waiter is woken by the unlock message, within milliseconds, not by the holder's 30 s lease
// or the 3 s re-check.
TEST(mutex, hands_off_by_pub_sub_within_milliseconds) {
  dlock::test::holder_and_waiter l;
  auto& [srv, name, holder, waiter, h, w] = l;
  for (int round = 0; round < 5; ++round) {
    h.lock();
    std::promise<steady::time_point> acquired_at;
    auto t = on_thread([&] {
      w.lock();
      acquired_at.set_value(steady::now());
      w.unlock();
    });
    ASSERT_TRUE(dlock::test::wait_until([&] { return impl(waiter).waiters().names() == 1; }, 5s));
    // Let the subscription be confirmed, or the message could race it (the re-check after
    // subscribing would still see the lock held).
    ASSERT_TRUE(dlock::test::wait_until(
        [&] { return numsub(srv, "redisson_lock__channel:{" + name + "}") == 1; }, 5s));
    h.unlock();
    const auto released = steady::now();
    auto f = acquired_at.get_future();
    ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
    EXPECT_LT(f.get() - released, 100ms) << "slop 100 ms; the re-check would take 3 s";
    t.get();
  }
}

// A waiter on its own thread: try_lock_for(wait) on `c`, noting when that returned; unlocks
// what it got.
struct timed_waiter {
  timed_waiter(dlock::client& c, std::string name, std::chrono::milliseconds wait)
      : result{on_thread([this, &c, name = std::move(name), wait] {
          dlock::mutex m{c, name};
          const bool got = m.try_lock_for(wait);
          returned = steady::now();
          if (got) m.unlock();
          return got;
        })} {}
  std::atomic<steady::time_point> returned{};
  std::future<bool> result;
};

// A client of its own (as another process would have; kept in `clients`) and a thread that
// waits up to `wait` for `name`, runs `inside` while it holds it, and unlocks. The future
// throws if the lock was not acquired.
std::future<void> hold_in_a_new_client(std::vector<std::unique_ptr<dlock::client>>& clients,
                                       dlock::config cfg, const std::string& name,
                                       std::chrono::milliseconds wait,
                                       std::function<void()> inside) {
  clients.push_back(std::make_unique<dlock::client>(std::move(cfg)));
  return on_thread([c = clients.back().get(), name, wait, inside = std::move(inside)] {
    dlock::mutex m{*c, name};
    if (!m.try_lock_for(wait)) throw std::runtime_error("not acquired");
    inside();
    m.unlock();
  });
}

// An unlock hands the lock to the head of the lock's waiter queue and tells that waiter's client
// alone: with four clients waiting (four subscriber connections, as four processes would have),
// each hand-off costs the release and the one attempt by which the waiter takes what it was
// handed — no other waiter is woken.
TEST(mutex, an_unlock_hands_the_lock_to_one_waiter_across_clients) {
  dlock::test::redis_server srv;
  dlock::client holder{config_for(srv)};
  const auto name = dlock::test::unique_name("lock");
  const auto queue = dlock::keys::waiter_queue(name);
  dlock::mutex h{holder, name};
  h.lock();
  h.unlock();  // both scripts loaded: no NOSCRIPT below
  h.lock();
  srv.command({"CONFIG", "RESETSTAT"});
  constexpr int n = 4;
  std::vector<std::unique_ptr<dlock::client>> clients;
  std::vector<std::future<void>> threads;
  std::atomic<int> inside{0}, overlaps{0};
  for (int i = 0; i < n; ++i) {
    threads.push_back(hold_in_a_new_client(clients, config_for(srv), name, 10s, [&] {
      if (inside.fetch_add(1) != 0) ++overlaps;
      std::this_thread::sleep_for(5ms);
      inside.fetch_sub(1);
    }));
  }
  ASSERT_TRUE(dlock::test::wait_until(
      [&] {
        return srv.command({"ZCARD", queue}) == ":" + std::to_string(n);
      },
      5s))
      << srv.command({"ZRANGE", queue, "0", "-1"});
  // Each waiter made its two attempts: the one that queued it, and the re-check that the
  // confirmation of its subscription asks for.
  ASSERT_TRUE(dlock::test::wait_until([&] { return command_stat(srv, "evalsha") >= 2 * n; }, 5s))
      << command_stat(srv, "evalsha");
  srv.command({"CONFIG", "RESETSTAT"});
  h.unlock();
  for (auto& t : threads) {
    ASSERT_EQ(t.wait_for(10s), std::future_status::ready);
    t.get();
  }
  EXPECT_EQ(overlaps.load(), 0);
  // 1 release + n x (the attempt that takes the handed-off hold + its release); allowed on top,
  // a re-check (every 3 s) on a slow host. One wake-up per unlock to every waiting client would
  // cost n + (n-1) + ... + 1 attempts instead of n.
  const auto evalsha = command_stat(srv, "evalsha");
  EXPECT_GE(evalsha, 1 + 2 * n);
  EXPECT_LE(evalsha, 1 + 2 * n + 2);
  EXPECT_EQ(srv.command({"EXISTS", queue}), ":0") << "every waiter left the queue";
  EXPECT_EQ(srv.command({"EXISTS", dlock::keys::waiter_records(name)}), ":0");
}

// A Redisson unlock (DEL and a plain `0`: no hand-off, the holder is no dlock) wakes a dlock
// waiter whenever it comes — before the waiter's first attempt, between that attempt and the
// confirmation of its subscription (whose re-check covers a message it could not hear yet), or
// after. The waiter's re-check is 20 s away; the `0` comes a little later each round (the pause
// only moves it across the waiter's steps: the test holds whatever the order).
TEST(mutex, a_redisson_unlock_wakes_a_waiter_whenever_it_comes) {
  dlock::test::redis_server srv;
  dlock::client waiter{config_for(srv, "recheck=20s")};
  const auto name = dlock::test::unique_name("lock");
  const auto channel = dlock::keys::lock_channel(name);
  dlock::mutex w{waiter, name};
  for (int round = 0; round < 20; ++round) {
    srv.command({"HSET", name, "someone:1", "1"});  // held, no expiry, by no dlock
    auto t = on_thread([&] {
      const auto start = steady::now();
      const bool got = w.try_lock_for(10s);
      if (got) w.unlock();
      return std::pair{got, steady::now() - start};
    });
    std::this_thread::sleep_for(std::chrono::microseconds{250 * round});
    srv.command({"DEL", name});
    srv.command({"PUBLISH", channel, "0"});
    ASSERT_EQ(t.wait_for(10s), std::future_status::ready) << "round " << round;
    const auto [got, took] = t.get();
    EXPECT_TRUE(got);
    EXPECT_LT(took, 2s) << "round " << round << ": woken by the unlock, not the 20 s re-check";
  }
}

// A waiter woken by an unlock whose attempts then meet only a transient error (BUSY: a script
// runs long) until its deadline passes must pass the wake-up on as it leaves: the lock is free,
// and the next waiter, whose re-check is 20 s away, would otherwise sleep through it.
TEST(mutex, a_waiter_leaving_after_a_wake_up_it_could_not_answer_passes_it_on) {
  dlock::test::redis_server srv;
  srv.command({"CONFIG", "SET", "busy-reply-threshold", "100"});  // BUSY after 100 ms of script
  dlock::client c{config_for(srv, "recheck=20s")};
  const auto name = dlock::test::unique_name("lock");
  const auto channel = dlock::keys::lock_channel(name);
  const auto queue = dlock::keys::waiter_queue(name);
  srv.command({"HSET", name, "someone:1", "1"});  // held, no expiry, by no dlock (names nobody)
  const auto start = steady::now();
  auto first = on_thread([&] {
    dlock::mutex m{c, name};
    std::error_code ec;
    return m.try_lock_until(start + 1500ms, ec);  // ends while the script still runs
  });
  ASSERT_TRUE(dlock::test::wait_until([&] { return srv.command({"ZCARD", queue}) == ":1"; }, 5s));
  auto second = on_thread([&] {
    dlock::mutex m{c, name};
    const bool got = m.try_lock_for(15s);
    const auto at = steady::now();
    if (got) m.unlock();
    return std::pair{got, at};
  });
  ASSERT_TRUE(dlock::test::wait_until([&] { return srv.command({"ZCARD", queue}) == ":2"; }, 5s));
  ASSERT_TRUE(dlock::test::wait_until([&] { return numsub(srv, channel) == 1; }, 5s));
  // Free the lock, wake one waiter (the first: FIFO), and keep the server busy for 2 s: every
  // attempt until then is answered BUSY.
  const std::string script =
      "redis.call('del', KEYS[1]) redis.call('publish', KEYS[2], '0') "
      "local t0 = redis.call('time') local t = t0 "
      "while (t[1] - t0[1]) * 1000000 + (t[2] - t0[2]) < 2000000 do t = redis.call('time') end "
      "return 1";
  const auto busy_end = steady::now() + 2s;
  srv.command({"EVAL", script, "2", name, channel}, dlock::test::command_options{.timeout = 10s});
  ASSERT_EQ(first.wait_for(10s), std::future_status::ready);
  EXPECT_FALSE(first.get()) << "the first waiter's deadline passed while the server was busy";
  ASSERT_EQ(second.wait_for(20s), std::future_status::ready);
  const auto [got, at] = second.get();
  EXPECT_TRUE(got);
  EXPECT_LT(at - busy_end, 5s) << "woken by the passed-on wake-up, not the 20 s re-check";
}

// The waiter queue only speeds wake-ups up: a queue key of another type (or one the server
// refuses to grow) fails no lock call, leaves nothing held and is never touched.
TEST(mutex, a_queue_key_of_another_type_fails_nothing) {
  dlock::test::redis_server srv;
  dlock::client holder{config_for(srv)}, waiter{config_for(srv, "recheck=300ms")};
  const auto name = dlock::test::unique_name("lock");
  const auto queue = dlock::keys::waiter_queue(name);
  srv.command({"SET", queue, "not a zset"});
  dlock::mutex h{holder, name}, w{waiter, name};
  h.lock();
  auto t = on_thread([&] {
    std::error_code ec;
    const bool got = w.try_lock_for(5s, ec);
    if (got) w.unlock();
    return std::pair{got, ec};
  });
  ASSERT_TRUE(dlock::test::wait_until([&] { return impl(waiter).waiters().names() == 1; }, 5s));
  h.unlock();
  ASSERT_EQ(t.wait_for(5s), std::future_status::ready);
  const auto [got, ec] = t.get();
  EXPECT_TRUE(got) << ec.message();
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_EQ(srv.command({"GET", queue}), "not a zset");
  EXPECT_EQ(srv.command({"EXISTS", name}), ":0");
}

// Hand-off: each unlock gives the lock to the waiter at the head of the queue (the unlock script
// writes its owner field), so waiters are served in the order they queued, and a caller that
// keeps trying without waiting never finds the lock free in between.
TEST(mutex, waiters_are_served_in_arrival_order_and_nobody_barges_a_hand_off) {
  dlock::test::redis_server srv;
  dlock::client holder{config_for(srv)}, barger_client{config_for(srv)};
  const auto name = dlock::test::unique_name("lock");
  const auto queue = dlock::keys::waiter_queue(name);
  dlock::mutex h{holder, name};
  h.lock();
  constexpr int n = 6;
  std::vector<std::unique_ptr<dlock::client>> clients;
  std::vector<std::future<void>> threads;
  std::mutex order_mutex;
  std::vector<int> order;
  for (int i = 0; i < n; ++i) {
    threads.push_back(hold_in_a_new_client(clients, config_for(srv), name, 20s, [&, i] {
      {
        std::lock_guard g{order_mutex};
        order.push_back(i);
      }
      std::this_thread::sleep_for(30ms);
    }));
    // One at a time into the queue: arrival order is known.
    ASSERT_TRUE(dlock::test::wait_until(
        [&] {
          return srv.command({"ZCARD", queue}) == ":" + std::to_string(i + 1);
        },
        5s));
  }
  std::atomic<bool> stop{false};
  std::atomic<int> barged{0}, tries{0};
  auto barger = on_thread([&] {
    dlock::mutex b{barger_client, name};
    while (!stop) {
      ++tries;
      if (b.try_lock()) {
        {
          // Held by the barger while a queued waiter has not had its turn yet: it barged.
          std::lock_guard g{order_mutex};
          if (order.size() < n) ++barged;
        }
        b.unlock();
      }
      std::this_thread::sleep_for(200us);
    }
  });
  h.unlock();
  for (auto& t : threads) {
    ASSERT_EQ(t.wait_for(20s), std::future_status::ready);
    t.get();
  }
  stop = true;
  barger.get();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4, 5})) << "served in arrival order";
  EXPECT_GT(tries.load(), 50) << "the barger kept trying through every hand-off";
  EXPECT_EQ(barged.load(), 0) << "no try took the lock ahead of a queued waiter";
}

// The hand-off: an unlock gives the lock to the queue's longest-waiting dlock waiter outright —
// its owner field at 1, its own lease, a fencing token kept in its queue record — and tells its
// client; the waiter's next attempt takes the hold as it stands, trusted for its whole lease from
// that attempt. Each hand-off costs the release and that one attempt.
TEST(mutex, an_unlock_hands_the_lock_to_the_waiter_it_names) {
  dlock::test::holder_and_waiter l{"", "recheck=20s"};
  auto& [srv, name, holder, waiter, h, w] = l;
  h.lock();
  h.unlock();  // both scripts loaded: no NOSCRIPT below
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(round);
    h.lock();
    const auto first = h.fencing_token();
    const auto before = command_stat(srv, "evalsha");
    std::promise<void> held, done;
    auto t = on_thread([&] {
      w.lock();
      const auto token = w.fencing_token();
      const auto left = w.lease_time_left();
      held.set_value();
      done.get_future().wait();
      w.unlock();
      return std::pair{token, left};
    });
    ASSERT_NO_FATAL_FAILURE(await_queued_waiter(srv, waiter, name, before));
    const auto evalsha = command_stat(srv, "evalsha");
    h.unlock();
    ASSERT_EQ(held.get_future().wait_for(10s), std::future_status::ready);
    EXPECT_EQ(command_stat(srv, "evalsha") - evalsha, 2)
        << "the release and the waiter's one attempt";
    const auto fields = srv.command({"HGETALL", name});
    EXPECT_EQ(fields.rfind("[" + waiter.id() + ":", 0), 0u) << fields;
    EXPECT_EQ(fields.rfind(", 1]"), fields.size() - 4) << "one hold: " << fields;
    EXPECT_GT(std::stoll(srv.command({"PTTL", name}).substr(1)), 20000) << "the watchdog lease";
    EXPECT_EQ(srv.command({"EXISTS", dlock::keys::waiter_queue(name)}), ":0");
    EXPECT_EQ(srv.command({"EXISTS", dlock::keys::waiter_records(name)}), ":0")
        << "the token the record kept was taken";
    done.set_value();
    ASSERT_EQ(t.wait_for(10s), std::future_status::ready);
    const auto [token, left] = t.get();
    EXPECT_GT(token, first) << "a token issued by the hand-off";
    EXPECT_GT(left, 20s) << "trusted for the whole lease from its attempt";
  }
  EXPECT_EQ(srv.command({"EXISTS", name}), ":0");
}

// A waiter that cannot take what it was handed (its process stalled while its client still hears
// the message) holds the lock as a stalled holder would: for its own lease, no longer. The next
// waiter finds the lock free once that lease ends (its re-check sleeps until the PTTL runs out).
TEST(mutex, a_hand_off_nobody_takes_ends_with_the_waiters_lease) {
  dlock::test::redis_server srv;
  dlock::client holder{config_for(srv)}, patient{config_for(srv, "recheck=400ms")};
  const auto name = dlock::test::unique_name("lock");
  const auto queue = dlock::keys::waiter_queue(name);
  dlock::mutex h{holder, name};
  h.lock();
  // A stalled waiter: its client's waiter channel heard (redis-cli), nobody acting; queued by the
  // acquire script itself, asking for a lease of 300 ms.
  const auto heard = dlock::keys::waiter_channel(name, "stalled-client");
  dlock::test::child_process stalled{
      {"/usr/bin/redis-cli", "-p", std::to_string(srv.port()), "SUBSCRIBE", heard}};
  ASSERT_TRUE(dlock::test::wait_until([&] { return numsub(srv, heard) == 1; }, 5s));
  const auto queued = holder.execute(
      {"EVAL", std::string{dlock::scripts::mutex_acquire.text}, "6", name, queue,
       dlock::keys::waiter_records(name), dlock::keys::yield_marker(name),
       dlock::keys::slot_fencing_counter_of(name), dlock::keys::fencing_counter(name), "300",
       "stalled:1", "0", "4294967297", "30000", "stalled-client", "0"});
  ASSERT_EQ(srv.command({"ZCARD", queue}), ":1") << queued.str();
  timed_waiter next{patient, name, 30s};
  ASSERT_TRUE(dlock::test::wait_until([&] { return srv.command({"ZCARD", queue}) == ":2"; }, 5s));
  h.unlock();
  const auto released = steady::now();
  EXPECT_EQ(srv.command({"HGET", name, "stalled:1"}), "1") << "handed to the stalled waiter";
  ASSERT_EQ(next.result.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(next.result.get());
  const auto waited = next.returned.load() - released;
  EXPECT_GE(waited, 250ms) << "not before the stalled waiter's lease (300 ms) ended";
  EXPECT_LT(waited, 2s) << "by its re-check, sleeping until the lease's end";
}

// A hand-off gives the waiter the lease it asked for (kept in its queue record), not the
// releaser's: a waiter asking for 300 ms holds the lock for 300 ms, is trusted no longer, and the
// lock expires then.
TEST(mutex, a_handed_off_hold_has_the_waiters_own_lease) {
  dlock::test::holder_and_waiter l{"", "recheck=20s"};
  auto& [srv, name, holder, waiter, h, w] = l;
  h.lock();
  std::promise<std::chrono::milliseconds> left_at_start;
  std::promise<void> expired;
  auto t = on_thread([&] {
    w.lock(300ms);
    left_at_start.set_value(w.lease_time_left());
    expired.get_future().wait();
    const auto left = w.lease_time_left();
    std::error_code ec;
    w.unlock(ec);
    return std::pair{left, ec};
  });
  ASSERT_NO_FATAL_FAILURE(await_queued_waiter(srv, waiter, name));
  h.unlock();
  const auto released = steady::now();
  auto f = left_at_start.get_future();
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  const auto left = f.get();
  EXPECT_LE(left, 300ms) << "not the releaser's 30 s watchdog lease";
  EXPECT_GT(left, 0ms);
  EXPECT_TRUE(dlock::test::wait_until([&] { return srv.command({"EXISTS", name}) == ":0"; }, 3s));
  EXPECT_LT(steady::now() - released, 2s) << "at the end of the waiter's own lease";
  expired.set_value();
  ASSERT_EQ(t.wait_for(10s), std::future_status::ready);
  const auto [left_after, ec] = t.get();
  EXPECT_EQ(left_after, 0ms) << "no longer trusted once Redis let it go";
  EXPECT_EQ(ec, errc::lease_lost);
}

// A client destroyed while one of its threads waits takes that waiter out of the queue before
// it closes: the next unlock names the waiter behind it, which acquires at once, not at its
// next re-check (20 s here).
TEST(mutex, a_client_destroyed_while_waiting_leaves_the_queue) {
  dlock::test::redis_server srv;
  dlock::client holder{config_for(srv)}, patient{config_for(srv, "recheck=20s")};
  const auto name = dlock::test::unique_name("lock");
  const auto queue = dlock::keys::waiter_queue(name);
  dlock::mutex h{holder, name};
  h.lock();
  auto doomed = std::make_unique<dlock::client>(config_for(srv, "recheck=20s"));
  auto first = on_thread([&] {
    dlock::mutex m{*doomed, name};
    std::error_code ec;
    m.try_lock_for(30s, ec);
    return ec;
  });
  ASSERT_TRUE(dlock::test::wait_until([&] { return srv.command({"ZCARD", queue}) == ":1"; }, 5s));
  timed_waiter second{patient, name, 30s};
  ASSERT_TRUE(dlock::test::wait_until([&] { return srv.command({"ZCARD", queue}) == ":2"; }, 5s));
  doomed.reset();
  ASSERT_EQ(first.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(first.get(), errc::shutdown);
  EXPECT_EQ(srv.command({"ZCARD", queue}), ":1")
      << "the destroyed client's waiter left before it closed";
  h.unlock();
  const auto released = steady::now();
  ASSERT_EQ(second.result.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(second.result.get());
  EXPECT_LT(second.returned.load() - released, 1s)
      << "named by the unlock, not found by a re-check";
}

// What a client sent before it was destroyed reaches the server: a lease dropped (released in
// the background) just before its client goes leaves no lock behind.
TEST(mutex, a_lease_dropped_just_before_its_client_is_destroyed_is_released) {
  dlock::test::redis_server srv;
  const auto name = dlock::test::unique_name("lock");
  for (int i = 0; i < 20; ++i) {
    {
      dlock::client c{config_for(srv)};
      dlock::mutex m{c, name};
      auto l = m.async_lock(asio::use_future).get();
      ASSERT_TRUE(l.owns());
    }  // the lease, then the client
    ASSERT_EQ(srv.command({"EXISTS", name}), ":0") << "round " << i << ": left held";
  }
}

// A waiter that gives up leaves the queue at once, so no unlock names it.
TEST(mutex, a_waiter_that_times_out_leaves_the_queue) {
  dlock::test::holder_and_waiter l;
  auto& [srv, name, holder, waiter, h, w] = l;
  const auto queue = dlock::keys::waiter_queue(name);
  h.lock();
  EXPECT_FALSE(w.try_lock_for(300ms));
  EXPECT_TRUE(dlock::test::wait_until([&] { return srv.command({"EXISTS", queue}) == ":0"; }, 1s));
  EXPECT_FALSE(w.try_lock()) << "a try without waiting does not enter the queue";
  EXPECT_EQ(srv.command({"EXISTS", queue}), ":0");
  h.unlock();
}

// The unlock message is published while the waiter's subscriber connection is down: the waiter
// still acquires, by the re-check after resubscribing.
TEST(mutex, lost_unlock_message_costs_latency_not_a_hang) {
  dlock::test::holder_and_waiter l{"", "recheck=500ms"};
  auto& [srv, name, holder, waiter, h, w] = l;
  h.lock();
  auto t = on_thread([&] { return w.try_lock_for(20s); });
  ASSERT_TRUE(dlock::test::wait_until(
      [&] { return numsub(srv, "redisson_lock__channel:{" + name + "}") == 1; }, 5s));
  srv.command({"CLIENT", "KILL", "TYPE", "pubsub"});
  h.unlock();  // nobody is subscribed right now: the message is lost
  ASSERT_EQ(t.wait_for(5s), std::future_status::ready) << "re-check bounds the wait";
  EXPECT_TRUE(t.get());
}

// Redis 7 ACL users have no channels by default: SUBSCRIBE fails with NOPERM. Waiting still
// works, by bounded re-checks.
TEST(mutex, waits_by_rechecks_when_channels_are_denied) {
  auto o = dlock::test::redis_server_options::with_app_user("pw", "~* resetchannels +@all");
  dlock::test::redis_server srv{o};
  const auto url = "redis://app:pw@127.0.0.1:" + std::to_string(srv.port()) + "?recheck=200ms";
  std::mutex mu;
  std::vector<std::pair<dlock::warning, std::string>> warnings;
  auto cfg = dlock::config::from_uri(url);
  cfg.on_warning = [&](dlock::warning w, std::string_view m) {
    std::lock_guard lock{mu};
    warnings.emplace_back(w, std::string{m});
  };
  dlock::client holder{dlock::config::from_uri(url)}, waiter{cfg};
  const auto name = dlock::test::unique_name("lock");
  dlock::mutex h{holder, name}, w{waiter, name};
  for (int round = 0; round < 2; ++round) {
    h.lock();
    auto t = on_thread([&] {
      const bool got = w.try_lock_for(10s);
      if (got) w.unlock();
      return got;
    });
    ASSERT_TRUE(dlock::test::wait_until([&] { return impl(waiter).waiters().names() == 1; }, 5s));
    ASSERT_TRUE(dlock::test::wait_until(
        [&] { return impl(waiter).waiters().refused() > static_cast<std::uint64_t>(round); }, 5s));
    h.unlock();
    const auto released = steady::now();
    ASSERT_EQ(t.wait_for(5s), std::future_status::ready);
    EXPECT_TRUE(t.get());
    EXPECT_LT(steady::now() - released, 1s) << "one re-check interval (200 ms) plus slop";
  }
  std::lock_guard lock{mu};
  ASSERT_EQ(warnings.size(), 1u) << "one warning per client, not one per wait";
  EXPECT_EQ(warnings[0].first, dlock::warning::channels_denied);
  EXPECT_NE(warnings[0].second.find("re-check every 200 ms"), std::string::npos)
      << warnings[0].second;
}

// A client without channel rights cannot hear a hand-off, yet it queues like any other waiter:
// an unlock that hands the lock to it finds nobody listening on its client's waiter channel
// (dlock_lock__channel:{name}:<client id>; rights to Redisson's channels alone are not enough),
// undoes the hand-off and hands the lock to the next waiter, at once. The refused waiter gets the
// lock by its re-checks. (With Redisson's channels allowed, the refused client counts as a
// Redisson process waiting: the unlock leaves the lock free to it for a moment instead, and the
// permitted waiter takes it after that.)
class mutex_channel_rights : public testing::TestWithParam<const char*> {};
INSTANTIATE_TEST_SUITE_P(acl, mutex_channel_rights,
                         testing::Values("resetchannels",
                                         "resetchannels &redisson_lock__channel:*"));

TEST_P(mutex_channel_rights, an_unlock_skips_a_waiter_that_cannot_hear_it) {
  auto o = dlock::test::redis_server_options::with_app_user(
      "pw", std::string{"~* "} + GetParam() + " +@all");
  dlock::test::redis_server srv{o};
  const auto port = std::to_string(srv.port());
  auto denied_cfg = dlock::config::from_uri("redis://app:pw@127.0.0.1:" + port + "?recheck=2s");
  denied_cfg.on_warning = [](dlock::warning, std::string_view) {};
  dlock::client holder{config_for(srv)}, denied{denied_cfg},
      permitted{dlock::config::from_uri("redis://127.0.0.1:" + port + "?recheck=20s")};
  const auto name = dlock::test::unique_name("lock");
  const auto queue = dlock::keys::waiter_queue(name);
  dlock::mutex h{holder, name}, d{denied, name};
  h.lock();
  auto waiting_denied = on_thread([&] {
    const bool got = d.try_lock_for(15s);
    if (got) d.unlock();
    return got;
  });
  ASSERT_TRUE(dlock::test::wait_until([&] { return impl(denied).waiters().refused() > 0; }, 5s));
  ASSERT_TRUE(dlock::test::wait_until([&] { return srv.command({"ZCARD", queue}) == ":1"; }, 5s));
  timed_waiter waiting_permitted{permitted, name, 15s};
  ASSERT_TRUE(dlock::test::wait_until([&] { return srv.command({"ZCARD", queue}) == ":2"; }, 5s));
  ASSERT_TRUE(dlock::test::wait_until(
      [&] { return numsub(srv, dlock::keys::waiter_channel(name, permitted.id())) == 1; }, 5s));
  h.unlock();
  const auto released = steady::now();
  ASSERT_EQ(waiting_permitted.result.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(waiting_permitted.result.get());
  EXPECT_LT(waiting_permitted.returned.load() - released, 1s)
      << "handed the lock at once, not at its 20 s re-check nor after the refused waiter's 2 s one";
  ASSERT_EQ(waiting_denied.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(waiting_denied.get()) << "the refused waiter gets it by its re-checks";
}

// A releasing user may lack the right to publish on dlock's channels (granted Redisson's lock
// channels only): the hand-off's PUBLISH fails, the hand-off is undone, and the unlock ends with
// Redisson's `0`, to which the waiter's client listens too — woken at once, not at its re-check
// (20 s).
TEST(mutex, an_unlocker_without_dlock_channel_rights_still_wakes_the_waiter) {
  auto o = dlock::test::redis_server_options::with_app_user(
      "pw", "~* resetchannels &redisson_lock__channel:* +@all");
  dlock::test::redis_server srv{o};
  const auto port = std::to_string(srv.port());
  dlock::client holder{dlock::config::from_uri("redis://app:pw@127.0.0.1:" + port)},
      patient{dlock::config::from_uri("redis://127.0.0.1:" + port + "?recheck=20s")};
  const auto name = dlock::test::unique_name("lock");
  dlock::mutex h{holder, name};
  h.lock();
  const auto before = command_stat(srv, "evalsha");
  timed_waiter waiting{patient, name, 15s};
  const auto records = dlock::keys::waiter_records(name);
  ASSERT_TRUE(dlock::test::wait_until([&] { return srv.command({"HLEN", records}) == ":1"; }, 5s));
  EXPECT_NE(srv.command({"HVALS", records}).find(" " + patient.id() + " "), std::string::npos)
      << "the queue record names the waiter's client: " << srv.command({"HVALS", records});
  // Subscribed, and the re-check that follows the confirmation done: only a message can wake it.
  ASSERT_NO_FATAL_FAILURE(await_queued_waiter(srv, patient, name, before));
  h.unlock();
  const auto released = steady::now();
  ASSERT_EQ(waiting.result.wait_for(30s), std::future_status::ready);
  EXPECT_TRUE(waiting.result.get());
  EXPECT_LT(waiting.returned.load() - released, 1s);
}

TEST(mutex, an_evicting_maxmemory_policy_is_warned_about_once) {
  for (const std::string policy : {"allkeys-lru", "volatile-ttl", "noeviction"}) {
    dlock::test::redis_server srv{{.extra_args = {"--maxmemory-policy", policy}}};
    std::mutex mu;
    std::vector<std::pair<dlock::warning, std::string>> warnings;
    auto cfg = config_for(srv);
    cfg.on_warning = [&](dlock::warning w, std::string_view m) {
      std::lock_guard lock{mu};
      warnings.emplace_back(w, std::string{m});
    };
    dlock::client c{cfg};
    dlock::mutex m{c, dlock::test::unique_name("lock")};
    m.lock();  // the check runs in the background from the start; this waits for the link
    m.unlock();
    c.ping();  // after the check's reply (one connection, replies in order)
    std::lock_guard lock{mu};
    if (policy == "noeviction") {
      EXPECT_TRUE(warnings.empty()) << warnings.front().second;
    } else {
      ASSERT_EQ(warnings.size(), 1u) << policy;
      EXPECT_EQ(warnings[0].first, dlock::warning::evicting_policy);
      EXPECT_NE(warnings[0].second.find(policy), std::string::npos) << warnings[0].second;
    }
  }
}

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

TEST(mutex, fencing_tokens_strictly_increase_across_owners) {
  dlock::test::redis_server srv;
  dlock::client a{config_for(srv)}, b{config_for(srv)};
  const auto name = dlock::test::unique_name("lock");
  dlock::mutex ma{a, name}, mb{b, name};
  std::uint64_t last = 0;
  for (int i = 0; i < 20; ++i) {
    auto& m = i % 2 ? ma : mb;
    m.lock();
    EXPECT_GT(m.fencing_token(), last);
    last = m.fencing_token();
    m.unlock();
  }
  EXPECT_EQ(a.execute({"GET", dlock::keys::slot_fencing_counter_of(name)}).str(),
            std::to_string(last));
}

// Tokens come from the counter of the lock's cluster slot (keys::slot_fencing_counter_of), a key
// in that slot: the locks of one slot — here names sharing a hash tag — share it, tokens increase
// across them (so per lock too), a re-entry keeps its first token, and locking many names leaves
// one key behind, not one per name (a service locking per order would otherwise keep a key per
// order).
TEST(mutex, the_locks_of_one_slot_share_one_fencing_counter_key) {
  dlock::test::redis_server srv;
  dlock::client c{config_for(srv)};
  const auto tag = "{" + dlock::test::unique_name("orders") + "}";
  const auto counter = dlock::keys::slot_fencing_counter_of("order:" + tag);
  EXPECT_EQ(dlock::keys::slot(counter), dlock::keys::slot("order:" + tag));
  std::uint64_t last = 0;
  for (int i = 0; i < 50; ++i) {
    dlock::mutex m{c, "order:" + tag + ":" + std::to_string(i)};
    m.lock();
    const auto token = m.fencing_token();
    EXPECT_GT(token, last);
    last = token;
    m.lock();
    EXPECT_EQ(m.fencing_token(), token) << "a re-entry keeps the first acquisition's token";
    m.unlock();
    m.unlock();
  }
  EXPECT_EQ(srv.command({"DBSIZE"}), ":1");
  EXPECT_EQ(srv.command({"GET", counter}), std::to_string(last));
}

// Redisson RFencedLock's own counter of the name, redisson_lock_token:{name}, is read and advanced
// when it exists, never created: tokens on one name stay strictly increasing whether dlock or
// RFencedLock takes it — also when a counter is ahead of the clock (set here far ahead; in life,
// after a clock step back, or an upgrade from a dlock that counted per lock).
TEST(mutex, the_rfencedlock_counter_is_read_and_advanced_never_created) {
  dlock::test::redis_server srv;
  dlock::client c{config_for(srv)};
  const auto name = dlock::test::unique_name("lock");
  const auto counter = dlock::keys::fencing_counter(name);
  const auto slot_counter = dlock::keys::slot_fencing_counter_of(name);
  dlock::mutex m{c, name};
  m.lock();
  const auto first = m.fencing_token();
  EXPECT_EQ(srv.command({"GET", slot_counter}), std::to_string(first));
  EXPECT_EQ(srv.command({"EXISTS", counter}), ":0") << "read, never created";
  m.unlock();
  srv.command({"SET", counter, "9000000000000000"});
  m.lock();
  EXPECT_EQ(m.fencing_token(), 9000000000000001u) << "above RFencedLock's counter, not the clock";
  m.unlock();
  EXPECT_EQ(srv.command({"INCR", counter}), ":9000000000000002") << "what RFencedLock does";
  m.lock();
  EXPECT_EQ(m.fencing_token(), 9000000000000003u);
  m.unlock();
  EXPECT_EQ(srv.command({"GET", counter}), "9000000000000003") << "and advanced, as it exists";
  EXPECT_EQ(srv.command({"GET", slot_counter}), "9000000000000003");
  srv.command({"SET", slot_counter, "9000000001000000"});
  m.lock();
  EXPECT_EQ(m.fencing_token(), 9000000001000001u) << "above the slot's counter";
  m.unlock();
  EXPECT_EQ(srv.command({"GET", counter}), "9000000001000001");
  EXPECT_EQ(dlock::inspect(c, name).fencing_counter, 9000000001000001u);
}

// Tokens are max(counter + 1, server time in us): a server restarted without persistence
// forgets the counter, and the next token is still above every earlier one.
TEST(mutex, fencing_tokens_keep_increasing_across_a_restart_without_persistence) {
  dlock::test::redis_server srv;
  const auto name = dlock::test::unique_name("lock");
  std::uint64_t before = 0;
  {
    dlock::client a{config_for(srv)};
    dlock::mutex m{a, name};
    for (int i = 0; i < 3; ++i) {
      m.lock();
      EXPECT_GT(m.fencing_token(), before);
      before = m.fencing_token();
      m.unlock();
    }
  }
  srv.stop();
  srv.start();
  dlock::client b{config_for(srv)};
  dlock::mutex m{b, name};
  m.lock();
  EXPECT_GT(m.fencing_token(), before) << "the counter was forgotten, the clock was not";
  m.unlock();
  // A counter someone set far ahead (a clock that went back since) still counts.
  srv.command({"SET", dlock::keys::slot_fencing_counter_of(name), "9000000000000000"});
  m.lock();
  EXPECT_EQ(m.fencing_token(), 9000000000000001u);
  m.unlock();
}

// config::fencing off: no counter is written and tokens are 0; the lock itself is unchanged.
TEST(mutex, fencing_off_issues_no_tokens_and_writes_no_counter) {
  dlock::test::redis_server srv;
  dlock::client c{config_for(srv, "fencing=off")};
  const auto name = dlock::test::unique_name("lock");
  dlock::mutex m{c, name};
  m.lock();
  m.lock();
  EXPECT_EQ(m.fencing_token(), 0u);
  EXPECT_EQ(srv.command({"HGET", name, c.id() + ":" + std::to_string(1)}).empty(), false);
  m.unlock();
  m.unlock();
  auto l = m.async_lock(asio::use_future).get();
  EXPECT_EQ(l.fencing_token(), 0u);
  l.unlock();
  EXPECT_EQ(srv.command({"DBSIZE"}), ":0") << "nothing left behind, no counter";
}

TEST(mutex, async_lease_through_awaitable_future_and_destruction) {
  dlock::test::redis_server srv;
  dlock::client c{config_for(srv)};
  const auto name = dlock::test::unique_name("lock");
  dlock::mutex m{c, name};

  std::promise<std::string> done;
  asio::co_spawn(
      c.get_executor(),
      [&]() -> asio::awaitable<void> {
        using asio::experimental::as_tuple;
        auto [ec, l] = co_await m.async_lock_for(1s, as_tuple(asio::use_awaitable));
        if (ec || !l.owns() || l.fencing_token() == 0 || l.time_left() <= 0ms) {
          done.set_value("lock: " + ec.message());
          co_return;
        }
        auto [ec2, second] = co_await m.async_try_lock(as_tuple(asio::use_awaitable));
        if (ec2 != errc::timeout || second.owns()) {
          done.set_value("second lease must not enter: " + ec2.message());
          co_return;
        }
        auto [ec3] = co_await l.async_unlock(as_tuple(asio::use_awaitable));
        done.set_value(ec3 ? "unlock: " + ec3.message() : "ok");
      },
      asio::detached);
  auto f = done.get_future();
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(f.get(), "ok");
  EXPECT_EQ(exists(c, name), 0);

  auto fut = m.async_lock(asio::use_future);
  ASSERT_EQ(fut.wait_for(10s), std::future_status::ready);
  {
    dlock::lease l = fut.get();
    EXPECT_TRUE(l.owns());
    EXPECT_EQ(exists(c, name), 1);
    auto busy = m.async_try_lock(asio::use_future);
    ASSERT_EQ(busy.wait_for(10s), std::future_status::ready);
    // The I/O thread drops the future's state just after setting it: let it, so that the
    // exception is freed on this thread (connection_test's use_future test says why).
    c.ping();
    try {
      busy.get();
      ADD_FAILURE() << "expected errc::timeout";
    } catch (const std::system_error& e) {
      EXPECT_EQ(e.code(), errc::timeout);
    }
  }  // destroyed while held: releases the lock
  EXPECT_TRUE(dlock::test::wait_until([&] { return exists(c, name) == 0; }, 5s));
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

TEST(mutex, bad_input_gets_typed_errors_at_once) {
  dlock::test::redis_server srv;
  dlock::client c{config_for(srv, "max_name=64")};
  std::error_code ec;
  dlock::mutex empty{c, ""};
  empty.lock(ec);
  EXPECT_EQ(ec, errc::invalid_argument);
  EXPECT_THROW(empty.lock(), dlock::lock_error);
  dlock::mutex long_name{c, std::string(65, 'x')};
  EXPECT_FALSE(long_name.try_lock(ec));
  EXPECT_EQ(ec, errc::invalid_argument);
  dlock::mutex ok{c, dlock::test::unique_name("lock")};
  ok.lock(0ms, ec);
  EXPECT_EQ(ec, errc::invalid_argument) << "a lease must be positive";
  ok.lock(-5ms, ec);
  EXPECT_EQ(ec, errc::invalid_argument);

  // A key of another type is a configuration error, reported at once (not waited on).
  const auto name = dlock::test::unique_name("lock");
  c.execute({"SET", name, "string"});
  dlock::mutex typed{c, name};
  const auto start = steady::now();
  typed.lock(ec);
  EXPECT_EQ(ec, errc::wrong_type);
  EXPECT_LT(steady::now() - start, 1s);
  EXPECT_EQ(c.execute({"GET", name}).str(), "string");

  // A sync call on the client's I/O thread.
  std::promise<std::error_code> io;
  c.async_execute({"PING"}, [&](std::error_code, dlock::reply) {
    std::error_code e;
    ok.lock(e);
    io.set_value(e);
  });
  EXPECT_EQ(io.get_future().get(), errc::would_deadlock);
}

TEST(mutex, server_refusals_are_typed_and_prompt) {
  // NOPERM: a user without access to the key.
  auto o = dlock::test::redis_server_options::with_app_user("pw", "~app:* &* +@all");
  dlock::test::redis_server acl{o};
  dlock::client app{
      dlock::config::from_uri("redis://app:pw@127.0.0.1:" + std::to_string(acl.port()))};
  std::error_code ec;
  dlock::mutex denied{app, "other:lock"};
  denied.lock(ec);
  EXPECT_EQ(ec, errc::no_permission);

  // OOM under maxmemory + noeviction.
  dlock::test::redis_server_options mem;
  mem.extra_args = {"--maxmemory-policy", "noeviction"};
  dlock::test::redis_server full{mem};
  dlock::client fc{config_for(full)};
  // Well over the limit (set afterwards), so that freeing a client's buffers cannot bring the
  // server back under it between commands.
  for (int i = 0; i < 64; ++i) {
    fc.execute({"SET", "filler:" + std::to_string(i), std::string(64 * 1024, 'x')});
  }
  full.command({"CONFIG", "SET", "maxmemory", "1mb"});
  dlock::mutex oom{fc, dlock::test::unique_name("lock")};
  const auto start = steady::now();
  oom.lock(ec);
  EXPECT_EQ(ec, errc::out_of_memory);
  EXPECT_LT(steady::now() - start, 1s);

  // READONLY: a replica.
  dlock::test::redis_server master;
  dlock::test::redis_server_options ro;
  ro.extra_args = {"--replicaof", "127.0.0.1", std::to_string(master.port())};
  dlock::test::redis_server replica{ro};
  dlock::client rc{config_for(replica)};
  dlock::mutex readonly{rc, dlock::test::unique_name("lock")};
  readonly.lock(ec);
  EXPECT_EQ(ec, errc::read_only);
}

TEST(mutex, shutdown_completes_a_blocked_lock) {
  dlock::test::redis_server srv;
  dlock::client holder{config_for(srv)};
  auto waiter = std::make_unique<dlock::client>(config_for(srv));
  const auto name = dlock::test::unique_name("lock");
  dlock::mutex h{holder, name}, w{*waiter, name};
  h.lock();
  auto t = on_thread([&] {
    std::error_code ec;
    w.lock(ec);
    return ec;
  });
  ASSERT_TRUE(dlock::test::wait_until([&] { return impl(*waiter).waiters().names() == 1; }, 5s));
  waiter->shutdown();
  ASSERT_EQ(t.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(t.get(), errc::shutdown);
  h.unlock();
}

// Review finding: an operation that a handler on the I/O thread started just before another
// thread shut the client down ran after shutdown's sweep (with one I/O thread the client has no
// strand, and what a handler posts joins the io_context's queue only when it returns): its
// acquisition went out after the sweep and stayed in Redis for its whole lease, held by nobody.
// Started before shutdown, it must be ended by it, and what it took given back. The server has
// not loaded the scripts yet: the acquisition and its give-back are each answered NOSCRIPT and
// sent again, after shutdown's PING (client_impl::drain pings again behind them).
TEST(mutex, shutdown_ends_an_operation_that_a_handler_started_just_before_it) {
  // Before the client: its handlers refer to these until it has stopped.
  std::promise<void> started;
  std::promise<std::error_code> outcome;
  dlock::test::redis_server srv;
  auto c = std::make_unique<dlock::client>(config_for(srv));
  const auto name = dlock::test::unique_name("lock");
  dlock::mutex m{*c, name};
  c->ping();
  asio::post(impl(*c).strand(), [&] {
    // A lease that came through is released by its destructor (or ends with the client).
    m.async_lock([&](std::error_code ec, dlock::lease) { outcome.set_value(ec); });
    started.set_value();
    // Stay in this handler until shutdown has begun (bounded), and a little longer: it posts its
    // sweep right after it says so.
    const auto end = steady::now() + 2s;
    while (!impl(*c).stopped() && steady::now() < end) std::this_thread::sleep_for(1ms);
    std::this_thread::sleep_for(20ms);
  });
  started.get_future().wait();
  auto stopper = std::async(std::launch::async, [&] { c->shutdown(); });
  ASSERT_EQ(stopper.wait_for(10s), std::future_status::ready);
  auto got = outcome.get_future();
  ASSERT_EQ(got.wait_for(5s), std::future_status::ready);
  const auto ec = got.get();
  EXPECT_TRUE(!ec || ec == errc::shutdown) << ec.message();
  EXPECT_EQ(srv.command({"EXISTS", name}), ":0")
      << "the acquisition was left in Redis: " << srv.command({"HGETALL", name});
}

}  // namespace

namespace {

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

// Review finding: calls made after shutdown (the mutex keeps the client's internals alive)
// blocked forever.
TEST(mutex, calls_after_shutdown_complete_with_shutdown) {
  dlock::test::redis_server srv;
  auto c = std::make_unique<dlock::client>(config_for(srv));
  dlock::mutex m{*c, dlock::test::unique_name("lock")};
  m.lock();
  c.reset();  // destroys the client: shuts it down
  auto call = [&](auto f) {
    auto r = std::async(std::launch::async, [&] {
      std::error_code ec;
      f(ec);
      return ec;
    });
    EXPECT_EQ(r.wait_for(5s), std::future_status::ready);
    return r.get();
  };
  EXPECT_EQ(call([&](std::error_code& ec) { m.lock(ec); }), errc::shutdown);
  EXPECT_EQ(call([&](std::error_code& ec) { m.try_lock(ec); }), errc::shutdown);
  std::error_code unlock_ec;
  m.unlock(unlock_ec);  // on the owning thread
  EXPECT_EQ(unlock_ec, errc::shutdown);
  auto f = m.async_try_lock(asio::use_future);
  ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
  EXPECT_THROW(f.get(), std::system_error);
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

namespace {

// An asynchronous chain of turns on one mutex: async_lock_for(10s), then in its handler (on an
// I/O thread) `inside` and async_unlock, whose handler starts the next turn; `finished` when
// its turns are done or one failed. Its handlers refer to it, the counters and `inside` until
// it has finished: they must outlive the client's I/O (declare them before the client).
struct async_chain {
  dlock::mutex m;
  int left;
  std::atomic<int>& failures;
  std::atomic<int>& done_turns;
  std::function<void()> inside;
  std::promise<void> finished{};

  void turn() {
    m.async_lock_for(10s, [this](std::error_code ec, dlock::lease l) {
      if (ec) {
        ++failures;
        return finished.set_value();
      }
      if (inside) inside();
      auto held = std::make_shared<dlock::lease>(std::move(l));
      held->async_unlock([this, held](std::error_code uec) {
        if (uec) ++failures;
        ++done_turns;
        if (--left == 0) return finished.set_value();
        turn();
      });
    });
  }
};

}  // namespace

// Threads of one client on the blocking API and chains on the asynchronous one take turns on one
// name, never two at once, and every turn ends released.
TEST(mutex, a_clients_threads_and_async_chains_exclude_each_other) {
  // Before the client: its handlers refer to these until it has stopped (also when an
  // assertion below ends the test early).
  constexpr int threads = 4, chains = 2, turns = 15;
  std::atomic<int> inside{0}, overlaps{0}, failures{0}, done_turns{0};
  auto critical = [&] {
    if (inside.fetch_add(1) != 0) ++overlaps;
    std::this_thread::sleep_for(1ms);
    inside.fetch_sub(1);
  };
  std::vector<std::unique_ptr<async_chain>> cs;  // before the client (above)
  dlock::test::redis_server srv;
  dlock::client c{config_for(srv)};
  const auto name = dlock::test::unique_name("lock");
  std::vector<std::future<void>> workers;
  for (int t = 0; t < threads; ++t) {
    workers.push_back(std::async(std::launch::async, [&] {
      dlock::mutex m{c, name};
      for (int i = 0; i < turns; ++i) {
        std::error_code ec;
        if (!m.try_lock_for(10s, ec)) {
          ++failures;
          return;
        }
        critical();
        m.unlock(ec);
        if (ec) ++failures;
        ++done_turns;
      }
    }));
  }
  for (int i = 0; i < chains; ++i) {
    cs.push_back(std::make_unique<async_chain>(
        async_chain{dlock::mutex{c, name}, turns, failures, done_turns, critical}));
    cs.back()->turn();
  }
  for (auto& w : workers) {
    ASSERT_EQ(w.wait_for(60s), std::future_status::ready);
    w.get();
  }
  for (auto& ch : cs) ASSERT_EQ(ch->finished.get_future().wait_for(60s), std::future_status::ready);
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(done_turns.load(), (threads + chains) * turns);
  EXPECT_EQ(exists(c, name), 0);
}

namespace {

// A completion handler runs on its client's I/O thread; an operation it starts on another client
// is that client's to run. A handler of client A's lock takes B's lock, releases both, and does
// it again: every completion comes on its own client's thread, none is lost or run on the other's.
TEST(mutex, a_handler_of_one_client_starts_steps_on_another) {
  std::promise<int> finished;
  int rounds = 0;
  std::function<void()> round;
  dlock::test::redis_server srv;
  dlock::client a{config_for(srv)}, b{config_for(srv)};
  const auto name_a = dlock::test::unique_name("lock"), name_b = dlock::test::unique_name("lock");
  dlock::mutex ma{a, name_a}, mb{b, name_b};
  round = [&] {
    ma.async_lock([&](std::error_code ec, dlock::lease la) {
      if (ec) return finished.set_value(-1);
      EXPECT_TRUE(impl(a).on_io_thread());
      auto held_a = std::make_shared<dlock::lease>(std::move(la));
      mb.async_lock([&, held_a](std::error_code ec2, dlock::lease lb) {
        if (ec2) return finished.set_value(-2);
        EXPECT_TRUE(impl(b).on_io_thread());
        auto held_b = std::make_shared<dlock::lease>(std::move(lb));
        held_b->async_unlock([&, held_a, held_b](std::error_code ub) {
          if (ub) return finished.set_value(-3);
          held_a->async_unlock([&, held_a](std::error_code ua) {
            if (ua) return finished.set_value(-4);
            EXPECT_TRUE(impl(a).on_io_thread());
            if (++rounds == 20) return finished.set_value(rounds);
            round();
          });
        });
      });
    });
  };
  round();
  auto got = finished.get_future();
  ASSERT_EQ(got.wait_for(20s), std::future_status::ready);
  EXPECT_EQ(got.get(), 20);
  EXPECT_EQ(exists(a, name_a), 0);
  EXPECT_EQ(exists(b, name_b), 0);
}

// Chains take their next steps from the reads that complete them: many chains at once, each
// many turns, all end, every turn released, and the client's other calls still go through.
TEST(mutex, fifty_async_chains_of_lock_and_unlock_all_finish) {
  constexpr int chains = 50, turns = 40;
  std::atomic<int> failures{0}, done_turns{0};
  std::vector<std::unique_ptr<async_chain>> cs;
  dlock::test::redis_server srv;
  dlock::client c{config_for(srv)};
  std::vector<std::string> names;
  for (int i = 0; i < chains; ++i) {
    names.push_back(dlock::test::unique_name("chain"));
    cs.push_back(std::make_unique<async_chain>(
        async_chain{dlock::mutex{c, names.back()}, turns, failures, done_turns, {}}));
  }
  for (auto& ch : cs) ch->turn();
  for (auto& ch : cs) ASSERT_EQ(ch->finished.get_future().wait_for(60s), std::future_status::ready);
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(done_turns.load(), chains * turns);
  for (const auto& n : names) EXPECT_EQ(exists(c, n), 0) << n;
  EXPECT_EQ(c.execute({"ECHO", "alive"}).str(), "alive");
}

}  // namespace
