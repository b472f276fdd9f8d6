// redisson_client.py in cluster mode against a real 3-master/3-replica Redis Cluster
// (tests/support/redis_cluster.hpp), as Redisson's RLock runs on Redis >= 7 clusters: the lock
// scripts go to the slot's master, the unlock publishes with SPUBLISH, and a waiter waits with
// SSUBSCRIBE on the slot's master. Two such processes must exclude each other, and the
// holder's unlock must wake the waiter (it would otherwise sleep through the 30 s lease).
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "support/child_process.hpp"
#include "support/redis_cluster.hpp"
#include "test_util.hpp"

#ifndef DLOCK_REDISSON_PY
#error "DLOCK_REDISSON_PY must name redisson_client.py"
#endif
#ifndef DLOCK_PYTHON3
#define DLOCK_PYTHON3 "/usr/bin/python3"
#endif

using namespace std::chrono_literals;

namespace {

using dlock::test::child_process;
using steady = std::chrono::steady_clock;

child_process redisson_client(std::vector<std::string> args) {
  args.insert(args.begin(), {DLOCK_PYTHON3, "-u", DLOCK_REDISSON_PY});
  return child_process{std::move(args)};
}

TEST(redisson_cluster, two_clients_exclude_each_other_and_the_unlock_wakes_the_waiter) {
  dlock::test::redis_cluster cluster;
  // A name served by a master other than the URL's first seed: the client has to route.
  std::string name;
  int slot = 0;
  std::size_t master = 0;
  do {
    name = dlock::test::unique_name("redisson-cluster");
    slot = cluster.slot_of(name);
    master = cluster.master_of(slot);
  } while (master == cluster.masters().front());
  const auto channel = "redisson_lock__channel:{" + name + "}";

  auto holder = redisson_client({"hold", cluster.url(), name});
  const auto held = holder.read_line(20s);
  ASSERT_TRUE(held && held->rfind("acquired ", 0) == 0) << holder.diagnostics();
  EXPECT_EQ(cluster.node(master).command({"EXISTS", name}), ":1") << "on the slot's master";

  auto waiter = redisson_client({"acquire_wait", cluster.url(), name});
  const auto waiting = waiter.read_line(20s);  // printed once subscribed and refused
  ASSERT_TRUE(waiting && waiting->rfind("waiting ", 0) == 0) << waiter.diagnostics();
  EXPECT_GT(std::stoll(waiting->substr(8)), 20000) << "the holder's 30 s lease";
  EXPECT_EQ(cluster.node(master).command({"PUBSUB", "SHARDNUMSUB", channel}),
            "[" + channel + ", :1]")
      << "the waiter's SSUBSCRIBE is on the slot's master";
  EXPECT_EQ(waiter.read_line(300ms), std::nullopt) << "excluded while the holder holds";

  const auto released_at = steady::now();
  holder.close_stdin();  // the holder unlocks: SPUBLISH "0" on the slot's shard
  EXPECT_EQ(holder.read_line(10s), std::optional<std::string>{"released 1"})
      << holder.diagnostics();
  const auto acquired = waiter.read_line(10s);
  const auto lag =
      std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - released_at);
  ASSERT_TRUE(acquired && acquired->rfind("acquired ", 0) == 0) << waiter.diagnostics();
  EXPECT_LT(lag, 2000ms) << "woken by the unlock message, not by the lease's end";
  EXPECT_EQ(waiter.read_line(10s), std::optional<std::string>{"released 1"})
      << waiter.diagnostics();
  EXPECT_EQ(holder.wait_exit(10s), std::optional<int>{0}) << holder.diagnostics();
  EXPECT_EQ(waiter.wait_exit(10s), std::optional<int>{0}) << waiter.diagnostics();

  EXPECT_EQ(cluster.node(master).command({"EXISTS", name}), ":0");
  EXPECT_EQ(dlock::test::command_stat(cluster.node(master), "spublish"), 2)
      << "both unlocks published with SPUBLISH on the slot's master";
  for (std::size_t i = 0; i < cluster.size(); ++i) {
    EXPECT_EQ(dlock::test::command_stat(cluster.node(i), "publish"), 0) << "node " << i;
  }
}

}  // namespace
