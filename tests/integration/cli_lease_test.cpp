// The `dlock` command (tools/dlock) against real redis-server processes: losing the lease while
// the command runs (lock deleted, Redis stopped or hanging) and the stop before the lease's trust
// deadline — SIGTERM, then SIGKILL of the command's process group after --kill-after; --lease as
// a limit on the run time; no start on a lease without enough trust left. (Helpers:
// cli_helpers.hpp.)
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/types.h>

#include <charconv>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "cli_helpers.hpp"
#include "dlock/keys.hpp"
#include "support/child_process.hpp"
#include "support/redis_server.hpp"
#include "support/tcp_proxy.hpp"
#include "test_util.hpp"

using namespace dlock::test;
using namespace dlock::test::cli;

namespace {

// The process group of `pid` (from /proc), or -1 when it is gone or a zombie.
pid_t process_group(pid_t pid) {
  std::ifstream in{"/proc/" + std::to_string(pid) + "/stat"};
  std::string stat;
  if (!std::getline(in, stat)) return -1;
  const auto paren = stat.rfind(')');  // the command name may hold spaces and parentheses
  if (paren == std::string::npos) return -1;
  char state = 0;
  long ppid = 0, pgrp = -1;
  std::istringstream fields{stat.substr(paren + 1)};
  fields >> state >> ppid >> pgrp;
  return state == 'Z' ? -1 : static_cast<pid_t>(pgrp);  // a zombie runs nothing
}

// The processes of group `pgid` still running (zombies excepted: they run nothing, and with no
// reaping init an orphan may stay one).
std::vector<pid_t> running_in_group(pid_t pgid) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator{"/proc", ec}) {
    const auto name = e.path().filename().string();
    pid_t pid = 0;
    const auto [end, err] = std::from_chars(name.data(), name.data() + name.size(), pid);
    if (err != std::errc{} || end != name.data() + name.size()) continue;
    if (process_group(pid) == pgid) out.push_back(pid);
  }
  return out;
}

// A command that ignores SIGTERM, as does what it started: it prints "pids <its pid> <its
// sleep's pid>", then "ready", then "got-TERM" at each SIGTERM, and keeps waiting for its
// `sleep` (which ignores SIGTERM) — only a SIGKILL to both ends it before `seconds`.
std::string stubborn_command(int seconds) {
  return "trap 'echo got-TERM' TERM; (trap '' TERM; exec sleep " + std::to_string(seconds) +
         ") & echo \"pids $$ $!\"; echo ready; while kill -0 $! 2>/dev/null; do wait $!; done";
}

// Reads stubborn_command's "pids" and "ready" lines; the shell's pid (which leads the group).
pid_t read_stubborn_pids(dlock_process& p, pid_t& sleep_pid) {
  const auto line = p->read_line(10s);
  std::istringstream in{line.value_or("")};
  std::string word;
  pid_t shell = -1;
  sleep_pid = -1;
  in >> word >> shell >> sleep_pid;
  if (word != "pids" || p->read_line(5s) != std::optional<std::string>{"ready"}) return -1;
  return shell;
}

// -- losing the lease while the command runs ------------------------------------------------------

TEST(cli, deleting_the_lock_stops_the_command_and_exits_70) {
  redis_server srv;
  const auto name = dlock::test::unique_name("cli-lost-del");
  // watchdog 600 ms: renewed every 200 ms.
  dlock_process d{{"--url", with_query(srv, "watchdog=600ms"), "exec", name, "--", sh, "-c",
                   script(traps, 30)}};
  ASSERT_EQ(d->read_line(10s), std::optional<std::string>{"ready"}) << d->diagnostics();
  const auto deleted_at = steady::now();
  EXPECT_EQ(srv.command({"DEL", name}), ":1");
  EXPECT_EQ(d->read_line(5s), std::optional<std::string>{"got-TERM"}) << d->diagnostics();
  const auto lag = ms_since(deleted_at);
  // The next renewal (<= 200 ms) finds the hold gone; the shell runs its trap after its current
  // 50 ms nap. Slop: 250 ms.
  EXPECT_LT(lag, 500ms) << "SIGTERM " << lag.count() << " ms after the DEL";
  EXPECT_EQ(d->wait_exit(5s), std::optional<int>{exit_software}) << d->diagnostics();
  const auto err = d->read_stderr();
  EXPECT_EQ(dlock_lines(err), 1u) << err;
  EXPECT_NE(err.find("lease lost"), std::string::npos) << err;
  EXPECT_EQ(exists(srv, name), ":0");
  EXPECT_EQ(exists(srv, dlock::keys::holder_info(name)), ":0") << "description removed";
}

