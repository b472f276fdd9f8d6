// `dlock status --metrics` (tools/dlock/status_metrics.cpp) against a real redis-server whose KEYS
// command is renamed away, so the names can only have been found with SCAN: a mutex held twice,
// a fair lock with a queued waiter, a read-write lock with two readers, a leased semaphore with
// permits leased, a latch, a counter with a name that needs escaping, and keys that are no
// synchronizer; every value checked, the exposition validated by `promtool check metrics` (and a
// broken copy of it refused, so the check can fail); --limit; bad input; an unreachable server.
// (Helpers: cli_helpers.hpp.)
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli_helpers.hpp"
#include "dlock/fair_mutex.hpp"
#include "dlock/keys.hpp"
#include "dlock/latch.hpp"
#include "dlock/leased_semaphore.hpp"
#include "dlock/mutex.hpp"
#include "dlock/shared_mutex.hpp"
#include "support/child_process.hpp"
#include "support/redis_server.hpp"
#include "test_util.hpp"

using namespace dlock::test;
using namespace dlock::test::cli;

namespace cli_metrics_test {

// A server on which KEYS does not exist.
redis_server_options without_keys() {
  redis_server_options o;
  o.config_lines = {"rename-command KEYS \"\""};
  return o;
}

// The samples of an exposition: `metric{labels}` -> value.
std::map<std::string, std::string> samples(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in{text};
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const auto space = line.rfind(' ');
    out[line.substr(0, space)] = line.substr(space + 1);
  }
  return out;
}

std::string value(const std::map<std::string, std::string>& s, const std::string& key) {
  const auto it = s.find(key);
  return it == s.end() ? "(absent)" : it->second;
}

std::size_t count_prefix(const std::map<std::string, std::string>& s, const std::string& prefix) {
  std::size_t n = 0;
  for (const auto& [k, v] : s) n += k.starts_with(prefix) ? 1u : 0u;
  return n;
}

// `promtool check metrics` on `text`: its exit status and what it printed (both streams).
struct promtool_result {
  std::optional<int> code;
  std::string output;
};

promtool_result promtool_check(const std::string& text) {
  const auto path =
      std::filesystem::temp_directory_path() / (unique_name("dlock-metrics") + ".txt");
  std::ofstream{path} << text;
  child_process p{{sh, "-c",
                   "command -v promtool >/dev/null || { echo 'promtool missing: install "
                   "Debian prometheus (scripts/setup)'; exit 99; }; promtool check metrics < '" +
                       path.string() + "' 2>&1"}};
  promtool_result r;
  r.output = p.read_to_eof(15s);
  r.code = p.wait_exit(5s);
  std::filesystem::remove(path);
  return r;
}

// The label set of a name (and kind).
std::string of(const std::string& name) { return "{name=\"" + name + "\"}"; }
std::string of(const std::string& name, const std::string& kind) {
  return "{name=\"" + name + "\",kind=\"" + kind + "\"}";
}

// Every kind held or waited for under `base:`, and keys under it that are no synchronizer.
struct scene {
  explicit scene(redis_server& srv)
      : srv_{srv}, c1{config_for(srv)}, c2{config_for(srv)}, base{unique_name("cli-metrics")} {}

  void build() {
    mutex.lock();
    mutex.lock();  // reentrant: 2 holds
    fair.lock();
    fair_waiter.emplace(dlock_argv({"--url", srv_.url(), "exec", "--fair", base + ":fair", "--", sh,
                                    "-c", "echo waiter-ran"}));
    ASSERT_TRUE(wait_until(
        [&] {
          return srv_.command({"LLEN", dlock::keys::fair_queue(base + ":fair")}) == ":1";
        },
        10s))
        << fair_waiter->diagnostics();
    const auto channels = dlock::keys::lock_channel(base + ":fair") + ":*";  // the waiter's own
    ASSERT_TRUE(wait_until(
        [&] {
          return srv_.command({"PUBSUB", "CHANNELS", channels}) != "[]";
        },
        10s))
        << fair_waiter->diagnostics();
    reader1.lock_shared();
    reader2.lock_shared();
    ASSERT_TRUE(semaphore.try_set_permits(3));
    permit = semaphore.acquire(2);
    ASSERT_TRUE(latch.try_set_count(3));
    srv_.command({"SET", weird, "4"});  // a bare counter whose name needs escaping
    srv_.command({"HSET", base + ":profile", "name", "bob"});  // a hash, not a lock's
    srv_.command({"SET", base + ":greeting", "hello"});        // a string, not a counter
    srv_.command({"RPUSH", base + ":jobs", "a"});              // a list
    outside.lock();                                            // held, but not matched
  }

