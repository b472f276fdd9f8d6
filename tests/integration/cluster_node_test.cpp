// The `dlock` command on a single-node Redis Cluster (`cluster-enabled yes`, every slot on the
// one node): the key layout puts every key a script touches in the lock name's slot, so exec,
// waiting, the hand-off and status work there as on a plain server (a key of another slot would
// fail with CROSSSLOT, and `dlock exec` would exit 69). Routing across several nodes is the
// next issue's.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "support/child_process.hpp"
#include "support/redis_server.hpp"
#include "test_util.hpp"

#ifndef DLOCK_CLI
#error "DLOCK_CLI must name the dlock executable"
#endif

using namespace std::chrono_literals;
using dlock::test::child_process;

namespace {

TEST(cluster_node, exec_waiting_hand_off_and_status_work_on_a_single_node_cluster) {
  const auto node = dlock::test::start_cluster_node();
  auto& srv = *node;
  const auto name = dlock::test::unique_name("cluster") + "{orders}";
  // The first holds until told; the second waits in the queue and gets the lock handed over.
  child_process first{{DLOCK_CLI, "exec", "--url", srv.url(), name, "--", "/bin/sh", "-c",
                       "echo ready $DLOCK_FENCING_TOKEN; cat >/dev/null"}};
  const auto ready = first.read_line(10s);
  ASSERT_TRUE(ready && ready->starts_with("ready ")) << first.read_stderr();
  child_process second{{DLOCK_CLI, "exec", "--url", srv.url(), name, "--", "/bin/sh", "-c",
                        "echo got $DLOCK_FENCING_TOKEN"}};
  ASSERT_TRUE(dlock::test::wait_until(
      [&] {
        return srv.command({"ZCARD", "dlock_lock_queue:" + name}) == ":1";
      },
      10s))
      << "the second exec is queued";

  child_process status{{DLOCK_CLI, "status", "--url", srv.url(), "--json", name}};
  const auto json = status.read_to_eof(10s);
  EXPECT_EQ(status.wait_exit(10s), 0) << status.read_stderr();
  EXPECT_NE(json.find("\"held\": true"), std::string::npos) << json;
  EXPECT_NE(json.find("\"queued\": 1"), std::string::npos) << json;

  first.close_stdin();  // its command ends: the unlock hands the lock to the second
  EXPECT_EQ(first.wait_exit(10s), 0) << first.read_stderr();
  const auto got = second.read_line(10s);
  ASSERT_TRUE(got && got->starts_with("got ")) << second.read_stderr();
  EXPECT_GT(std::stoull(got->substr(4)), std::stoull(ready->substr(6)))
      << "fencing tokens increase across the hand-off";
  EXPECT_EQ(second.wait_exit(10s), 0) << second.read_stderr();
  EXPECT_EQ(srv.command({"EXISTS", name}), ":0");
}

}  // namespace