TEST(cli, redis_stopping_stops_the_command_at_the_lease_deadline_and_exits_70) {
  redis_server srv;
  const auto name = dlock::test::unique_name("cli-lost-stop");
  dlock_process d{{"--url", with_query(srv, "watchdog=600ms&timeout=200ms"), "exec", name, "--", sh,
                   "-c", script(traps, 30, "0.02")}};
  ASSERT_EQ(d->read_line(10s), std::optional<std::string>{"ready"}) << d->diagnostics();
  srv.pause();
  const auto paused_at = steady::now();  // the server stopped before this
  const auto line = d->read_line(5s);
  const auto lag = ms_since(paused_at);
  // dlock gives up on releasing (bounded retries of 200 ms calls) and exits while Redis is still
  // stopped.
  const auto code = d->wait_exit(6s);
  const auto exited_after = ms_since(paused_at);
  srv.resume();
  ASSERT_EQ(line, std::optional<std::string>{"got-TERM"}) << d->diagnostics();
  // The last renewal confirmed before the stop was sent at most 200 ms (a renewal period)
  // before it, so dlock's deadline (that + 600 ms - 8 ms of drift) is 392 to 592 ms after the
  // stop. SIGTERM comes --kill-after (default 200 ms: a third of the lease) plus the 50 ms
  // margin before it: 142 to 342 ms after the stop, while the lease is still trusted, not when
  // it is lost. Slop 150 ms: the shell runs its trap after its current 20 ms nap; scheduling.
  EXPECT_LT(lag, 500ms) << "SIGTERM " << lag.count() << " ms after Redis stopped (lease 600 ms)";
  EXPECT_GT(lag, 120ms) << "the lease was trusted while it had more than kill-after + margin";
  EXPECT_EQ(code, std::optional<int>{exit_software}) << d->diagnostics();
  EXPECT_LT(exited_after, 6s);
  const auto err = d->read_stderr();
  EXPECT_EQ(dlock_lines(err), 1u) << err;
  EXPECT_NE(err.find("not renewed in time"), std::string::npos) << err;
  EXPECT_EQ(exists(srv, name), ":0") << "expired while Redis was stopped";
}

// Regression: the holder description for `status` used to be refreshed on dlock's signal loop,
// so while Redis did not answer, the lease-lost signal waited for that call's timeout (here 2 s)
// and the command ran on well past the lease.
TEST(cli, a_hanging_redis_call_does_not_delay_stopping_the_command) {
  redis_server srv;
  const auto name = dlock::test::unique_name("cli-lost-slow");
  dlock_process d{{"--url", with_query(srv, "watchdog=600ms&timeout=2s"), "exec", name, "--", sh,
                   "-c", script(traps, 30, "0.02")}};
  ASSERT_EQ(d->read_line(10s), std::optional<std::string>{"ready"}) << d->diagnostics();
  srv.pause();
  const auto paused_at = steady::now();
  const auto line = d->read_line(5s);
  const auto lag = ms_since(paused_at);
  srv.resume();  // the calls in flight are answered; dlock finishes
  ASSERT_EQ(line, std::optional<std::string>{"got-TERM"}) << d->diagnostics();
  EXPECT_LT(lag, 800ms) << "SIGTERM " << lag.count() << " ms after Redis stopped (lease 600 ms, "
                        << "call timeout 2 s)";
  EXPECT_EQ(d->wait_exit(15s), std::optional<int>{exit_software}) << d->diagnostics();
}

