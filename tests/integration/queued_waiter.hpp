// Shared by the integration tests of a holder and a waiter: the two clients on one lock, and
// waiting until an unlock can hand the lock to a waiter.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>

#include "dlock/client.hpp"
#include "dlock/keys.hpp"
#include "dlock/mutex.hpp"
#include "runtime/client_access.hpp"
#include "runtime/client_impl.hpp"
#include "support/redis_server.hpp"
#include "test_util.hpp"

namespace dlock::test {

// A client's internals (its connections, watchdog, waiter registry), for tests that look inside.
inline dlock::detail::client_impl& impl(dlock::client& c) {
  return dlock::detail::client_access::impl(c);
}

// Waits until `c`'s one waiter on `name` is registered, subscribed to the name's three channels
// (its client's waiter channel, dlock's and Redisson's) and queued: an unlock now hands the lock
// to it. With `evalsha_before` (the server's EVALSHA count, taken before the waiter started and
// after the scripts were loaded), also until the waiter has made its two attempts — the one that
// queued it and the re-check that the confirmation of its subscription asks for — so that from
// here on only a message or its re-check timer wakes it.
inline void await_queued_waiter(redis_server& srv, dlock::client& c, const std::string& name,
                                long long evalsha_before = -1) {
  using namespace std::chrono_literals;
  ASSERT_TRUE(wait_until([&] { return impl(c).waiters().names() == 1; }, 5s));
  ASSERT_TRUE(wait_until([&] { return numsub(srv, keys::waiter_channel(name, c.id())) == 1; }, 5s));
  ASSERT_TRUE(wait_until([&] { return numsub(srv, keys::dlock_channel(name)) == 1; }, 5s));
  ASSERT_TRUE(wait_until([&] { return numsub(srv, keys::lock_channel(name)) == 1; }, 5s));
  ASSERT_TRUE(wait_until(
      [&] {
        return srv.command({"ZCARD", keys::waiter_queue(name)}) == ":1";
      },
      5s));
  if (evalsha_before >= 0) {
    ASSERT_TRUE(wait_until([&] { return command_stat(srv, "evalsha") >= evalsha_before + 2; }, 5s))
        << command_stat(srv, "evalsha") - evalsha_before << " attempts";
  }
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
