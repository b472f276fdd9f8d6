// dlock::shared_mutex in one process against a real redis-server: readers in parallel, writers
// exclusive, SharedTimedLockable with the std guards, downgrade, the upgrade refused, writers not
// starved, and the watchdog renewing only its own read holds. Multi-process and
// Redisson-protocol cases: family_process_test.cpp.
#include "dlock/shared_mutex.hpp"

#include <gtest/gtest.h>

#include <asio/use_future.hpp>
#include <chrono>
#include <future>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>

#include "dlock/keys.hpp"
#include "mutex_helpers.hpp"
#include "support/redis_server.hpp"
#include "test_util.hpp"

using namespace std::chrono_literals;
using dlock::errc;

namespace {

using namespace dlock::test;

std::string hget(dlock::client& c, const std::string& key, const std::string& field) {
  auto r = c.execute({"HGET", key, field});
  return r.is_nil() ? "(nil)" : r.str();
}

TEST(shared_mutex, readers_share_writers_exclude) {
  redis_server srv;
  dlock::client a{config_for(srv)}, b{config_for(srv)}, w{config_for(srv)};
  const auto name = unique_name("rw");
  dlock::shared_mutex ra{a, name}, rb{b, name}, rw{w, name};
  {
    std::shared_lock r1{ra};
    std::shared_lock r2{rb};
    EXPECT_EQ(hget(a, name, "mode"), "read");
    EXPECT_GT(ra.read_side().fencing_token(), 0u);
    EXPECT_NE(ra.read_side().fencing_token(), rb.read_side().fencing_token());
    EXPECT_FALSE(rw.try_lock()) << "a writer waits for the readers";
    // The hold keys carry the leases: {name}:<owner>:rwlock_timeout:1.
    const auto owner = a.id() + ":";
    const auto keys = a.execute({"KEYS", "{" + name + "}:" + owner + "*:rwlock_timeout:1"});
    EXPECT_EQ(keys.elements().size(), 1u);
  }
  EXPECT_EQ(exists(a, name), 0) << "the last reader deletes the hash";
  {
    std::unique_lock exclusive{ra};
    EXPECT_EQ(hget(a, name, "mode"), "write");
    EXPECT_FALSE(rb.try_lock_shared());
    EXPECT_FALSE(rb.try_lock());
    EXPECT_TRUE(ra.try_lock()) << "reentrant";
    ra.unlock();
  }
  EXPECT_EQ(exists(a, name), 0);
}

TEST(shared_mutex, a_writer_downgrades_a_reader_cannot_upgrade) {
  redis_server srv;
  dlock::client a{config_for(srv)}, b{config_for(srv)};
  const auto name = unique_name("rw");
  dlock::shared_mutex ra{a, name}, rb{b, name};
  ra.lock();
  ra.lock_shared();
  ra.unlock();
  EXPECT_EQ(hget(a, name, "mode"), "read") << "downgraded";
  EXPECT_TRUE(rb.try_lock_shared()) << "other readers may enter at once";
  rb.unlock_shared();
  std::error_code ec;
  EXPECT_FALSE(ra.try_lock(ec));
  EXPECT_EQ(ec, errc::upgrade_refused);
  ra.lock(ec);
  EXPECT_EQ(ec, errc::upgrade_refused) << "at once, never a deadlock";
  try {
    std::unique_lock w{ra};
    ADD_FAILURE() << "the upgrade was not refused";
  } catch (const dlock::lock_error& e) {
    EXPECT_EQ(e.code(), errc::upgrade_refused);
  }
  ra.unlock_shared();
  EXPECT_EQ(exists(a, name), 0);
}

// While a writer waits, new readers wait behind it; the readers holding may re-enter; the
// writer gets the lock when they leave, before the new reader.
TEST(shared_mutex, a_waiting_writer_holds_new_readers_back) {
  redis_server srv;
  dlock::client a{config_for(srv)}, b{config_for(srv)}, w{config_for(srv)};
  const auto name = unique_name("rw");
  dlock::shared_mutex ra{a, name}, rb{b, name}, rw{w, name};
  ra.lock_shared();
  recorder<std::string> order;
  auto writer = on_thread([&] {
    rw.lock();
    order.push("writer");
    std::this_thread::sleep_for(50ms);
    rw.unlock();
  });
  ASSERT_TRUE(wait_until(
      [&] {
        return a.execute({"ZCARD", dlock::keys::waiting_writers(name)}).integer() == 1;
      },
      5s));
  EXPECT_FALSE(rb.try_lock_shared()) << "a new reader queues behind the writer";
  auto reader = on_thread([&] {
    rb.lock_shared();
    order.push("reader");
    rb.unlock_shared();
  });
  EXPECT_TRUE(ra.try_lock_shared()) << "a reader already holding re-enters";
  ra.unlock_shared();
  std::this_thread::sleep_for(100ms);
  EXPECT_TRUE(order.items().empty());
  ra.unlock_shared();
  ASSERT_TRUE(order.wait_for(10s, [](const auto& v) { return v.size() == 2; }));
  EXPECT_EQ(order.items(), (std::vector<std::string>{"writer", "reader"}));
  writer.get();
  reader.get();
  EXPECT_EQ(exists(a, dlock::keys::waiting_writers(name)), 0);
}

// A writer that gives up leaves the waiting writers, and readers go on at once.
TEST(shared_mutex, a_writer_that_gives_up_lets_readers_in) {
  redis_server srv;
  dlock::client a{config_for(srv)}, b{config_for(srv)};
  const auto name = unique_name("rw");
  dlock::shared_mutex ra{a, name}, rb{b, name};
  ra.lock_shared();
  EXPECT_FALSE(rb.try_lock_for(300ms));
  // Its give-back went out before the call returned (a first use of the script is resent as
  // EVAL after NOSCRIPT, which may follow a later command).
  EXPECT_TRUE(wait_until([&] { return exists(b, dlock::keys::waiting_writers(name)) == 0; }, 2s));
  EXPECT_TRUE(rb.try_lock_shared());
  rb.unlock_shared();
  ra.unlock_shared();
}

// The watchdog renews this owner's read holds and the hash, never another reader's: a reader
// that died (its hold key left to expire) does not keep the lock once the live one leaves.
TEST(shared_mutex, the_watchdog_renews_only_its_own_read_holds) {
  redis_server srv;
  dlock::client c{config_for(srv, "watchdog=900ms")};
  const auto name = unique_name("rw");
  dlock::shared_mutex rw{c, name};
  rw.lock_shared();
  rw.lock_shared();
  const auto dead = "{" + name + "}:dead:1:rwlock_timeout:1";
  c.execute({"HSET", name, "dead:1", "1"});
  c.execute({"SET", dead, "1", "PX", "900"});
  std::this_thread::sleep_for(2500ms);
  EXPECT_EQ(exists(c, dead), 0) << "another reader's hold was not renewed";
  EXPECT_FALSE(rw.read_side().lease_lost().stop_requested());
  EXPECT_GT(rw.read_side().lease_time_left(), 0ms);
  EXPECT_EQ(rw.read_side().hold_count(), 2u);
  rw.unlock_shared();
  rw.unlock_shared();
  EXPECT_EQ(exists(c, name), 0) << "the dead reader's field does not keep the hash";
}

TEST(shared_mutex, async_sides_and_lease_lost) {
  redis_server srv;
  dlock::client c{config_for(srv, "watchdog=900ms")};
  const auto name = unique_name("rw");
  dlock::shared_mutex rw{c, name};
  auto r1 = rw.async_lock_shared(asio::use_future).get();
  auto r2 = rw.async_lock_shared_for(1s, asio::use_future).get();
  ASSERT_TRUE(r1.owns() && r2.owns());
  EXPECT_NE(r1.owner(), r2.owner()) << "each lease its own owner";
  EXPECT_THROW(rw.async_lock_for(200ms, asio::use_future).get(), std::system_error);
  EXPECT_TRUE(rw.read_side().force_unlock());
  EXPECT_TRUE(
      wait_until([&] { return r1.lost().stop_requested() && r2.lost().stop_requested(); }, 3s));
  auto w = rw.async_lock(asio::use_future).get();
  EXPECT_GT(w.fencing_token(), 0u);
  w.unlock();
}

}  // namespace
