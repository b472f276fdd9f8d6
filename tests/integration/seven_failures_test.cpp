// Seven ways a hand-made Redis lock fails, told by the lock tutorial (seed document 001,
// "循序渐进 Redis 分布式锁"; docs/examples.md). Its batch scheduler locks `batch:task:list` so
// that only one scheduler moves due tasks to the queue, and the lock fails it again and again.
// Each TEST is one story: the tutorial's naive lock (SET NX, DEL) failing it, then dlock::mutex
// passing it, against a real redis-server.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "dlock/client.hpp"
#include "dlock/config.hpp"
#include "dlock/mutex.hpp"
#include "support/child_process.hpp"
#include "support/redis_server.hpp"
#include "support/tcp_proxy.hpp"
#include "test_util.hpp"

#ifndef DLOCK_LOCK_WORKER
#error "DLOCK_LOCK_WORKER must name the dlock_lock_worker executable"
#endif

using namespace std::chrono_literals;

namespace seven_failures_story {

using namespace dlock::test;
using std::chrono::milliseconds;

// The lock the tutorial builds first: SET NX (with PX once it has learnt about TTLs) to lock,
// DEL to unlock. held() is the holder's own belief: the only thing such a lock can consult.
class naive_lock {
 public:
  naive_lock(dlock::client& redis, std::string key) : redis_{redis}, key_{std::move(key)} {}

  bool lock(std::optional<milliseconds> ttl = std::nullopt) {
    std::vector<std::string> set{"SET", key_, "1", "NX"};
    if (ttl) {
      set.push_back("PX");
      set.push_back(std::to_string(ttl->count()));
    }
    held_ = !redis_.execute(set).is_nil();  // "OK", or nil when someone holds it
    return held_;
  }
  void unlock() {
    redis_.execute({"DEL", key_});  // whoever's lock it is by now
    held_ = false;
  }
  bool held() const { return held_; }

