// The `dlock` command (tools/dlock) against real redis-server processes: its exit codes — the
// command's own code or 128 + its signal, 126/127 for a command that cannot run, 64 for bad
// usage (--kill-after too long for the lease included), 69 for an unreachable Redis or a wrong
// password, 75 when the lock was not acquired within --wait. (Helpers: cli_helpers.hpp.)
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli_helpers.hpp"
#include "dlock/keys.hpp"
#include "dlock/mutex.hpp"
#include "support/child_process.hpp"
#include "support/redis_server.hpp"
#include "test_util.hpp"

using namespace dlock::test;
using namespace dlock::test::cli;

namespace {

TEST(cli, exec_exits_with_the_commands_code_or_128_plus_its_signal) {
  redis_server srv;
  const auto name = dlock::test::unique_name("cli-code");
  struct {
    const char* script;
    int code;
  } const cases[] = {
      {"exit 0", 0},
      {"exit 3", 3},
      {"echo out; exit 42", 42},
      {"kill -TERM $$", 128 + SIGTERM},
      {"kill -KILL $$", 128 + SIGKILL},
      {"kill -INT $$", 128 + SIGINT},
  };
  std::string counter = "$-1";
  for (const auto& c : cases) {
    const auto r = run_dlock({"--url", srv.url(), "exec", name, "--", sh, "-c", c.script});
    EXPECT_EQ(r.code, std::optional<int>{c.code}) << c.script << ": " << describe(r);
    EXPECT_EQ(r.err, "") << c.script;
    EXPECT_EQ(exists(srv, name), ":0") << "released after `" << c.script << "`";
    const auto now = srv.command({"GET", dlock::keys::slot_fencing_counter_of(name)});
    EXPECT_NE(now, counter) << "one token per run";
    counter = now;
  }
}

TEST(cli, exec_exits_127_for_a_missing_command_and_126_for_one_not_executable) {
  redis_server srv;
  dlock::test::temp_dir dir;
  const auto name = dlock::test::unique_name("cli-notfound");
  for (const auto* cmd : {"dlock-test-no-such-command", "/nonexistent/dlock-test-cmd"}) {
    const auto r = run_dlock({"--url", srv.url(), "-v", "exec", name, "--", cmd, "arg"});
    EXPECT_EQ(r.code, std::optional<int>{127}) << cmd << ": " << describe(r);
    EXPECT_NE(r.err.find(cmd), std::string::npos) << "names the command: " << r.err;
    EXPECT_EQ(exists(srv, name), ":0") << "released";
  }
  const auto not_executable = dir.path() + "/not-executable";
  std::ofstream{not_executable} << "#!/bin/sh\nexit 0\n";
  ::chmod(not_executable.c_str(), 0644);
  const auto r = run_dlock({"--url", srv.url(), "exec", name, "--", not_executable});
  EXPECT_EQ(r.code, std::optional<int>{126}) << describe(r);
  EXPECT_EQ(exists(srv, name), ":0") << "released";
}

TEST(cli, bad_usage_or_input_exits_64) {
  redis_server srv;
  const auto name = dlock::test::unique_name("cli-usage");
  const auto url = srv.url();
  const std::vector<std::vector<std::string>> cases = {
      {"--url", url, "exec", "", "--", "true"},                     // empty name
      {"--url", url, "exec", "--wait", "abc", name, "--", "true"},  // bad duration
      {"--url", url, "exec", "--wait", "-1s", name, "--", "true"},
      {"--url", url, "exec", "--lease", "0", name, "--", "true"},  // lease must be > 0
      {"--url", url, "exec", "--lease", "10 parsecs", name, "--", "true"},
      {"--url", url, "exec", "--kill-after", "soon", name, "--", "true"},
      {"--url", url, "exec", "--kill-after", "11s", name, "--", "true"},  // > 30 s watchdog / 3
      {"--url", "http://x", "exec", name, "--", "true"},                  // bad URL: scheme
      {"--url", "redis://127.0.0.1:0", "exec", name, "--", "true"},       // bad URL: port 0
      {"--url", "redis://127.0.0.1:0", "ping"},
      {"--url", "http://x", "status", name},
      {"--url", url, "--timeout", "abc", "ping"},  // bad global duration
      {"--url", url, "exec", name},                // missing command
      {"--url", url, "exec", name, "--"},
      {"--url", url, "exec"},              // missing name
      {"--url", url, "frobnicate", name},  // unknown subcommand
      {"--url", url},                      // no subcommand
      {"--url", url, "unlock", name},      // unlock without --force
      {"--url", url, "status", ""},        // empty name
      {"--url", url, "exec", "--no-such-option", name, "--", "true"},
  };
  for (const auto& args : cases) {
    std::string joined;
    for (const auto& a : args) joined += " '" + a + "'";
    const auto r = run_dlock(args);
    EXPECT_EQ(r.code, std::optional<int>{exit_usage}) << "dlock" << joined << ": " << describe(r);
    EXPECT_NE(r.out + r.err, "") << "dlock" << joined << " says why";
  }
  EXPECT_EQ(srv.command({"DBSIZE"}), ":0") << "nothing was locked";
}

TEST(cli, kill_after_longer_than_a_third_of_the_lease_exits_64) {
  redis_server srv;
  const auto name = dlock::test::unique_name("cli-kill-after-usage");
  struct {
    std::vector<std::string> args;
    const char* says;
  } const cases[] = {
      {{"--url", srv.url(), "exec", "--kill-after", "10001ms", name, "--", "true"},
       "longer than a third of the watchdog lease (30000 ms)"},
      {{"--url", with_query(srv, "watchdog=600ms"), "exec", "--kill-after", "300ms", name, "--",
        "true"},
       "longer than a third of the watchdog lease (600 ms)"},
      {{"--url", srv.url(), "exec", "--lease", "3s", "--kill-after", "1001ms", name, "--", "true"},
       "longer than a third of the --lease (3000 ms)"},
      // The default --kill-after (20 ms) plus the 50 ms margin leave a 60 ms lease no time.
      {{"--url", srv.url(), "exec", "--lease", "60ms", name, "--", "true"}, "too short"},
  };
  for (const auto& c : cases) {
    const auto r = run_dlock(c.args);
    EXPECT_EQ(r.code, std::optional<int>{exit_usage}) << describe(r);
    EXPECT_EQ(count_lines(r.err), 1u) << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "") << "the command did not run";
  }
  EXPECT_EQ(srv.command({"DBSIZE"}), ":0") << "refused before anything was locked";
  // A third exactly is accepted.
  const auto r = run_dlock({"--url", srv.url(), "exec", "--lease", "3s", "--kill-after", "1s", name,
                            "--", sh, "-c", "echo ran"});
  EXPECT_EQ(r.code, std::optional<int>{0}) << describe(r);
  EXPECT_EQ(r.out, "ran\n");
}

