// Every example builds (CMake) and runs successfully against a real server.
#include <gtest/gtest.h>

#include <cstdlib>
#include <regex>
#include <string>
#include <vector>

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

// The lock tutorial's scenes (docs/examples.md): each run once, its printed counts checked.
namespace seeds_scenes {

// Runs example_<name> with `args`; its exit status, and its output in `out`.
int run_scene(const std::string& name, std::vector<std::string> args, std::string& out) {
  args.insert(args.begin(), std::string(DLOCK_EXAMPLES_DIR) + "/example_" + name);
  return dlock::test::run_program(args, std::chrono::seconds{30}, &out);
}

// The number printed just before `word` ("12 duplicates"), or -1 when there is none.
long long count_before(const std::string& out, const std::string& word) {
  std::smatch m;
  if (!std::regex_search(out, m, std::regex{"(\\d+) " + word})) return -1;
  return std::stoll(m[1]);
}

TEST(batch_scheduler_example, queues_tasks_twice_without_the_lock_and_once_with_it) {
  dlock::test::redis_server srv;
  std::string out;
  EXPECT_EQ(run_scene("batch_scheduler", {srv.url(), "--no-lock", "--schedulers", "3"}, out), 0)
      << out;
  EXPECT_EQ(count_before(out, "distinct tasks"), 50) << out;
  EXPECT_GT(count_before(out, "duplicates"), 0) << out;

  EXPECT_EQ(run_scene("batch_scheduler", {srv.url(), "--schedulers", "3"}, out), 0) << out;
  EXPECT_EQ(count_before(out, "entries"), 50) << out;
  EXPECT_EQ(count_before(out, "duplicates"), 0) << out;
}

TEST(batch_scheduler_example, refuses_bad_arguments) {
  dlock::test::redis_server srv;
  for (std::vector<std::string> bad : {std::vector<std::string>{"--schedulers", "0"},
                                       {"--tasks", "many"},
                                       {"--tasks"},
                                       {"--fast"}}) {
    bad.insert(bad.begin(), srv.url());
    std::string out;
    EXPECT_EQ(run_scene("batch_scheduler", bad, out), 2) << out;
    EXPECT_NE(out.find("usage: batch_scheduler"), std::string::npos) << out;
  }
}

TEST(scene_examples, each_reports_a_bad_url_with_exit_status_2) {
  for (const char* name : {"batch_scheduler", "flash_sale", "idempotent_points"}) {
    std::string out;
    EXPECT_EQ(run_scene(name, {"redis://127.0.0.1:99999"}, out), 2) << name << ": " << out;
    EXPECT_NE(out.find(std::string{name} + ": "), std::string::npos) << out;
  }
}

TEST(flash_sale_example, sells_the_stock_exactly_by_script_and_by_lock) {
  dlock::test::redis_server srv;
  std::string out;
  EXPECT_EQ(run_scene("flash_sale", {srv.url()}, out), 0) << out;
  const std::string exact =
      "sold 100, 100 buyers, stock left 0, users who bought twice 0, sold before the window 0:";
  EXPECT_NE(out.find("one Lua script  " + exact), std::string::npos) << out;
  EXPECT_NE(out.find("dlock::mutex    " + exact), std::string::npos) << out;
}

TEST(idempotent_points_example, counts_each_order_once_only_with_its_key) {
  dlock::test::redis_server srv;
  std::string out;
  EXPECT_EQ(run_scene("idempotent_points", {srv.url()}, out), 0) << out;
  EXPECT_NE(out.find("naive   5971 points given, 3897 earned: 20 of 20 users over-credited"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("locked  5971 points given, 3897 earned: 20 of 20 users over-credited"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("keyed   3897 points given, 3897 earned: 0 of 20 users wrong"),
            std::string::npos)
      << out;
}

}  // namespace seeds_scenes