 private:
  dlock::client& redis_;
  std::string key_;
  bool held_ = false;
};

// PTTL of `key`: -2 when it is gone, -1 when it never expires.
std::int64_t pttl(dlock::client& c, const std::string& key) {
  return c.execute({"PTTL", key}).integer();
}

// The protected resource of the last story: a hash that takes a write only with a fencing token
// at least as large as the largest it has seen (a database's conditional update, in one script).
bool fenced_write(dlock::client& c, const std::string& resource, std::uint64_t token,
                  const std::string& value) {
  static const char* script =
      "local last = tonumber(redis.call('hget', KEYS[1], 'token') or '0') "
      "if tonumber(ARGV[1]) < last then return 0 end "
      "redis.call('hset', KEYS[1], 'token', ARGV[1], 'value', ARGV[2]) return 1";
  return c.execute({"EVAL", script, "1", resource, std::to_string(token), value}).integer() == 1;
}

// A config for 127.0.0.1:`port` (a proxy's) that reconnects quickly, with URI query `extra`.
dlock::config config_for_port(std::uint16_t port, const std::string& extra = "") {
  auto cfg = dlock::config::from_uri("redis://127.0.0.1:" + std::to_string(port) +
                                     (extra.empty() ? "" : "?" + extra));
  cfg.reconnect_min = milliseconds{10};
  cfg.reconnect_max = milliseconds{100};
  return cfg;
}

// Story 1 ("第一次懵逼"): tasks stopped being queued; `batch:task:list` sat in Redis with no
// expiry. A scheduler died (kill -9) between its lock and its DEL, and nothing else ever deletes
// the key. The tutorial's first fix, SETNX then PEXPIRE in two commands, fails the same way when
// the crash falls between the two. dlock: every lock has a lease (the watchdog's, renewed only
// while the process lives), so a dead holder's lock frees itself when its lease ends.
TEST(seven_failures, story1_a_crash_without_a_ttl_holds_the_lock_forever) {
  redis_server srv;
  dlock::client c{config_for(srv)};
  const auto port = std::to_string(srv.port());
  for (const char* crash :
       {"redis-cli -p $0 SET $1 1 NX >/dev/null && kill -9 $$",
        "redis-cli -p $0 SETNX $1 1 >/dev/null && kill -9 $$ && redis-cli -p $0 PEXPIRE $1 3000"}) {
    const auto key = unique_name("batch:task:list");
    EXPECT_EQ(run_program({"sh", "-c", crash, port, key}, 10s), -1) << "the scheduler was killed";
    naive_lock next{c, key};
    EXPECT_EQ(pttl(c, key), -1) << crash << ": the lock never expires";
    EXPECT_FALSE(next.lock(3s)) << crash << ": and no other scheduler gets it, ever";
  }

  const auto name = unique_name("batch:task:list");
  child_process holder{{DLOCK_LOCK_WORKER, "hold", srv.url() + "?watchdog=1s", name}};
  const auto line = holder.read_line(10s);
  ASSERT_TRUE(line && line->rfind("acquired", 0) == 0) << holder.diagnostics();
  holder.kill9();
  dlock::mutex next{c, name};
  EXPECT_TRUE(next.is_locked()) << "held by the dead process...";
  EXPECT_TRUE(next.try_lock_for(5s)) << "...until its 1 s lease ends";
  next.unlock();
}

// Story 2 ("第二次懵逼"): a batch was queued twice. One scheduler unlocked 3.5 s after it locked,
// with a 3 s TTL: its DEL removed the lock another scheduler had taken in between, letting a
// third in. dlock: the lock hash records its owner and unlock is a compare-and-delete; a stale
// holder's unlock reports errc::lease_lost and touches nothing of the new holder's.
TEST(seven_failures, story2_unlock_deletes_another_holders_lock) {
  redis_server srv;
  dlock::client a{config_for(srv)}, b{config_for(srv)}, third{config_for(srv)};
  {
    const auto key = unique_name("batch:task:list");
    naive_lock first{a, key}, second{b, key}, late{third, key};
    ASSERT_TRUE(first.lock(300ms));
    ASSERT_TRUE(wait_until([&] { return pttl(a, key) == -2; }, 2s)) << "its job outlives the TTL";
    ASSERT_TRUE(second.lock(3s));
    first.unlock();  // DEL: the second scheduler's lock
    EXPECT_TRUE(late.lock(3s)) << "a third scheduler gets in";
    EXPECT_TRUE(second.held()) << "while the second still runs: two in the critical section";
  }
  const auto name = unique_name("batch:task:list");
  dlock::mutex first{a, name}, second{b, name}, late{third, name};
  ASSERT_TRUE(first.try_lock_for(0ms, 300ms));
  ASSERT_TRUE(wait_until([&] { return !first.is_locked(); }, 2s)) << "its job outlives the lease";
  ASSERT_TRUE(second.try_lock_for(1s));
  std::error_code ec;
  first.unlock(ec);
  EXPECT_EQ(ec, dlock::errc::lease_lost) << ec.message();
  EXPECT_TRUE(second.is_held_by_current_thread()) << "the second holder's lock is untouched";
  EXPECT_FALSE(late.try_lock()) << "and nobody else gets in";
  second.unlock();
}

// Story 3 ("优化二：锁超时"): a 2 s lock whose SET took 2.5 s (a network stall) had expired in
// Redis before the holder read "OK"; another thread took it meanwhile. The tutorial's fix
// compares the acquisition's duration with the TTL and retries. dlock does that for every
// acquisition: a lease is trusted from the moment the acquire was *sent*, so a grant whose
// reply comes after `sent + lease - drift` is never reported; that one acquisition is given
// back and the attempt repeated, until one is fast enough or the wait ends. Here a proxy
// delays Redis's replies by 500 ms against a 300 ms lock.
TEST(seven_failures, story3_an_acquisition_slower_than_the_ttl) {
  redis_server srv;
  tcp_proxy slow{srv.port()};
  dlock::client far{config_for_port(slow.port())}, near{config_for(srv)};
  const auto name = unique_name("batch:task:list");
  dlock::mutex far_lock{far, name}, near_lock{near, name};
  ASSERT_TRUE(far_lock.try_lock_for(1s, 300ms));  // scripts loaded, subscriber up: all warm
  far_lock.unlock();
  slow.delay(dlock::test::direction::server_to_client, 500ms);
  {
    const auto key = unique_name("batch:task:list");
    naive_lock first{far, key}, second{near, key};
    ASSERT_TRUE(first.lock(300ms)) << "OK, 500 ms later";
    EXPECT_TRUE(second.lock(3s)) << "the key had expired: both believe they hold the lock";
  }
  EXPECT_FALSE(far_lock.try_lock_for(1200ms, 300ms)) << "a grant it could not trust was reported";
  EXPECT_EQ(far_lock.lease_time_left(), 0ms);
  EXPECT_TRUE(near_lock.try_lock_for(2s)) << "the late grants were given back";
  EXPECT_TRUE(near_lock.is_held_by_current_thread()) << "and the give-backs took nothing of ours";
  near_lock.unlock();
  slow.pass();
  EXPECT_TRUE(far_lock.try_lock_for(2s, 300ms)) << "once round trips are fast again, it acquires";
  far_lock.unlock();
}

// Story 4 (the same section): a 5 s lock around a job that took 10 s expired halfway through,
// and another process started the same job. The tutorial's answer is a timer that renews the
// TTL every ttl/3 while the job runs. dlock's watchdog does that for every lock taken without a
// lease: a job three leases long keeps the lock to the end.
TEST(seven_failures, story4_a_job_longer_than_the_lease) {
  redis_server srv;
  dlock::client a{config_for(srv, "watchdog=500ms")}, b{config_for(srv)};
  {
    const auto key = unique_name("batch:task:list");
    naive_lock first{a, key}, second{b, key};
    ASSERT_TRUE(first.lock(300ms));
    ASSERT_TRUE(wait_until([&] { return second.lock(3s); }, 2s))
        << "the second scheduler gets in while the first's job still runs";
    EXPECT_TRUE(first.held());
  }
  const auto name = unique_name("batch:task:list");
  dlock::mutex first{a, name}, second{b, name};
  first.lock();  // the watchdog's 500 ms lease, renewed every third of it
  const auto job_end = std::chrono::steady_clock::now() + 1500ms;  // the job: three leases
  int tries = 0;
  while (std::chrono::steady_clock::now() < job_end) {
    ASSERT_FALSE(second.try_lock()) << "another scheduler got in during the job";
    ++tries;
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_GE(tries, 10);
  EXPECT_FALSE(first.lease_lost().stop_requested());
  first.unlock();
  EXPECT_TRUE(second.try_lock());
  second.unlock();
}

// Story 5 (the note after the refresh timer): a scheduler holds a 2 s lock, then Redis goes
// down; its renewals fail, Redis comes back 2 s later without the key, and another scheduler
// takes the lock while the first still runs. A naive lock cannot even tell its holder. dlock
// trusts a hold only until its last confirmed renewal's send time + lease - drift: with Redis
// unreachable, lease_lost() is requested and lease_time_left() drops to zero before the key
// can expire, so the holder stops before anyone else can get in. (Redis coming back *without
// its data* sooner than the lease is another matter: docs/safety.md.)
TEST(seven_failures, story5_redis_down_while_the_lock_is_held) {
  redis_server srv;
  {
    dlock::client a{config_for(srv)};
    const auto key = unique_name("batch:task:list");
    naive_lock first{a, key};
    ASSERT_TRUE(first.lock(300ms));
    srv.stop();   // down for longer than the TTL...
    srv.start();  // ...and back, empty
    dlock::client b{config_for(srv)};
    naive_lock second{b, key};
    EXPECT_TRUE(second.lock(3s));
    EXPECT_TRUE(first.held()) << "the first scheduler was never told: both run";
  }
  dlock::client a{config_for(srv, "watchdog=600ms")};
  const auto name = unique_name("batch:task:list");
  dlock::mutex first{a, name};
  first.lock();
  const auto lost = first.lease_lost();
  srv.stop();
  EXPECT_TRUE(wait_until([&] { return lost.stop_requested(); }, 3s)) << "told within the lease";
  EXPECT_EQ(first.lease_time_left(), 0ms);
  srv.start();
  dlock::client b{config_for(srv)};
  dlock::mutex second{b, name};
  EXPECT_TRUE(second.try_lock_for(3s)) << "only now may another take it; the first has stopped";
  second.unlock();
  std::error_code ec;
  first.unlock(ec);
  EXPECT_EQ(ec, dlock::errc::lease_lost) << ec.message();
}

// Story 6 ("可重入性"): foo() takes the lock and calls bar(), which takes the same lock. With SET
// NX the second lock() fails (or, retrying, waits for itself forever). dlock::mutex is reentrant
// per thread, like Redisson's RLock: a hold count in the lock hash, freed at the last unlock.
TEST(seven_failures, story6_reentrancy) {
  redis_server srv;
  dlock::client c{config_for(srv)}, other{config_for(srv)};
  {
    naive_lock lock{c, unique_name("batch:task:list")};
    ASSERT_TRUE(lock.lock(3s));   // foo()
    EXPECT_FALSE(lock.lock(3s));  // bar(): locked out by its own caller
  }
  const auto name = unique_name("batch:task:list");
  dlock::mutex lock{c, name}, elsewhere{other, name};
  lock.lock();  // foo()
  lock.lock();  // bar()
  EXPECT_EQ(lock.hold_count(), 2u);
  lock.unlock();  // bar() returns...
  EXPECT_FALSE(elsewhere.try_lock()) << "...and foo() still holds the lock";
  lock.unlock();
  EXPECT_TRUE(elsewhere.try_lock());
  elsewhere.unlock();
}

// Story 7 (what no lock can do alone): a holder paused past its lease — a GC pause, a stopped
// VM, here SIGSTOP — wakes up believing it holds the lock, after another has taken it and
// written. The naive lock has nothing to stop the stale write. With dlock every first
// acquisition gets a larger fencing token; the resource keeps the largest it has seen and
// refuses older ones, so the paused holder's late write is refused even if it writes without
// checking its lease (which, woken, it finds lost: the worker reports so).
TEST(seven_failures, story7_a_paused_holder_stopped_by_a_fencing_token) {
  redis_server srv;
  dlock::client c{config_for(srv)};
  {
    const auto key = unique_name("batch:task:list"), resource = unique_name("task-table");
    naive_lock paused{c, key}, next{c, key};
    ASSERT_TRUE(paused.lock(300ms));
    ASSERT_TRUE(wait_until([&] { return pttl(c, key) == -2; }, 2s)) << "paused past its TTL";
    ASSERT_TRUE(next.lock(3s));
    c.execute({"HSET", resource, "value", "written by the next holder"});
    c.execute({"HSET", resource, "value", "stale write"});  // the paused one wakes and writes
    EXPECT_EQ(c.execute({"HGET", resource, "value"}).str(), "stale write") << "lost update";
  }
  const auto name = unique_name("batch:task:list"), resource = unique_name("task-table");
  child_process paused{{DLOCK_LOCK_WORKER, "hold_then_check", srv.url() + "?watchdog=600ms", name}};
  const auto line = paused.read_line(10s);
  ASSERT_TRUE(line && line->rfind("acquired ", 0) == 0) << paused.diagnostics();
  const std::uint64_t old_token = std::stoull(line->substr(9));
  paused.pause();  // SIGSTOP: its watchdog stops too
  dlock::mutex next{c, name};
  ASSERT_TRUE(next.try_lock_for(5s)) << "the paused holder's lease ends";
  ASSERT_GT(next.fencing_token(), old_token);
  EXPECT_TRUE(fenced_write(c, resource, next.fencing_token(), "written by the next holder"));
  paused.resume();
  EXPECT_EQ(paused.read_line(5s), "lost") << "woken, it finds its lease lost";
  EXPECT_FALSE(fenced_write(c, resource, old_token, "stale write"))
      << "and a late write is refused";
  EXPECT_EQ(c.execute({"HGET", resource, "value"}).str(), "written by the next holder");
  next.unlock();
}

}  // namespace seven_failures_story
