// dlock::mutex's fencing tokens against a real redis-server: strictly increasing across owners,
// one counter key per cluster slot, Redisson RFencedLock's counter read and advanced (never
// created), still increasing across a restart without persistence, and none with fencing off.
#include <gtest/gtest.h>

#include <asio/use_future.hpp>
#include <cstdint>
#include <string>

#include "dlock/inspect.hpp"
#include "dlock/keys.hpp"
#include "dlock/mutex.hpp"
#include "support/redis_server.hpp"
#include "test_util.hpp"

namespace {

using namespace dlock::test;

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

}  // namespace