TEST(cli, a_fixed_lease_is_not_renewed_and_outliving_it_counts_as_losing_it) {
  redis_server srv;
  const auto name = dlock::test::unique_name("cli-lease");
  // Done within the lease: released at once, not left to expire.
  auto r = run_dlock({"--url", srv.url(), "exec", "--lease", "5s", name, "--", sh, "-c",
                      "echo $DLOCK_FENCING_TOKEN"});
  EXPECT_EQ(r.code, std::optional<int>{0}) << describe(r);
  EXPECT_EQ(exists(srv, name), ":0");

  const auto started = steady::now();  // before the acquire was sent
  dlock_process d{{"--url", srv.url(), "exec", "--lease", "300ms", name, "--", sh, "-c",
                   script(traps, 30, "0.02")}};
  ASSERT_EQ(d->read_line(10s), std::optional<std::string>{"ready"}) << d->diagnostics();
  const auto ready_at = steady::now();  // after the acquire was sent
  const auto pttl = std::stoll(srv.command({"PTTL", name}).substr(1));
  EXPECT_GT(pttl, 0);
  EXPECT_LE(pttl, 300) << "the fixed lease";
  EXPECT_EQ(d->read_line(5s), std::optional<std::string>{"got-TERM"}) << d->diagnostics();
  // Trusted until sent + 300 ms - 5 ms of drift; SIGTERM --kill-after (default 100 ms, a third)
  // plus the 50 ms margin before that: at sent + 145 ms, so the command is stopped before the
  // lease ends rather than after.
  EXPECT_GE(ms_since(started), 140ms) << "the lease was trusted while it had time left";
  EXPECT_LT(ms_since(ready_at), 300ms) << "SIGTERM before the lease ended";
  EXPECT_EQ(d->wait_exit(5s), std::optional<int>{exit_software}) << d->diagnostics();
  const auto err = d->read_stderr();
  EXPECT_EQ(dlock_lines(err), 1u) << err;
  EXPECT_NE(err.find("the --lease of 300 ms (a limit on the run time) ends in"), std::string::npos)
      << err;
  EXPECT_TRUE(dlock::test::wait_until([&] { return exists(srv, name) == ":0"; }, 2s));
}

TEST(cli, a_fixed_lease_sigkills_a_command_ignoring_sigterm_before_the_lease_ends) {
  redis_server srv;
  const auto name = dlock::test::unique_name("cli-lease-kill");
  dlock_process d{
      {"--url", srv.url(), "exec", "--lease", "3s", name, "--", sh, "-c", stubborn_command(15)}};
  pid_t sleep_pid = -1;
  const pid_t group = read_stubborn_pids(d, sleep_pid);
  ASSERT_GT(group, 0) << d->diagnostics();
  // Redis drops the lock at lease_end at the latest.
  const auto pttl = milliseconds{std::stoll(srv.command({"PTTL", name}).substr(1))};
  const auto lease_end = steady::now() + pttl;
  EXPECT_GT(pttl, 2500ms);
  EXPECT_EQ(process_group(group), group) << "the command leads a process group of its own";
  EXPECT_EQ(process_group(sleep_pid), group) << "and what it starts is in it";

  // dlock trusts the lease until about lease_end - 32 ms (drift); SIGTERM comes --kill-after
  // (default 1 s, a third of the lease) plus the 50 ms margin before that, SIGKILL 50 ms before.
  EXPECT_EQ(d->read_line(5s), std::optional<std::string>{"got-TERM"}) << d->diagnostics();
  const auto termed_at = steady::now();
  EXPECT_LT(termed_at, lease_end - 1000ms) << "SIGTERM at least --kill-after before the end, "
                                           << (lease_end - termed_at) / 1ms << " ms before";
  EXPECT_GT(termed_at, lease_end - 1400ms) << "not before the lease ran short";
  ASSERT_TRUE(dlock::test::wait_until([&] { return running_in_group(group).empty(); }, 5s))
      << d->diagnostics();
  const auto gone_at = steady::now();
  EXPECT_LT(gone_at, lease_end) << "the group was killed " << (gone_at - lease_end) / 1ms
                                << " ms after the lease ended";
  EXPECT_GE(gone_at - termed_at, 900ms) << "--kill-after between SIGTERM and SIGKILL";
  EXPECT_EQ(d->wait_exit(5s), std::optional<int>{exit_software}) << d->diagnostics();
  EXPECT_EQ(d->read_to_eof(1s), "") << "got one SIGTERM, and nothing after the SIGKILL";
  const auto err = d->read_stderr();
  EXPECT_EQ(dlock_lines(err), 1u) << err;
  EXPECT_NE(err.find("--lease of 3000 ms"), std::string::npos) << err;
  EXPECT_TRUE(dlock::test::wait_until([&] { return exists(srv, name) == ":0"; }, 2s));
}

