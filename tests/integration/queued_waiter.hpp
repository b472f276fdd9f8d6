// Shared by the integration tests of grants: wait until a waiter can be granted the lock.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "dlock/client.hpp"
#include "dlock/keys.hpp"
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

}  // namespace dlock::test
