// The `dlock` command (tools/dlock) with semaphores and latches, against real redis-server
// processes: `exec --permits N` never running more than N commands at once, a --permits that
// does not match the semaphore refused, the permit of a kill -9'd exec coming back when its
// lease ends, `latch set | count-down | wait | count`, `status` (text and --json) of a semaphore
// with permits in use and of a bare counter, and bad input. (Helpers: cli_helpers.hpp.)
//
// Concurrency is measured by the commands themselves (marker files of the running ones), never
// by timing; every wait is bounded.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli_helpers.hpp"
#include "cli_json.hpp"
#include "dlock/keys.hpp"
#include "support/redis_server.hpp"
#include "test_util.hpp"

using namespace dlock::test;
using namespace dlock::test::cli;

// A named namespace, not an anonymous one: unity builds merge the anonymous namespaces of the
// test files.
namespace cli_semaphore_test {

std::string file_text(const std::string& path) {
  std::ifstream in{path};
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The numbers of a file of one number per line.
std::vector<int> numbers(const std::string& text) {
  std::vector<int> out;
  std::istringstream in{text};
  for (int n = 0; in >> n;) out.push_back(n);
  return out;
}

// A command that marks itself running in `dir`, logs how many are running then (itself
// included) to `dir`/seen, runs for a while, and unmarks itself.
std::string counted_section(const std::string& dir) {
  return "touch " + dir + "/run.$$; ls " + dir + " | grep -c '^run\\.' >> " + dir +
         "/seen; sleep 0.4; rm " + dir + "/run.$$; echo done";
}

TEST(cli_semaphore, exec_permits_2_never_runs_more_than_2_of_4) {
  redis_server srv;
  temp_dir dir;
  const auto name = unique_name("cli-permits");
  std::vector<std::unique_ptr<child_process>> runs;
  for (int i = 0; i < 4; ++i) {
    runs.push_back(std::make_unique<child_process>(
        dlock_argv({"--url", srv.url(), "exec", "--permits", "2", name, "--", sh, "-c",
                    counted_section(dir.path())})));
  }
  const auto started = steady::now();
  for (auto& r : runs) {
    EXPECT_EQ(r->read_to_eof(std::max(0ms, 20s - ms_since(started))), "done\n") << r->diagnostics();
    EXPECT_EQ(r->wait_exit(std::max(0ms, 20s - ms_since(started))), std::optional<int>{0})
        << r->diagnostics();
  }
  const auto seen = numbers(file_text(dir.path() + "/seen"));
  ASSERT_EQ(seen.size(), 4u) << "each ran once";
  for (const int n : seen) EXPECT_LE(n, 2) << "more than 2 ran at once";
  EXPECT_EQ(srv.command({"GET", name}), "2") << "all permits back";
  EXPECT_EQ(exists(srv, dlock::keys::permit_timeouts(name)), ":0");
  EXPECT_EQ(exists(srv, dlock::keys::holder_info(name)), ":0") << "descriptions removed";
}

TEST(cli_semaphore, a_permits_count_that_does_not_match_exits_64) {
  redis_server srv;
  const auto name = unique_name("cli-permits-mismatch");
  auto r =
      run_dlock({"--url", srv.url(), "exec", "--permits", "2", name, "--", sh, "-c", "echo ran"});
  ASSERT_EQ(r.code, std::optional<int>{0}) << describe(r);
  EXPECT_EQ(r.out, "ran\n");
  r = run_dlock({"--url", srv.url(), "exec", "--permits", "3", name, "--", sh, "-c", "echo ran"});
  EXPECT_EQ(r.code, std::optional<int>{exit_usage}) << describe(r);
  EXPECT_EQ(r.out, "") << "not run";
  EXPECT_NE(r.err.find("has 2 permits in all (2 available, 0 in use), not --permits 3"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(srv.command({"GET", name}), "2") << "unchanged";

  // While one permit is in use the total is still 2.
  dlock_process holder{
      {"--url", srv.url(), "exec", "--permits", "2", name, "--", sh, "-c", script("", 20)}};
  ASSERT_EQ(holder->read_line(10s), std::optional<std::string>{"ready"}) << holder->diagnostics();
  r = run_dlock({"--url", srv.url(), "exec", "--permits", "2", name, "--", sh, "-c", "echo ran"});
  EXPECT_EQ(r.code, std::optional<int>{0}) << describe(r);
  r = run_dlock({"--url", srv.url(), "exec", "--permits", "1", name, "--", sh, "-c", "echo ran"});
  EXPECT_EQ(r.code, std::optional<int>{exit_usage}) << describe(r);
  EXPECT_NE(r.err.find("(1 available, 1 in use)"), std::string::npos) << r.err;

  const auto other = unique_name("cli-permits-list");
  srv.command({"RPUSH", other, "x"});
  r = run_dlock({"--url", srv.url(), "exec", "--permits", "2", other, "--", sh, "-c", "echo ran"});
  EXPECT_EQ(r.code, std::optional<int>{exit_usage}) << describe(r);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("another type"), std::string::npos) << r.err;
}

TEST(cli_semaphore, the_permit_of_a_killed_exec_comes_back_after_its_lease) {
  redis_server srv;
  const auto name = unique_name("cli-permits-kill");
  // The command prints its pid (its process group's id) so that the test can end it.
  child_process victim{dlock_argv({"--url", srv.url(), "exec", "--permits", "1", "--lease", "2s",
                                   name, "--", sh, "-c", "echo $$; " + script("", 10)})};
  const auto pid_line = victim.read_line(10s);
  ASSERT_TRUE(pid_line) << victim.diagnostics();
  const pid_t command = static_cast<pid_t>(std::stol(*pid_line));
  ASSERT_EQ(victim.read_line(10s), std::optional<std::string>{"ready"}) << victim.diagnostics();
  victim.kill9();
  const auto killed = steady::now();

  auto r = run_dlock({"--url", srv.url(), "exec", "--permits", "1", "--wait", "0", name, "--", sh,
                      "-c", "echo ran"});
  EXPECT_EQ(r.code, std::optional<int>{exit_tempfail}) << "still leased: " << describe(r);
  r = run_dlock({"--url", srv.url(), "exec", "--permits", "1", "--wait", "10s", name, "--", sh,
                 "-c", "echo ran"});
  EXPECT_EQ(r.code, std::optional<int>{0}) << describe(r);
  EXPECT_EQ(r.out, "ran\n");
  // The lease (2 s, taken before "ready") ends, and the waiter wakes at its deadline.
  EXPECT_LT(ms_since(killed), 6s);
  ::kill(-command, SIGKILL);
}

TEST(cli_semaphore, latch_set_count_down_wait_and_count) {
  redis_server srv;
  const auto name = unique_name("cli-latch");
  const std::vector<std::string> url{"--url", srv.url(), "latch", name};
  auto latch = [&](std::vector<std::string> args, milliseconds limit = 15s) {
    args.insert(args.begin(), url.begin(), url.end());
    return run_dlock(std::move(args), limit);
  };
  auto r = latch({"set", "2"});
  EXPECT_EQ(r.code, std::optional<int>{0}) << describe(r);
  r = latch({"set", "5"});
  EXPECT_EQ(r.code, std::optional<int>{1}) << describe(r);
  EXPECT_NE(r.err.find("already has a count (2)"), std::string::npos) << r.err;
  r = latch({"count"});
  EXPECT_EQ(r.out, "2\n") << describe(r);
  r = latch({"wait", "--timeout", "200ms"});
  EXPECT_EQ(r.code, std::optional<int>{exit_tempfail}) << describe(r);

  child_process waiting{dlock_argv({"--url", srv.url(), "latch", name, "wait"})};
  ASSERT_TRUE(wait_until([&] { return numsub(srv, dlock::keys::latch_channel(name)) == 1; }, 10s))
      << waiting.diagnostics();
  EXPECT_EQ(latch({"count-down"}).code, std::optional<int>{0});
  EXPECT_EQ(latch({"count"}).out, "1\n");
  EXPECT_EQ(waiting.wait_exit(100ms), std::nullopt) << "still closed";
  EXPECT_EQ(latch({"count-down"}).code, std::optional<int>{0});
  EXPECT_EQ(waiting.wait_exit(10s), std::optional<int>{0}) << waiting.diagnostics();
  EXPECT_EQ(latch({"count"}).out, "0\n");
  r = latch({"wait", "--timeout", "5s"});
  EXPECT_EQ(r.code, std::optional<int>{0}) << describe(r);
  EXPECT_LT(r.took, 3s) << "open: at once";

  // count-down N past zero opens it as well.
  EXPECT_EQ(latch({"set", "3"}).code, std::optional<int>{0});
  EXPECT_EQ(latch({"count-down", "5"}).code, std::optional<int>{0});
  EXPECT_EQ(latch({"wait", "--timeout", "1s"}).code, std::optional<int>{0});
}

// `status --json` of `name` with the execs `pids` each holding one of its 3 permits.
void expect_semaphore_json(const redis_server& srv, const std::string& name,
                           const std::set<std::int64_t>& pids, const std::string& command) {
  const auto r = run_dlock({"--url", srv.url(), "status", "--json", name});
  EXPECT_EQ(r.code, std::optional<int>{0}) << describe(r);
  const auto j = parse_json(r.out);
  EXPECT_EQ(j.keys(), (std::vector<std::string>{"name", "held", "kind", "available", "in_use",
                                                "permits", "subscribers"}));
  EXPECT_EQ(j.at("kind").text, "semaphore");
  EXPECT_EQ(j.at("available").integer(), 3 - static_cast<std::int64_t>(pids.size()));
  EXPECT_EQ(j.at("in_use").integer(), static_cast<std::int64_t>(pids.size()));
  std::set<std::int64_t> seen;
  for (const auto& p : j.at("permits").items) {
    EXPECT_EQ(p.keys(), (std::vector<std::string>{"id", "expires_in_ms", "host", "pid", "command",
                                                  "acquired_at"}));
    EXPECT_EQ(p.at("id").text.size(), 32u);
    EXPECT_GT(p.at("expires_in_ms").integer(), 0);
    EXPECT_LE(p.at("expires_in_ms").integer(), 30000);
    EXPECT_EQ(p.at("command").text, command);
    seen.insert(p.at("pid").integer());
  }
  EXPECT_EQ(seen, pids) << r.out;
}

TEST(cli_semaphore, status_shows_permits_in_use_with_their_holders) {
  redis_server srv;
  const auto name = unique_name("cli-permits-status");
  const auto body = script("", 20);
  std::set<std::int64_t> pids;
  {
    dlock_process a{{"--url", srv.url(), "exec", "--permits", "3", name, "--", sh, "-c", body}};
    dlock_process b{{"--url", srv.url(), "exec", "--permits", "3", name, "--", sh, "-c", body}};
    ASSERT_EQ(a->read_line(10s), std::optional<std::string>{"ready"}) << a->diagnostics();
    ASSERT_EQ(b->read_line(10s), std::optional<std::string>{"ready"}) << b->diagnostics();
    pids = {a->pid(), b->pid()};
    expect_semaphore_json(srv, name, pids, std::string{sh} + " -c " + body);
    const auto r = run_dlock({"--url", srv.url(), "status", name});
    EXPECT_EQ(r.code, std::optional<int>{0}) << describe(r);
    EXPECT_EQ(r.out.rfind(name + ": semaphore, 2 of 3 permits in use\n  available: 1\n", 0), 0u)
        << r.out;
    EXPECT_EQ(count_lines(r.out), 9u) << r.out;
    for (const auto pid : pids) {
      EXPECT_NE(r.out.find(", pid " + std::to_string(pid) + ", since "), std::string::npos)
          << r.out;
    }
    EXPECT_NE(r.out.find("(lease ends in "), std::string::npos) << r.out;
  }  // both get SIGTERM: their commands end, the permits go back
  ASSERT_TRUE(wait_until([&] { return srv.command({"GET", name}) == "3"; }, 10s));
  const auto r = run_dlock({"--url", srv.url(), "status", "--json", name});
  EXPECT_EQ(r.code, std::optional<int>{1}) << "none in use: " << describe(r);
  const auto j = parse_json(r.out);
  EXPECT_EQ(j.at("kind").text, "counter");
  EXPECT_EQ(j.at("counter").integer(), 3);
  EXPECT_EQ(exists(srv, dlock::keys::holder_info(name)), ":0");
  const auto text = run_dlock({"--url", srv.url(), "status", name});
  EXPECT_EQ(text.out.rfind(name + ": counter 3\n  a latch with count 3, or a semaphore", 0), 0u)
      << text.out;
}

TEST(cli_semaphore, bad_input_says_why_and_exits_64) {
  redis_server srv;
  const auto url = srv.url();
  const auto name = unique_name("cli-permits-usage");
  const std::vector<std::vector<std::string>> cases = {
      {"--url", url, "exec", "--permits", "0", name, "--", "true"},
      {"--url", url, "exec", "--permits", "-1", name, "--", "true"},
      {"--url", url, "exec", "--permits", "abc", name, "--", "true"},
      {"--url", url, "exec", "--permits", "2.5", name, "--", "true"},
      {"--url", url, "exec", "--permits", "99999999999999999999", name, "--", "true"},
      {"--url", url, "exec", "--permits", "2", "--fair", name, "--", "true"},
      {"--url", url, "exec", "--permits", "2"},  // missing NAME
      {"--url", url, "exec", "--permits", "2", name},
      {"--url", url, "exec", "--permits"},
      {"--url", url, "latch"},
      {"--url", url, "latch", name},
      {"--url", url, "latch", name, "frobnicate"},
      {"--url", url, "latch", name, "set"},
      {"--url", url, "latch", name, "set", "0"},
      {"--url", url, "latch", name, "set", "x"},
      {"--url", url, "latch", name, "set", "1", "2"},
      {"--url", url, "latch", name, "count-down", "0"},
      {"--url", url, "latch", name, "count", "3"},
      {"--url", url, "latch", name, "count", "--timeout", "1s"},
      {"--url", url, "latch", name, "wait", "--timeout", "soon"},
      {"--url", url, "latch", "", "count"},
  };
  for (const auto& args : cases) {
    std::string joined;
    for (const auto& a : args) joined += " '" + a + "'";
    const auto r = run_dlock(args);
    EXPECT_EQ(r.code, std::optional<int>{exit_usage}) << "dlock" << joined << ": " << describe(r);
    EXPECT_NE(r.err, "") << "dlock" << joined << " says why";
    EXPECT_EQ(r.out, "") << "dlock" << joined;
  }
  EXPECT_EQ(srv.command({"DBSIZE"}), ":0") << "nothing was touched";
}

}  // namespace cli_semaphore_test