  redis_server& srv_;
  dlock::client c1, c2;
  const std::string base;
  const std::string weird = base + ":we\"ird\\na\nme";
  dlock::mutex mutex{c1, base + ":mutex"};
  dlock::fair_mutex fair{c1, base + ":fair"};
  std::optional<child_process> fair_waiter;
  dlock::shared_mutex reader1{c1, base + ":rw"}, reader2{c2, base + ":rw"};
  dlock::leased_semaphore semaphore{c1, base + ":sem"};
  dlock::permit permit;
  dlock::latch latch{c1, base + ":latch"};
  dlock::mutex outside{c1, unique_name("cli-metrics-outside")};
};

void expect_locks(const std::map<std::string, std::string>& s, const std::string& b) {
  EXPECT_EQ(value(s, "dlock_server_lock_held" + of(b + ":mutex", "mutex")), "1");
  EXPECT_EQ(value(s, "dlock_server_lock_holds" + of(b + ":mutex", "mutex")), "2");
  EXPECT_EQ(value(s, "dlock_server_lock_holders" + of(b + ":mutex", "mutex")), "1");
  const auto ttl = std::stod(value(s, "dlock_server_lock_ttl_seconds" + of(b + ":mutex", "mutex")));
  EXPECT_GT(ttl, 0.0);
  EXPECT_LE(ttl, 30.0) << "the 30 s watchdog lease";
  EXPECT_EQ(value(s, "dlock_server_lock_held" + of(b + ":fair", "fair_mutex")), "1");
  EXPECT_EQ(value(s, "dlock_server_fair_queue_length" + of(b + ":fair")), "1");
  EXPECT_EQ(value(s, "dlock_server_lock_subscribers" + of(b + ":fair", "fair_mutex")), "1")
      << "the waiting dlock's connection";
  EXPECT_EQ(value(s, "dlock_server_lock_held" + of(b + ":rw", "shared_mutex")), "1");
  EXPECT_EQ(value(s, "dlock_server_lock_holders" + of(b + ":rw", "shared_mutex")), "2");
  EXPECT_EQ(value(s, "dlock_server_lock_holds" + of(b + ":rw", "shared_mutex")), "2");
  EXPECT_EQ(value(s, "dlock_server_rwlock_waiting_writers" + of(b + ":rw")), "0");
}

void expect_counters(const std::map<std::string, std::string>& s, const std::string& b) {
  EXPECT_EQ(value(s, "dlock_server_synchronizer_info" + of(b + ":sem", "leased_semaphore")), "1");
  EXPECT_EQ(value(s, "dlock_server_semaphore_permits_available" + of(b + ":sem")), "1");
  EXPECT_EQ(value(s, "dlock_server_semaphore_permits_leased" + of(b + ":sem")), "2");
  EXPECT_EQ(value(s, "dlock_server_latch_or_semaphore_value" + of(b + ":latch")), "3");
  EXPECT_EQ(value(s, "dlock_server_latch_or_semaphore_value" + of(b + ":we\\\"ird\\\\na\\nme")),
            "4")
      << "label value escaped";
}

// The whole view of `b:*`: five synchronizers and the escaped counter, nothing else.
void expect_scene(const std::map<std::string, std::string>& s, const std::string& b) {
  expect_locks(s, b);
  expect_counters(s, b);
  EXPECT_EQ(count_prefix(s, "dlock_server_synchronizer_info{name=\"" + b + ":"), 6u);
  for (const auto* key : {":profile", ":greeting", ":jobs"}) {
    EXPECT_EQ(count_prefix(s, "dlock_server_synchronizer_info{name=\"" + b + key), 0u) << key;
  }
  EXPECT_EQ(value(s, "dlock_server_scan_truncated"), "0");
  EXPECT_EQ(value(s, "dlock_server_scan_nodes"), "1");
}

