// A dlock::mutex's client going away, against a real redis-server: a lease dropped just before
// its client is destroyed is released, shutdown completes a blocked lock and ends an operation a
// handler started just before it, and calls after shutdown complete with errc::shutdown.
// (Helpers: mutex_helpers.hpp.)
#include <gtest/gtest.h>

#include <asio/post.hpp>
#include <asio/use_future.hpp>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <system_error>
#include <thread>

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

}  // namespace
