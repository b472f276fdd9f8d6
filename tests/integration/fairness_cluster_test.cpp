// The mixed fleet of fairness_test.cpp on a real 3-master/3-replica Redis Cluster: dlock
// processes and processes of Redisson's RLock protocol (which waits on the shard channel of the
// name's slot and publishes with SPUBLISH, as Redisson does on Redis >= 7 clusters) on one name.
// They exclude each other, the Redisson processes get their share as on a single server (dlock
// counts Redisson's waiters with SHARDNUMSUB and leaves a freed lock to them), and both go on
// through a manual failover of the name's master in the middle of the run.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

#include "fleet.hpp"
#include "support/redis_cluster.hpp"
#include "test_util.hpp"

namespace {

using namespace dlock::test::fleet_test;
using namespace std::chrono_literals;

TEST(fairness_cluster, a_mixed_fleet_shares_and_excludes_through_a_failover) {
  dlock::test::redis_cluster cluster;
  const auto name = dlock::test::unique_name("fair-cluster");
  const int slot = cluster.slot_of(name);
  const auto master = cluster.master_of(slot);
  std::int64_t failed_over = 0;
  fleet f;
  run_fleet(f, cluster.url(), nullptr, name, 2, 2, 5, 6, [&] {
    std::this_thread::sleep_for(2s);
    cluster.failover(cluster.replicas_of(master).at(0));
    failed_over = monotonic_ns();
  });
  if (HasFatalFailure()) return;
  ASSERT_NE(failed_over, 0);
  expect_exclusion(f);
  long long dlock_after = 0, redisson_after = 0;
  for (const auto& h : f.holds) {
    if (h.start > failed_over) ++(f.redisson(h) ? redisson_after : dlock_after);
  }
  std::cout << "[          ] after the failover: " << dlock_after << " dlock and " << redisson_after
            << " Redisson acquisitions\n"
            << std::flush;
  EXPECT_GT(dlock_after, 0) << "no dlock process acquired after the failover";
  EXPECT_GT(redisson_after, 0) << "no Redisson process acquired after the failover";
  for (const auto& m : f.members) {
    if (m.redisson) {
      EXPECT_GE(static_cast<double>(m.count()), 0.5 * f.fair)
          << m.label << " got " << m.count() << " of " << f.total << " acquisitions";
    } else {
      EXPECT_GT(m.count(), 0) << m.label << " made no progress";
    }
  }
  EXPECT_EQ(cluster.command_on_slot(slot, {"EXISTS", name}), ":0");
}

}  // namespace
