// A hand-off to a waiter that stalls is as safe as an acquisition by one (review finding 1).
// The unlock gives the lock to the queue's head with that waiter's own full lease, so a grantee
// whose process or connection stalls right after the hand-off keeps the lock as long as a
// stalled holder would: nobody else gets in before its lease ends. (The protocol before kept a
// hand-off only for a 100 ms window: a Redisson-protocol client polling every 5 ms got in about
// 100 ms after the hand-off while the grantee went on.) And the grantee trusts nothing until its
// own attempt, sent after the hand-off message, is answered: while its command connection is
// frozen it reports nothing.
#include <gtest/gtest.h>

#include <future>
#include <string>
#include <thread>
#include <utility>

#include "../integration/test_util.hpp"
#include "dlock/keys.hpp"
#include "dlock/mutex.hpp"
#include "partition_util.hpp"
#include "support/redis_server.hpp"
#include "support/tcp_proxy.hpp"

using namespace std::chrono_literals;
using dlock::test::direction;
using dlock::test::wait_until;

namespace {

// Redisson's RedissonLock.tryLockInnerAsync (as tests/integration/redisson_client.py sends it):
// nil when acquired, else the PTTL.
constexpr const char* redisson_try_lock =
    "if (redis.call('exists', KEYS[1]) == 0) then "
    "redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); "
    "return nil; end; "
    "if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then "
    "redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); "
    "return nil; end; "
    "return redis.call('pttl', KEYS[1]);";

// A Redisson process polling `name` every 5 ms from now until `give_up`: when it got in (a
// default time_point: never).
std::chrono::steady_clock::time_point redisson_poller_gets_in(
    dlock::test::redis_server& srv, const std::string& name,
    std::chrono::steady_clock::time_point give_up) {
  while (std::chrono::steady_clock::now() < give_up) {
    const auto r = srv.command({"EVAL", redisson_try_lock, "1", name, "1000", "poller:1"});
    if (r == "$-1") return std::chrono::steady_clock::now();
    std::this_thread::sleep_for(5ms);
  }
  return {};
}

TEST(handoff_stall, a_stalled_grantee_keeps_the_lock_for_its_whole_lease) {
  dlock::test::redis_server srv;
  dlock::test::tcp_proxy proxy{srv.port()};
  // The waiter: through the proxy, a 2 s watchdog lease (the lease a hand-off gives it).
  dlock::client waiter{dlock::test::config_through(proxy, "watchdog=2s&recheck=1s&timeout=8s")};
  dlock::client holder{dlock::test::config_for(srv)};
  const auto name = dlock::test::unique_name("handoff_stall");
  dlock::mutex w{waiter, name};
  dlock::mutex h{holder, name};

  h.lock();
  waiter.ping();  // its command connection is open (and named) before the freeze
  auto outcome = std::async(std::launch::async, [&] {
    std::error_code ec;
    const bool got = w.try_lock_for(12s, ec);
    const auto at = std::chrono::steady_clock::now();
    if (got) w.unlock(ec);
    return std::pair{got, at};
  });
  ASSERT_TRUE(wait_until(
      [&] {
        return dlock::test::numsub(srv, dlock::keys::waiter_channel(name, waiter.id())) == 1 &&
               srv.command({"ZCARD", dlock::keys::waiter_queue(name)}) == ":1";
      },
      5s))
      << "the waiter is queued and listens on its channel";

  // The grantee stalls: its command connection (CLIENT SETNAME dlock; the subscriber's name is
  // dlock:sub) passes nothing either way from now on. Its subscriber still hears the hand-off.
  proxy.freeze(direction::both, "$5\r\ndlock\r\n");
  const auto handed = std::chrono::steady_clock::now();
  h.unlock();
  const auto pttl = std::stoll(srv.command({"PTTL", name}).substr(1));
  EXPECT_GT(pttl, 1500) << "the hand-off gave the grantee its own lease at once";

  // A Redisson process polls: it gets in only when the grantee's lease has ended.
  const auto got_in = redisson_poller_gets_in(srv, name, handed + 5s);
  ASSERT_NE(got_in, std::chrono::steady_clock::time_point{}) << "the lock ends with its lease";
  const auto after = dlock::test::ms_between(handed, got_in);
  EXPECT_GE(after, 1900) << "nobody gets in while the stalled grantee's lease lasts";
  const bool silent = outcome.wait_for(0ms) == std::future_status::timeout;
  EXPECT_TRUE(silent)
      << "the frozen grantee reported nothing: trust needs its own attempt's answer";

  // The grantee comes back: its attempt finds the lock taken (or free again), never trusted
  // across the poller's hold, and it acquires once the poller's 1 s lease has ended.
  proxy.thaw();
  const auto thawed = std::chrono::steady_clock::now();
  ASSERT_EQ(outcome.wait_for(12s), std::future_status::ready);
  const auto [got, at] = outcome.get();
  EXPECT_TRUE(got);
  dlock::faults::measured(
      "stalled grantee (watchdog lease 2000 ms): PTTL " + std::to_string(pttl) +
      " ms right after the hand-off; a Redisson-protocol poller (every 5 ms) got in " +
      std::to_string(after) + " ms after it; the frozen grantee " +
      (silent ? "reported nothing" : "reported an outcome") + "; after the thaw it " +
      (got ? "acquired " + std::to_string(dlock::test::ms_between(thawed, at)) + " ms later"
           : std::string{"gave up"}));
}

}  // namespace
