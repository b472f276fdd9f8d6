// Shared by the integration tests of a holder and a waiter: the two clients on one lock, and
// waiting until a waiter can be granted the lock.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>

#include "dlock/client.hpp"
#include "dlock/keys.hpp"
#include "dlock/mutex.hpp"
#include "runtime/client_impl.hpp"
#include "support/redis_server.hpp"
#include "test_util.hpp"

namespace dlock::test {

// Waits until `c`'s one waiter on `name` is registered, its client's channel subscribed and its
// ticket in the lock's queue: an unlock now grants the lock to it (or keeps it for it).
// (The lock's channel too, and a moment for the re-check that its confirmation sends: an
// attempt that ran after the grant would take it as its own.) A client's first wait queues its
// ticket before it subscribes: an unlock in between finds nobody listening and falls back to a
// reservation, so a test that counts grants waits here first.
inline void await_queued_waiter(redis_server& srv, dlock::client& c, const std::string& name) {
  using namespace std::chrono_literals;
  ASSERT_TRUE(wait_until([&] { return c.impl().waiters().channels() == 1; }, 5s));
  ASSERT_TRUE(wait_until([&] { return numsub(srv, keys::waiter_channel(c.impl().id())) == 1; }, 5s));
  ASSERT_TRUE(wait_until([&] { return numsub(srv, keys::lock_channel(name)) == 1; }, 5s));
  ASSERT_TRUE(wait_until([&] { return srv.command({"ZCARD", keys::waiter_queue(name)}) == ":1"; }, 5s));
  std::this_thread::sleep_for(50ms);
}

// One lock name on a fresh server, and two clients with a mutex each on it: `a` (the holder,
// configured with URI query `a_params`) and `b` (the waiter, with `b_params`; config_for).
// Tests name them with a structured binding: auto& [srv, name, holder, waiter, h, w] = l;
struct holder_and_waiter {
  explicit holder_and_waiter(const std::string& a_params = "", const std::string& b_params = "")
      : a{config_for(srv, a_params)}, b{config_for(srv, b_params)}, ma{a, name}, mb{b, name} {}
  // b takes the lock on another thread (bounded, should the test fail half-way) and releases it;
  // true if it got the lock (an error on unlock throws from get()).
  std::future<bool> b_takes_and_releases() {
    return std::async(std::launch::async, [this] {
      if (!mb.try_lock_for(std::chrono::seconds{10})) return false;
      mb.unlock();
      return true;
    });
  }
  redis_server srv;
  const std::string name = unique_name("lock");
  dlock::client a, b;
  dlock::mutex ma, mb;
};

}  // namespace dlock::test
