// Every example builds (CMake) and runs successfully against a real server.
#include <gtest/gtest.h>

#include <cstdlib>

#include "support/redis_server.hpp"

namespace {

class examples : public ::testing::TestWithParam<const char*> {};

TEST_P(examples, run_against_a_real_server) {
  dlock::test::redis_server srv;
  ::setenv("DLOCK_URL", srv.url().c_str(), 1);
  std::string out;
  const int rc = dlock::test::run_program(
      {std::string(DLOCK_EXAMPLES_DIR) + "/example_" + GetParam()}, std::chrono::seconds{30}, &out);
  EXPECT_EQ(rc, 0) << out;
}

INSTANTIATE_TEST_SUITE_P(all, examples,
                         ::testing::Values("lock_guard", "async_lease", "fencing", "fair_queue",
                                           "read_mostly", "report_jobs", "shards_loaded",
                                           "transfer", "nightly_report"));

}  // namespace