TEST(cli_metrics, reports_every_kind_found_with_scan_in_valid_prometheus_text) {
  redis_server srv{without_keys()};
  ASSERT_EQ(srv.command({"KEYS", "*"}).rfind("-ERR", 0), 0u) << "KEYS is renamed away";
  scene sc{srv};
  ASSERT_NO_FATAL_FAILURE(sc.build());

  auto r = run_dlock({"--url", srv.url(), "status", "--metrics", "--match", sc.base + ":*"});
  ASSERT_EQ(r.code, std::optional<int>{0}) << describe(r);
  EXPECT_EQ(r.err, "");
  auto s = samples(r.out);
  expect_scene(s, sc.base);
  EXPECT_EQ(value(s, "dlock_server_scan_names"), "9") << "6 synchronizers, 3 other keys";
  EXPECT_EQ(count_prefix(s, "dlock_server_synchronizer_info{"), 6u);
  EXPECT_EQ(value(s, "dlock_server_synchronizers{kind=\"mutex\"}"), "1");
  EXPECT_EQ(value(s, "dlock_server_synchronizers{kind=\"latch_or_semaphore\"}"), "2");
  EXPECT_EQ(value(s, "dlock_server_locks_held{kind=\"shared_mutex\"}"), "1");
  EXPECT_EQ(value(s, "dlock_server_locks_held{kind=\"leased_semaphore\"}"), "1");
  EXPECT_EQ(count_prefix(s, "dlock_server_synchronizer_info{name=\"cli-metrics-outside"), 0u);
  EXPECT_GE(command_stat(srv, "scan"), 1);

  const auto checked = promtool_check(r.out);
  EXPECT_EQ(checked.code, std::optional<int>{0}) << checked.output << "\n" << r.out;
  EXPECT_EQ(checked.output, "") << "no lint warning";
  const auto broken = promtool_check(r.out + "dlock_server_lock_held{name=\"x} 1\n");
  EXPECT_NE(broken.code, std::optional<int>{0}) << "promtool must refuse a broken line";
  EXPECT_NE(broken.code, std::optional<int>{99}) << broken.output;

  // Every key of the server: each synchronizer once, none of the keys kept beside them
  // (queues, fencing counters, holder descriptions, leased permits) reported on its own.
  r = run_dlock({"--url", srv.url(), "status", "--metrics"});
  ASSERT_EQ(r.code, std::optional<int>{0}) << describe(r);
  s = samples(r.out);
  expect_scene(s, sc.base);
  EXPECT_EQ(count_prefix(s, "dlock_server_synchronizer_info{name=\"cli-metrics-outside"), 1u);
  EXPECT_EQ(count_prefix(s, "dlock_server_synchronizer_info{"), 7u) << r.out;

  // --limit: stops, says so, and marks the view.
  r = run_dlock(
      {"--url", srv.url(), "status", "--metrics", "--match", sc.base + ":*", "--limit", "2"});
  ASSERT_EQ(r.code, std::optional<int>{0}) << describe(r);
  s = samples(r.out);
  EXPECT_EQ(value(s, "dlock_server_scan_truncated"), "1");
  EXPECT_EQ(value(s, "dlock_server_scan_names"), "2");
  EXPECT_NE(r.err.find("stopped at --limit 2"), std::string::npos) << r.err;
  EXPECT_EQ(promtool_check(r.out).code, std::optional<int>{0});

  sc.fair.unlock();
  EXPECT_EQ(sc.fair_waiter->read_line(10s), std::optional<std::string>{"waiter-ran"});
}

TEST(cli_metrics, bad_input_exits_64_and_an_unreachable_server_69) {
  redis_server srv;
  const std::vector<std::vector<std::string>> bad = {
      {"--metrics", "--match", ""},
      {"--metrics", "--match", "a[b"},
      {"--metrics", "--match", "a\\"},
      {"--metrics", "--limit", "0"},
      {"--metrics", "--limit", "ten"},
      {"--metrics", "--limit", "-1"},
      {"--metrics", "some-name"},
      {"--metrics", "--json"},
      {"--match", "a*"},
      {"--limit", "5", "some-name"},
  };
  for (const auto& args : bad) {
    std::vector<std::string> argv{"--url", srv.url(), "status"};
    argv.insert(argv.end(), args.begin(), args.end());
    const auto r = run_dlock(argv);
    EXPECT_EQ(r.code, std::optional<int>{exit_usage}) << describe(r);
    EXPECT_EQ(r.out, "") << describe(r);
    EXPECT_EQ(r.err.rfind("dlock: status", 0), 0u) << describe(r);
  }
  const auto r = run_dlock({"--url", "redis://127.0.0.1:" + std::to_string(free_port()),
                            "--timeout", "500ms", "status", "--metrics"});
  EXPECT_EQ(r.code, std::optional<int>{exit_unavailable}) << describe(r);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("dlock: status --metrics"), std::string::npos) << r.err;
}

}  // namespace cli_metrics_test
