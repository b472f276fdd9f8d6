// dlock::mutex's hand-off against a real redis-server: an unlock wakes the waiter by pub/sub
// within milliseconds, gives the lock to the head of the waiter queue outright (its owner field,
// its own lease, a fencing token) and tells that waiter's client alone; waiters are served in
// arrival order, nobody barges a hand-off, and a hand-off nobody takes ends with the waiter's
// lease. (Helpers: mutex_helpers.hpp.)
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "dlock/keys.hpp"
#include "dlock/mutex.hpp"
#include "mutex_helpers.hpp"
#include "queued_waiter.hpp"
#include "scripts/script.hpp"
#include "support/child_process.hpp"
#include "support/redis_server.hpp"
#include "test_util.hpp"

using namespace std::chrono_literals;
using dlock::errc;
using steady = std::chrono::steady_clock;

namespace {

using namespace dlock::test;

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

}  // namespace