TEST(cli, an_unreachable_redis_exits_69) {
  const auto url = "redis://127.0.0.1:" + std::to_string(dlock::test::free_port());
  const auto name = dlock::test::unique_name("cli-unreachable");
  // Concurrently: each takes the connect timeout (2 s) to give up.
  const std::vector<std::vector<std::string>> cases = {
      {"--url", url, "exec", name, "--", sh, "-c", "echo ran"},
      {"--url", url, "exec", "--wait", "0", name, "--", sh, "-c", "echo ran"},
      {"--url", url, "status", name},
      {"--url", url, "status", "--json", name},
      {"--url", url, "unlock", "--force", name},
      {"--url", url, "ping"},
  };
  const auto started = steady::now();
  std::vector<std::unique_ptr<child_process>> runs;
  for (const auto& args : cases) runs.push_back(std::make_unique<child_process>(dlock_argv(args)));
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto code = runs[i]->wait_exit(std::max(0ms, 15s - ms_since(started)));
    EXPECT_EQ(code, std::optional<int>{exit_unavailable}) << runs[i]->diagnostics();
    EXPECT_NE(runs[i]->read_stderr().find("connection refused"), std::string::npos)
        << runs[i]->diagnostics();
    EXPECT_EQ(runs[i]->read_to_eof(1s).find("ran"), std::string::npos) << "no command ran";
  }
  EXPECT_LT(ms_since(started), 10s);
}

