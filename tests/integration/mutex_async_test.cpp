// dlock::mutex's asynchronous forms against a real redis-server: a lease through an awaitable,
// a future and its destruction; threads and asynchronous chains of one client excluding each
// other; a handler of one client starting steps on another; fifty chains at once.
// (Helpers: mutex_helpers.hpp.)
#include <gtest/gtest.h>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/use_future.hpp>
#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "dlock/mutex.hpp"
#include "mutex_helpers.hpp"
#include "queued_waiter.hpp"
#include "support/redis_server.hpp"
#include "test_util.hpp"

using namespace std::chrono_literals;
using dlock::errc;
using steady = std::chrono::steady_clock;

namespace {

using namespace dlock::test;

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