// A lease with too little trust left when the command is about to start (here: every byte to
// and from Redis 200 ms late, so acquiring and describing the holder ate 800 ms of a 1 s lease)
// is given back and the command is not run.
TEST(cli, exec_does_not_start_the_command_on_a_lease_without_enough_trust_left) {
  redis_server srv;
  dlock::test::tcp_proxy proxy{srv.port()};
  proxy.delay(dlock::test::direction::both, 200ms);
  const auto url = "redis://127.0.0.1:" + std::to_string(proxy.port()) + "?connect_timeout=10s";
  const auto name = dlock::test::unique_name("cli-no-trust");
  auto r = run_dlock({"--url", url, "exec", "--lease", "1s", name, "--", sh, "-c", "echo ran"});
  EXPECT_EQ(r.code, std::optional<int>{exit_software}) << describe(r);
  EXPECT_EQ(r.out, "") << "the command did not run";
  EXPECT_EQ(count_lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("not starting the command"), std::string::npos) << r.err;
  EXPECT_TRUE(dlock::test::wait_until([&] { return exists(srv, name) == ":0"; }, 3s));
  // The same delays with a lease that has room: it runs.
  r = run_dlock({"--url", url, "exec", "--lease", "5s", name, "--", sh, "-c", "echo ran"});
  EXPECT_EQ(r.code, std::optional<int>{0}) << describe(r);
  EXPECT_EQ(r.out, "ran\n");
}

TEST(cli, a_lost_lease_sigterms_then_sigkills_the_process_group_before_the_deadline) {
  redis_server srv;
  const auto name = dlock::test::unique_name("cli-kill-after");
  // watchdog 1500 ms: renewed every 500 ms, trusted for 1483 ms after each renewal was sent.
  dlock_process d{{"--url", with_query(srv, "watchdog=1500ms"), "exec", "--kill-after", "400ms",
                   name, "--", sh, "-c", stubborn_command(15)}};
  pid_t sleep_pid = -1;
  const pid_t group = read_stubborn_pids(d, sleep_pid);
  ASSERT_GT(group, 0) << d->diagnostics();
  EXPECT_EQ(process_group(sleep_pid), group);
  // Taken away with `dlock unlock --force`; the lease was trusted until 1483 ms from now at most.
  const auto taken_at = steady::now();
  const auto u = run_dlock({"--url", srv.url(), "unlock", "--force", name});
  EXPECT_EQ(u.code, std::optional<int>{0}) << describe(u);
  // Lost at the next renewal (<= 500 ms): SIGTERM at once; ignored; SIGKILL 400 ms later.
  EXPECT_EQ(d->read_line(5s), std::optional<std::string>{"got-TERM"}) << d->diagnostics();
  const auto termed_at = steady::now();
  EXPECT_LT(termed_at - taken_at, 700ms) << "SIGTERM as soon as the loss was seen";
  ASSERT_TRUE(dlock::test::wait_until([&] { return running_in_group(group).empty(); }, 5s))
      << d->diagnostics();
  const auto gone_at = steady::now();
  EXPECT_GE(gone_at - termed_at, 350ms) << "SIGKILL only --kill-after the SIGTERM";
  EXPECT_LT(gone_at - taken_at, 1483ms - 50ms) << "dead before the old lease's trust deadline";
  EXPECT_EQ(d->wait_exit(5s), std::optional<int>{exit_software}) << d->diagnostics();
  const auto err = d->read_stderr();
  EXPECT_EQ(dlock_lines(err), 1u) << err;
  EXPECT_NE(err.find("lease lost"), std::string::npos) << err;
  EXPECT_EQ(exists(srv, name), ":0");
}

}  // namespace
