// dlock::fair_mutex in one process against a real redis-server: Redisson's RFairLock layout,
// reentrancy and fencing, strict arrival order, waiters that give up or die leaving the queue,
// and kinds that do not mix. Multi-process and Redisson-protocol cases: family_process_test.cpp.
#include "dlock/fair_mutex.hpp"

#include <gtest/gtest.h>

#include <asio/use_future.hpp>
#include <chrono>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dlock/keys.hpp"
#include "dlock/mutex.hpp"
#include "dlock/shared_mutex.hpp"
#include "mutex_helpers.hpp"
#include "support/redis_server.hpp"
#include "test_util.hpp"

using namespace std::chrono_literals;
using dlock::errc;

namespace {

using namespace dlock::test;

std::int64_t llen(dlock::client& c, const std::string& key) {
  return c.execute({"LLEN", key}).integer();
}

TEST(fair_mutex, is_reentrant_fenced_and_leaves_redissons_layout_behind) {
  redis_server srv;
  dlock::client c{config_for(srv)};
  dlock::fair_mutex m{c, unique_name("fair")};
  m.lock();
  m.lock();
  EXPECT_EQ(m.hold_count(), 2u);
  EXPECT_GT(m.fencing_token(), 0u);
  const auto field = c.id() + ":";
  const auto fields = c.execute({"HKEYS", m.name()});
  ASSERT_EQ(fields.elements().size(), 1u);
  EXPECT_EQ(fields.elements()[0].str().rfind(field, 0), 0u) << "owner <uuid>:<thread>";
  m.unlock();
  m.unlock();
  EXPECT_EQ(exists(c, m.name()), 0);
  EXPECT_EQ(exists(c, dlock::keys::fair_queue(m.name())), 0);
  EXPECT_EQ(exists(c, dlock::keys::fair_timeouts(m.name())), 0);
  std::error_code ec;
  m.unlock(ec);
  EXPECT_EQ(ec, errc::not_owner);
}

// Waiters queue in the order they arrive (each starts once the one before is in the list) and
// get the lock in that order, one at a time.
TEST(fair_mutex, serves_waiters_in_arrival_order) {
  redis_server srv;
  dlock::client c{config_for(srv)};
  const auto name = unique_name("fair");
  dlock::fair_mutex holder{c, name};
  holder.lock();
  recorder<int> order;
  std::vector<std::future<void>> waiters;
  for (int i = 0; i < 5; ++i) {
    waiters.push_back(on_thread([&, i] {
      dlock::fair_mutex m{c, name};
      ASSERT_TRUE(m.try_lock_for(20s));
      order.push(i);
      std::this_thread::sleep_for(20ms);
      m.unlock();
    }));
    ASSERT_TRUE(wait_until([&] { return llen(c, dlock::keys::fair_queue(name)) == i + 1; }, 5s));
  }
  holder.unlock();
  ASSERT_TRUE(order.wait_for(20s, [](const auto& v) { return v.size() == 5; }));
  EXPECT_EQ(order.items(), (std::vector<int>{0, 1, 2, 3, 4}));
  for (auto& w : waiters) w.get();
  EXPECT_EQ(exists(c, dlock::keys::fair_queue(name)), 0);
}

// A single try never queues; a newcomer does not pass a queued waiter even when the lock is
// free for a moment.
TEST(fair_mutex, a_newcomer_does_not_pass_the_queue) {
  redis_server srv;
  dlock::client c{config_for(srv)};
  const auto name = unique_name("fair");
  const auto queue = dlock::keys::fair_queue(name);
  // A queued waiter of another process (as Redisson writes it), alive for 5 s more.
  c.execute({"RPUSH", queue, "other:1"});
  const auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  c.execute({"ZADD", dlock::keys::fair_timeouts(name), std::to_string(now_ms + 5000), "other:1"});
  dlock::fair_mutex m{c, name};
  EXPECT_FALSE(m.try_lock()) << "the head is someone else";
  EXPECT_EQ(llen(c, queue), 1) << "a single try does not queue";
  // Its deadline passes: it is purged, and a wait takes the lock within the purge.
  const auto t = std::chrono::steady_clock::now();
  EXPECT_TRUE(m.try_lock_for(10s));
  EXPECT_GE(since(t), 4000ms);
  EXPECT_EQ(exists(c, queue), 0);
  m.unlock();
}

// A waiter that times out leaves both structures; one behind it is next.
TEST(fair_mutex, a_waiter_that_gives_up_leaves_the_queue) {
  redis_server srv;
  dlock::client c{config_for(srv)};
  const auto name = unique_name("fair");
  dlock::fair_mutex holder{c, name};
  holder.lock();
  auto quitter = on_thread([&] {
    dlock::fair_mutex m{c, name};
    return m.try_lock_for(300ms);
  });
  ASSERT_TRUE(wait_until([&] { return llen(c, dlock::keys::fair_queue(name)) == 1; }, 5s));
  auto stayer = on_thread([&] {
    dlock::fair_mutex m{c, name};
    const bool got = m.try_lock_for(10s);
    if (got) m.unlock();
    return got;
  });
  EXPECT_FALSE(quitter.get());
  ASSERT_TRUE(wait_until([&] { return llen(c, dlock::keys::fair_queue(name)) == 1; }, 5s));
  EXPECT_EQ(c.execute({"ZCARD", dlock::keys::fair_timeouts(name)}).integer(), 1);
  const auto t = std::chrono::steady_clock::now();
  holder.unlock();
  EXPECT_TRUE(stayer.get());
  EXPECT_LT(since(t), 2000ms) << "woken on its own channel, not by its re-check";
}

TEST(fair_mutex, kinds_do_not_mix) {
  redis_server srv;
  dlock::client c{config_for(srv)};
  const auto name = unique_name("kinds");
  dlock::shared_mutex rw{c, name};
  rw.lock_shared();
  dlock::fair_mutex f{c, name};
  dlock::mutex m{c, name};
  std::error_code ec;
  EXPECT_FALSE(f.try_lock(ec));
  EXPECT_EQ(ec, errc::wrong_kind);
  EXPECT_FALSE(m.try_lock(ec));
  EXPECT_EQ(ec, errc::wrong_kind);
  m.lock(ec);
  EXPECT_EQ(ec, errc::wrong_kind) << "reported at once, never waited on";
  rw.unlock_shared();
  f.lock();
  EXPECT_FALSE(rw.try_lock_shared(ec));
  EXPECT_EQ(ec, errc::wrong_kind);
  EXPECT_FALSE(rw.try_lock(ec));
  EXPECT_EQ(ec, errc::wrong_kind);
  f.unlock();
}

TEST(fair_mutex, async_lease_and_lease_lost) {
  redis_server srv;
  dlock::client c{config_for(srv, "watchdog=900ms")};
  dlock::fair_mutex m{c, unique_name("fair")};
  auto l = m.async_lock_for(1s, asio::use_future).get();
  ASSERT_TRUE(l.owns());
  EXPECT_GT(l.fencing_token(), 0u);
  EXPECT_TRUE(m.force_unlock());
  EXPECT_TRUE(wait_until([&] { return l.lost().stop_requested(); }, 3s));
  std::error_code ec;
  l.unlock(ec);
  EXPECT_EQ(ec, errc::lease_lost);
}

}  // namespace