TEST(cli, a_wrong_password_exits_69) {
  redis_server srv{{.requirepass = "s3cret"}};
  const auto name = dlock::test::unique_name("cli-auth");
  const auto port = std::to_string(srv.port());
  const std::vector<std::vector<std::string>> refused = {
      {"--url", srv.url(), "--password", "wrong", "exec", name, "--", sh, "-c", "echo ran"},
      {"--url", "redis://:wrong@127.0.0.1:" + port, "exec", name, "--", sh, "-c", "echo ran"},
      {"--url", "redis://:wrong@127.0.0.1:" + port, "status", name},
      {"--url", srv.url(), "--password", "wrong", "ping"},
      {"--url", srv.url(), "exec", name, "--", sh, "-c", "echo ran"},  // no password: NOAUTH
  };
  for (const auto& args : refused) {
    const auto r = run_dlock(args);
    EXPECT_EQ(r.code, std::optional<int>{exit_unavailable}) << describe(r);
    EXPECT_NE(r.err.find("auth"), std::string::npos) << describe(r);
    EXPECT_EQ(r.out.find("ran"), std::string::npos) << "no command ran";
  }
  // The right one works, both ways.
  auto r = run_dlock(
      {"--url", srv.url(), "--password", "s3cret", "exec", name, "--", sh, "-c", "echo ran"});
  EXPECT_EQ(r.code, std::optional<int>{0}) << describe(r);
  EXPECT_EQ(r.out, "ran\n");
  r = run_dlock({"--url", "redis://:s3cret@127.0.0.1:" + port, "ping"});
  EXPECT_EQ(r.code, std::optional<int>{0}) << describe(r);
}

TEST(cli, exec_exits_75_when_not_acquired_within_the_wait) {
  redis_server srv;
  const auto name = dlock::test::unique_name("cli-wait");
  // Held by another dlock exec.
  dlock_process holder{
      {"--url", srv.url(), "exec", name, "--", sh, "-c", "echo ready; exec sleep 30"}};
  ASSERT_EQ(holder->read_line(10s), std::optional<std::string>{"ready"}) << holder->diagnostics();

  auto r = run_dlock({"--url", srv.url(), "exec", "--wait", "0", name, "--", sh, "-c", "echo ran"});
  EXPECT_EQ(r.code, std::optional<int>{exit_tempfail}) << describe(r);
  EXPECT_EQ(r.out, "") << "the command did not run";
  EXPECT_LT(r.took, 3s) << "--wait 0 makes one attempt";

  r = run_dlock({"--url", srv.url(), "exec", "--wait", "200ms", name, "--", sh, "-c", "echo ran"});
  EXPECT_EQ(r.code, std::optional<int>{exit_tempfail}) << describe(r);
  EXPECT_EQ(r.out, "");
  EXPECT_GE(r.took, 200ms) << "waited the whole --wait";
  EXPECT_LT(r.took, 3s);

  // SIGTERM to the holder reaches `sleep`, which dies of it: 128+15, and the lock is released.
  ::kill(holder->pid(), SIGTERM);
  EXPECT_EQ(holder->wait_exit(5s), std::optional<int>{128 + SIGTERM}) << holder->diagnostics();
  EXPECT_EQ(exists(srv, name), ":0");

  // Held by a dlock::mutex in this process.
  dlock::client c{dlock::test::config_for(srv)};
  dlock::mutex m{c, name};
  m.lock();
  r = run_dlock({"--url", srv.url(), "exec", "--wait", "0", name, "--", sh, "-c", "echo ran"});
  EXPECT_EQ(r.code, std::optional<int>{exit_tempfail}) << describe(r);
  r = run_dlock({"--url", srv.url(), "exec", "--wait", "200ms", name, "--", sh, "-c", "echo ran"});
  EXPECT_EQ(r.code, std::optional<int>{exit_tempfail}) << describe(r);
  EXPECT_GE(r.took, 200ms);
  EXPECT_EQ(r.out, "");
  m.unlock();
  r = run_dlock({"--url", srv.url(), "exec", "--wait", "0", name, "--", sh, "-c", "echo ran"});
  EXPECT_EQ(r.code, std::optional<int>{0}) << "free again: " << describe(r);
  EXPECT_EQ(r.out, "ran\n");
}

}  // namespace
