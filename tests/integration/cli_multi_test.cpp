// The `dlock` command (tools/dlock) holding several locks as one, against real redis-server
// processes: `exec --url A --url B --url C NAME` (a red_lock: NAME on a majority of independent
// servers) and `exec NAME1 NAME2` (a multi_lock: every name on one server, or none) — what they
// hold while the command runs, what the command's environment says, a dead server in the
// minority, a majority held elsewhere (exit 75), a waiter behind a multi_lock, two execs over
// the same names in opposite orders (no deadlock), and usage errors. (Helpers: cli_helpers.hpp.)
//
// Commands that must hold while the test looks finish when the test creates a file (or within
// about 10 s); every wait is bounded.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli_helpers.hpp"
#include "dlock/keys.hpp"
#include "support/child_process.hpp"
#include "support/redis_server.hpp"
#include "test_util.hpp"

using namespace dlock::test;
using namespace dlock::test::cli;

// A named namespace, not an anonymous one: unity builds merge the anonymous namespaces of the
// test files.
namespace cli_multi_test {

// A command that prints `prologue`'s output and "ready", then runs until `go` exists (at most
// about 10 s), then prints "done".
std::string until_file(const std::string& go, const std::string& prologue = "") {
  return prologue + " echo ready; i=0; while [ ! -e " + go +
         " ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; echo done";
}

void touch(const std::string& path) { std::ofstream{path} << "go\n"; }

std::string env_line() {
  return R"(printf '%s|%s|%s\n' "$DLOCK_NAME" "$DLOCK_FENCING_TOKEN" "$DLOCK_FENCING_TOKENS";)";
}

std::vector<std::string> fields(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in{line};
  for (std::string f; std::getline(in, f, '|');) out.push_back(f);
  if (!line.empty() && line.back() == '|') out.emplace_back();
  return out;
}

// The --url arguments for `servers`.
std::vector<std::string> urls(const std::vector<const redis_server*>& servers) {
  std::vector<std::string> out;
  for (const auto* s : servers) {
    out.push_back("--url");
    out.push_back(s->url());
  }
  return out;
}

std::vector<std::string> cat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(cli_multi, exec_over_3_servers_holds_the_name_on_a_majority_while_the_command_runs) {
  redis_server s0, s1, s2;
  const std::vector<const redis_server*> servers{&s0, &s1, &s2};
  temp_dir dir;
  const auto name = unique_name("cli-red");
  const auto counter = dlock::keys::slot_fencing_counter_of(name);
  // Counters far ahead of the clock: the token is the largest of the majority's, plus one.
  for (std::size_t i = 0; i < 3; ++i) {
    servers[i]->command({"SET", counter, std::to_string(8000000000000100 + 100 * i)});
  }
  dlock_process run{cat(
      urls(servers), {"exec", name, "--", sh, "-c", until_file(dir.path() + "/go", env_line())})};
  const auto env = run->read_line(10s);
  ASSERT_TRUE(env) << run->diagnostics();
  ASSERT_EQ(run->read_line(10s), std::optional<std::string>{"ready"}) << run->diagnostics();
  const auto f = fields(*env);
  ASSERT_EQ(f.size(), 3u) << *env;
  EXPECT_EQ(f[0], name);
  EXPECT_EQ(f[2], "") << "one name: no DLOCK_FENCING_TOKENS";
  const auto token = std::stoull(f[1]);
  EXPECT_TRUE(token == 8000000000000201 || token == 8000000000000301) << token;
  std::size_t held = 0, floored = 0;
  for (const auto* s : servers) {
    if (exists(*s, name) == ":1") {
      ++held;
      EXPECT_EQ(exists(*s, dlock::keys::holder_info(name)), ":1") << "described where held";
    }
    if (s->command({"GET", counter}) == std::to_string(token)) ++floored;
  }
  EXPECT_GE(held, 2u) << "a majority";
  EXPECT_GE(floored, 2u) << "the token is written back to the majority";
  touch(dir.path() + "/go");
  EXPECT_EQ(run->read_line(10s), std::optional<std::string>{"done"}) << run->diagnostics();
  EXPECT_EQ(run->wait_exit(10s), std::optional<int>{0}) << run->diagnostics();
  for (const auto* s : servers) {
    EXPECT_EQ(exists(*s, name), ":0") << "released everywhere";
    EXPECT_EQ(exists(*s, dlock::keys::holder_info(name)), ":0") << "descriptions removed";
  }
}

TEST(cli_multi, exec_over_3_servers_runs_with_one_of_them_killed) {
  redis_server s0, s1, s2;
  const auto name = unique_name("cli-red-dead");
  s2.kill9();
  const auto r = run_dlock(
      cat(urls({&s0, &s1, &s2}), {"exec", "--wait", "10s", name, "--", sh, "-c", "echo ran"}));
  EXPECT_EQ(r.code, std::optional<int>{0}) << describe(r);
  EXPECT_EQ(r.out, "ran\n");
  EXPECT_LT(r.took, 8s);
  EXPECT_EQ(exists(s0, name), ":0");
  EXPECT_EQ(exists(s1, name), ":0");
}

TEST(cli_multi, exec_over_3_servers_times_out_with_75_when_2_are_held_elsewhere) {
  redis_server s0, s1, s2;
  temp_dir dir;
  const auto name = unique_name("cli-red-busy");
  // A red_lock of 2 servers, which needs both.
  dlock_process holder{
      cat(urls({&s0, &s1}), {"exec", name, "--", sh, "-c", until_file(dir.path() + "/go")})};
  ASSERT_EQ(holder->read_line(10s), std::optional<std::string>{"ready"}) << holder->diagnostics();
  EXPECT_EQ(exists(s0, name), ":1");
  EXPECT_EQ(exists(s1, name), ":1");
  const auto r = run_dlock(
      cat(urls({&s0, &s1, &s2}), {"exec", "--wait", "500ms", name, "--", sh, "-c", "echo ran"}));
  EXPECT_EQ(r.code, std::optional<int>{exit_tempfail}) << describe(r);
  EXPECT_EQ(r.out, "") << "not run";
  EXPECT_LT(r.took, 5s);
  EXPECT_TRUE(wait_until([&] { return exists(s2, name) == ":0"; }, 5s))
      << "what a failed round took is given back";
  touch(dir.path() + "/go");
  EXPECT_EQ(holder->wait_exit(10s), std::optional<int>{0}) << holder->diagnostics();
}

TEST(cli_multi, a_majority_unreachable_or_the_one_server_exits_69) {
  redis_server live;
  const auto dead = [] { return "redis://127.0.0.1:" + std::to_string(free_port()); };
  const auto name = unique_name("cli-red-unreachable");
  const std::vector<std::vector<std::string>> cases = {
      {"--url", dead(), "--url", dead(), "--url", live.url(), "exec", name, "--", sh, "-c",
       "echo ran"},
      {"--url", dead(), "exec", name, name + "-2", "--", sh, "-c", "echo ran"},
  };
  std::vector<std::unique_ptr<child_process>> runs;
  for (const auto& args : cases) runs.push_back(std::make_unique<child_process>(dlock_argv(args)));
  for (auto& r : runs) {
    EXPECT_EQ(r->wait_exit(10s), std::optional<int>{exit_unavailable}) << r->diagnostics();
    EXPECT_NE(r->read_stderr().find("connection refused"), std::string::npos) << r->diagnostics();
    EXPECT_EQ(r->read_to_eof(1s), "") << "no command ran";
  }
  EXPECT_EQ(live.command({"DBSIZE"}), ":0");
}

TEST(cli_multi, exec_of_two_names_holds_both_and_a_waiter_for_one_waits) {
  redis_server srv;
  temp_dir dir;
  // Hash tags put the names in different slots, with fencing counters of their own.
  const auto a = unique_name("cli-multi") + "{a}";
  const auto b = unique_name("cli-multi") + "{b}";
  ASSERT_NE(dlock::keys::slot_fencing_counter_of(a), dlock::keys::slot_fencing_counter_of(b));
  srv.command({"SET", dlock::keys::slot_fencing_counter_of(a), "9000000000000000"});
  srv.command({"SET", dlock::keys::slot_fencing_counter_of(b), "8000000000000000"});
  dlock_process both{{"--url", srv.url(), "exec", a, b, "--", sh, "-c",
                      until_file(dir.path() + "/go", env_line())}};
  const auto env = both->read_line(10s);
  ASSERT_TRUE(env) << both->diagnostics();
  ASSERT_EQ(both->read_line(10s), std::optional<std::string>{"ready"}) << both->diagnostics();
  const auto f = fields(*env);
  ASSERT_EQ(f.size(), 3u) << *env;
  EXPECT_EQ(f[0], a + " " + b) << "the names in order";
  std::istringstream tokens{f[2]};
  std::uint64_t ta = 0, tb = 0;
  ASSERT_TRUE(tokens >> ta >> tb) << *env;
  EXPECT_TRUE(tokens.eof()) << *env;
  EXPECT_GT(ta, 9000000000000000u) << "each name's token is above its counter";
  EXPECT_GT(tb, 8000000000000000u);
  EXPECT_EQ(srv.command({"GET", dlock::keys::slot_fencing_counter_of(a)}), std::to_string(ta));
  EXPECT_EQ(srv.command({"GET", dlock::keys::slot_fencing_counter_of(b)}), std::to_string(tb));
  EXPECT_EQ(f[1], std::to_string(std::max(ta, tb))) << "DLOCK_FENCING_TOKEN: the largest";
  EXPECT_EQ(exists(srv, a), ":1");
  EXPECT_EQ(exists(srv, b), ":1");
  EXPECT_EQ(exists(srv, dlock::keys::holder_info(a)), ":1");
  EXPECT_EQ(exists(srv, dlock::keys::holder_info(b)), ":1");

  auto r =
      run_dlock({"--url", srv.url(), "exec", "--wait", "300ms", b, "--", sh, "-c", "echo ran"});
  EXPECT_EQ(r.code, std::optional<int>{exit_tempfail}) << describe(r);
  EXPECT_EQ(r.out, "");
  child_process waiter{dlock_argv({"--url", srv.url(), "exec", b, "--", sh, "-c", "echo ran"})};
  EXPECT_EQ(waiter.wait_exit(300ms), std::nullopt) << "waits: " << waiter.diagnostics();
  touch(dir.path() + "/go");
  EXPECT_EQ(both->read_line(10s), std::optional<std::string>{"done"}) << both->diagnostics();
  EXPECT_EQ(both->wait_exit(10s), std::optional<int>{0}) << both->diagnostics();
  EXPECT_EQ(waiter.read_to_eof(10s), "ran\n") << waiter.diagnostics();
  EXPECT_EQ(waiter.wait_exit(10s), std::optional<int>{0}) << waiter.diagnostics();
  EXPECT_EQ(exists(srv, a), ":0");
  EXPECT_EQ(exists(srv, b), ":0");
  EXPECT_EQ(exists(srv, dlock::keys::holder_info(a)), ":0");
}

TEST(cli_multi, exec_of_two_names_in_a_cluster) {
  const auto node = start_cluster_node();
  const auto a = unique_name("cli-multi-cluster") + "{a}";
  const auto b = unique_name("cli-multi-cluster") + "{b}";
  ASSERT_NE(dlock::keys::slot(a), dlock::keys::slot(b));
  const auto url = "redis+cluster://127.0.0.1:" + std::to_string(node->port());
  const auto r = run_dlock(
      {"--url", url, "exec", a, b, "--", sh, "-c", R"(printf '%s\n' "$DLOCK_FENCING_TOKENS")"});
  ASSERT_EQ(r.code, std::optional<int>{0}) << describe(r);
  std::istringstream tokens{r.out};
  std::uint64_t ta = 0, tb = 0;
  EXPECT_TRUE(tokens >> ta >> tb) << r.out;
  EXPECT_GT(ta, 0u);
  EXPECT_GT(tb, 0u);
  EXPECT_EQ(exists(*node, a), ":0");
  EXPECT_EQ(exists(*node, b), ":0");
}

// The lease-lost path is exec's own: SIGTERM to the command, one line on stderr, exit 70.
void expect_stopped_for_a_lost_lease(dlock_process& d) {
  EXPECT_EQ(d->read_line(5s), std::optional<std::string>{"got-TERM"}) << d->diagnostics();
  EXPECT_EQ(d->wait_exit(5s), std::optional<int>{exit_software}) << d->diagnostics();
  const auto err = d->read_stderr();
  EXPECT_EQ(dlock_lines(err), 1u) << err;
  EXPECT_NE(err.find("lease lost"), std::string::npos) << err;
}

TEST(cli_multi, losing_one_name_or_the_majority_stops_the_command_and_exits_70) {
  redis_server s0, s1, s2;
  const auto a = unique_name("cli-multi-lost") + "{a}";
  const auto b = unique_name("cli-multi-lost") + "{b}";
  // watchdog 600 ms: renewed every 200 ms.
  dlock_process both{
      {"--url", with_query(s0, "watchdog=600ms"), "exec", a, b, "--", sh, "-c", script(traps, 30)}};
  const auto name = unique_name("cli-red-lost");
  std::vector<std::string> args;
  for (const auto* s : {&s0, &s1, &s2}) {
    args.push_back("--url");
    args.push_back(with_query(*s, "watchdog=600ms"));
  }
  dlock_process red{cat(args, {"exec", name, "--", sh, "-c", script(traps, 30)})};
  ASSERT_EQ(both->read_line(10s), std::optional<std::string>{"ready"}) << both->diagnostics();
  ASSERT_EQ(red->read_line(10s), std::optional<std::string>{"ready"}) << red->diagnostics();
  EXPECT_EQ(s0.command({"DEL", b}), ":1");
  for (const auto* s : {&s0, &s1, &s2}) s->command({"DEL", name});
  expect_stopped_for_a_lost_lease(both);
  expect_stopped_for_a_lost_lease(red);
  EXPECT_EQ(exists(s0, a), ":0") << "the other name released";
  EXPECT_EQ(exists(s0, dlock::keys::holder_info(a)), ":0") << "descriptions removed";
  for (const auto* s : {&s0, &s1, &s2}) {
    EXPECT_EQ(exists(*s, dlock::keys::holder_info(name)), ":0") << "descriptions removed";
  }
}

TEST(cli_multi, exec_a_b_and_exec_b_a_at_once_all_complete_one_at_a_time) {
  redis_server srv;
  temp_dir dir;
  const auto a = unique_name("cli-multi-order") + "{a}";
  const auto b = unique_name("cli-multi-order") + "{b}";
  // Marks itself running, logs how many run (itself included), and unmarks itself.
  const auto section = "touch " + dir.path() + "/run.$$; ls " + dir.path() +
                       " | grep -c '^run\\.' >> " + dir.path() + "/seen; sleep 0.2; rm " +
                       dir.path() + "/run.$$; echo done";
  std::vector<std::unique_ptr<child_process>> runs;
  for (int i = 0; i < 4; ++i) {
    const auto& first = i % 2 ? a : b;
    const auto& second = i % 2 ? b : a;
    runs.push_back(std::make_unique<child_process>(
        dlock_argv({"--url", srv.url(), "exec", first, second, "--", sh, "-c", section})));
  }
  const auto started = steady::now();
  for (auto& r : runs) {
    EXPECT_EQ(r->read_to_eof(std::max(0ms, 15s - ms_since(started))), "done\n") << r->diagnostics();
    EXPECT_EQ(r->wait_exit(std::max(0ms, 15s - ms_since(started))), std::optional<int>{0})
        << r->diagnostics();
  }
  std::ifstream seen{dir.path() + "/seen"};
  int n = 0, lines = 0;
  while (seen >> n) {
    ++lines;
    EXPECT_EQ(n, 1) << "two ran at once";
  }
  EXPECT_EQ(lines, 4);
  EXPECT_EQ(exists(srv, a), ":0");
  EXPECT_EQ(exists(srv, b), ":0");
}

TEST(cli_multi, bad_usage_says_why_and_exits_64) {
  redis_server s0, s1;
  const auto u0 = s0.url(), u1 = s1.url();
  const auto n = unique_name("cli-multi-usage");
  const auto m = n + "-2";
  const std::vector<std::string> cmd{"--", "true"};
  const std::vector<std::vector<std::string>> cases = {
      cat({"--url", u0, "exec", "--permits", "2", n, m}, cmd),
      cat({"--url", u0, "exec", "--fair", n, m}, cmd),
      cat({"--url", u0, "exec", "--shared", n, m}, cmd),
      cat({"--url", u0, "exec", "--rw", n, m}, cmd),
      cat({"--url", u0, "--url", u1, "exec", "--permits", "2", n}, cmd),
      cat({"--url", u0, "--url", u1, "exec", "--fair", n}, cmd),
      cat({"--url", u0, "--url", u1, "exec", "--shared", n}, cmd),
      cat({"--url", u0, "--url", u1, "exec", "--rw", n}, cmd),
      cat({"--url", u0, "exec", n, n}, cmd),                                // a name twice
      cat({"--url", u0, "exec", n, ""}, cmd),                               // an empty name
      cat({"--url", u0, "--url", u0, "exec", n}, cmd),                      // a server twice
      cat({"--url", u0, "--url", u1, "--url", u0 + "/1", "exec", n}, cmd),  // ... in another db
      cat({"--url", u0, "--url", u1, "exec", n, m}, cmd),                   // several of both
      cat({"--url", u0, "--url", "http://x", "exec", n}, cmd),              // a bad URL among them
      cat({"exec", "--url", u0, "--url", u1, "--wait", "soon", n}, cmd),
      {"--url", u0, "exec", n, m, "--"},  // no command
      {"--url", u0, "--url", u1, "status", n},
      {"--url", u0, "--url", u1, "ping"},
  };
  for (const auto& args : cases) {
    std::string joined;
    for (const auto& a : args) joined += " '" + a + "'";
    const auto r = run_dlock(args);
    EXPECT_EQ(r.code, std::optional<int>{exit_usage}) << "dlock" << joined << ": " << describe(r);
    EXPECT_NE(r.err, "") << "dlock" << joined << " says why";
    EXPECT_EQ(r.out, "") << "dlock" << joined;
  }
  EXPECT_EQ(s0.command({"DBSIZE"}), ":0") << "nothing was locked";
  EXPECT_EQ(s1.command({"DBSIZE"}), ":0") << "nothing was locked";
}

}  // namespace cli_multi_test
