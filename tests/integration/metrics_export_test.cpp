// The Prometheus exporter example (dlock::prometheus behind prometheus-cpp's pull Exposer),
// scraped over HTTP by curl while it runs, its exposition checked by `promtool check metrics`
// (Debian's prometheus package); and the spdlog events example.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <string>

#include "dlock/prometheus.hpp"
#include "support/child_process.hpp"
#include "support/redis_server.hpp"

using namespace std::chrono_literals;

namespace metrics_export {

std::string example(const std::string& name) {
  return std::string(DLOCK_EXAMPLES_DIR) + "/example_" + name;
}

// promtool's verdict on `text` (its exit status; its complaints in `out`).
int promtool_check(const std::string& text, std::string& out) {
  const auto path = ::testing::TempDir() + "dlock_scrape.txt";
  std::ofstream{path} << text;
  return dlock::test::run_program(
      {"sh", "-c", std::string(DLOCK_PROMTOOL) + " check metrics < '" + path + "'"}, 20s, &out);
}

TEST(metrics_export, a_scrape_of_the_exporter_passes_promtool_and_counts_the_workers_locks) {
  dlock::test::redis_server srv;
  ::setenv("DLOCK_URL", srv.url().c_str(), 1);
  dlock::test::child_process exporter{{example("metrics_exporter"), "127.0.0.1:0", "4"}};
  const auto line = exporter.read_line(10s);
  ASSERT_TRUE(line) << exporter.diagnostics();
  std::smatch m;
  ASSERT_TRUE(std::regex_search(*line, m, std::regex{R"((http://127\.0\.0\.1:\d+/metrics))"}))
      << *line;
  std::this_thread::sleep_for(1s);  // the workers take their locks

  std::string scrape;
  ASSERT_EQ(dlock::test::run_program({DLOCK_CURL, "-sS", "--max-time", "5", m[1]}, 10s, &scrape), 0)
      << scrape;
  std::string verdict;
  EXPECT_EQ(promtool_check(scrape, verdict), 0) << verdict << "\n" << scrape;
  EXPECT_EQ(verdict, "") << scrape;  // no lint warnings either

  std::smatch acquired;
  ASSERT_TRUE(std::regex_search(
      scrape, acquired,
      std::regex{
          R"(dlock_acquisitions_total\{client="metrics_exporter",kind="mutex",outcome="acquired"\} (\d+))"}))
      << scrape;
  EXPECT_GT(std::stoll(acquired[1]), 10);
  for (const char* family :
       {"# TYPE dlock_lock_wait_seconds histogram", "# TYPE dlock_lock_hold_seconds histogram",
        "dlock_lock_wait_seconds_bucket{client=\"metrics_exporter\",kind=\"mutex\",le=\"+Inf\"}",
        "# TYPE dlock_commands_sent_total counter", "# TYPE dlock_renewals_total counter",
        "dlock_leases_lost_total{client=\"metrics_exporter\",cause=\"not_held\",kind=\"mutex\"} "
        "0"}) {
    EXPECT_NE(scrape.find(family), std::string::npos) << family << "\n" << scrape;
  }
  EXPECT_EQ(exporter.wait_exit(10s), 0) << exporter.diagnostics();

  // The check can fail: promtool refuses a malformed copy and lints a counter without _total.
  EXPECT_NE(promtool_check(scrape + "dlock_broken{kind=\"mutex\" 1\n", verdict), 0);
  promtool_check("# HELP dlock_x x\n# TYPE dlock_x counter\ndlock_x 1\n", verdict);
  EXPECT_NE(verdict.find("_total"), std::string::npos) << verdict;
}

TEST(prometheus_collector, refuses_label_names_its_families_use_or_prometheus_refuses) {
  dlock::client c{dlock::config::from_uri("redis://127.0.0.1:1?connect_timeout=100ms")};
  for (const char* bad :
       {"kind", "outcome", "cause", "errc", "le", "__name", "9lives", "a-b", ""}) {
    try {
      dlock::prometheus_collector collector{c, {{bad, "x"}}};
      ADD_FAILURE() << "accepted label name '" << bad << "'";
    } catch (const dlock::lock_error& e) {
      EXPECT_EQ(e.code(), dlock::errc::invalid_argument) << bad;
    }
  }
  dlock::prometheus_collector fine{c, {{"service", "orders"}, {"zone_2", "b"}}};
  const auto families = fine.Collect();
  ASSERT_FALSE(families.empty());  // the client-wide counters, even before any lock
  for (const auto& f : families) {
    for (const auto& m : f.metric) EXPECT_EQ(m.label.at(0).name, "service") << f.name;
  }
}

TEST(events_example, logs_the_lease_lost_when_the_lock_vanishes_under_its_holder) {
  dlock::test::redis_server srv;
  ::setenv("DLOCK_URL", srv.url().c_str(), 1);
  std::string out;
  EXPECT_EQ(dlock::test::run_program({example("events_spdlog")}, 30s, &out), 0) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex{R"(\[error\] dlock lease_lost: .*not_held)"}))
      << out;
  EXPECT_NE(out.find("leases lost so far: 1"), std::string::npos) << out;
}

}  // namespace metrics_export
