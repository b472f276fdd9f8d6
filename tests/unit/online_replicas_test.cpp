// wait_replicas=auto counts the replicas INFO replication reports `online`: not those still
// syncing (state=wait_bgsave, send_bulk), which would never acknowledge a WAIT.
#include <gtest/gtest.h>

#include "runtime/replication.hpp"

namespace {

using dlock::detail::count_online_replicas;

TEST(online_replicas, counts_only_online_replica_lines) {
  const char* info =
      "# Replication\r\n"
      "role:master\r\n"
      "connected_slaves:3\r\n"
      "slave0:ip=127.0.0.1,port=6380,state=online,offset=42,lag=0\r\n"
      "slave1:ip=127.0.0.1,port=6381,state=wait_bgsave,offset=0,lag=0\r\n"
      "slave2:ip=127.0.0.1,port=6382,state=online,offset=42,lag=1\r\n"
      "master_failover_state:no-failover\r\n";
  EXPECT_EQ(count_online_replicas(info), 2u);
  EXPECT_EQ(count_online_replicas("# Replication\r\nrole:master\r\nconnected_slaves:0\r\n"), 0u);
  EXPECT_EQ(count_online_replicas(""), 0u);
  EXPECT_EQ(count_online_replicas("slave_read_only:1\r\nslave0:state=online,\r\n"), 0u)
      << "a replica line has an address";
  EXPECT_EQ(count_online_replicas("slave0:ip=h,port=1,state=online,offset=1,lag=0"), 1u)
      << "last line without a newline";
}

}  // namespace
