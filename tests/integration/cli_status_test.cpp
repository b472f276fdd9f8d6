// The `dlock` command (tools/dlock) against real redis-server processes: `status` (text and
// --json) while a lock is free, held by a dlock exec with a waiter queued, held by a dlock::mutex
// and handed to a queued waiter; the wake-up of a waiting exec by `unlock --force`; `ping`.
// (Helpers: cli_helpers.hpp, cli_json.hpp.)
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <ctime>
#include <optional>
#include <regex>
#include <string>
#include <system_error>
#include <vector>

#include "cli_helpers.hpp"
#include "cli_json.hpp"
#include "dlock/error.hpp"
#include "dlock/keys.hpp"
#include "dlock/mutex.hpp"
#include "support/child_process.hpp"
#include "support/redis_server.hpp"
#include "test_util.hpp"

using namespace dlock::test;
using namespace dlock::test::cli;

namespace {

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "";
  return buf;
}

// "2026-11-21T11:20:00.847Z" -> milliseconds since the epoch; nullopt if not that form.
std::optional<std::int64_t> parse_iso_utc(const std::string& s) {
  static const std::regex form{R"(^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{3})Z$)"};
  std::smatch m;
  if (!std::regex_match(s, m, form)) return std::nullopt;
  std::tm tm{};
  tm.tm_year = std::stoi(m[1]) - 1900;
  tm.tm_mon = std::stoi(m[2]) - 1;
  tm.tm_mday = std::stoi(m[3]);
  tm.tm_hour = std::stoi(m[4]);
  tm.tm_min = std::stoi(m[5]);
  tm.tm_sec = std::stoi(m[6]);
  return static_cast<std::int64_t>(::timegm(&tm)) * 1000 + std::stoi(m[7]);
}

std::int64_t unix_ms_now() {
  return std::chrono::duration_cast<milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// -- status ---------------------------------------------------------------------------------------

TEST(cli, status_json_and_text_while_held_and_while_free) {
  redis_server srv;
  const auto name = dlock::test::unique_name("cli-status");
  const std::vector<std::string> top_keys = {
      "name", "held", "holders", "remaining_lease_ms", "fencing_counter", "queued", "subscribers"};

  // Never used.
  auto r = run_dlock({"--url", srv.url(), "status", "--json", name});
  EXPECT_EQ(r.code, std::optional<int>{1}) << describe(r);
  EXPECT_EQ(count_lines(r.out), 1u) << "one line";
  {
    const auto j = parse_json(r.out);
    EXPECT_EQ(j.keys(), top_keys);
    EXPECT_EQ(j.at("name").text, name);
    EXPECT_EQ(j.at("held").type, json::kind::boolean);
    EXPECT_FALSE(j.at("held").boolean);
    EXPECT_EQ(j.at("holders").type, json::kind::array);
    EXPECT_TRUE(j.at("holders").items.empty());
    EXPECT_EQ(j.at("remaining_lease_ms").integer(), 0);
    EXPECT_EQ(j.at("fencing_counter").integer(), 0);
    EXPECT_EQ(j.at("queued").integer(), 0);
    EXPECT_EQ(j.at("subscribers").integer(), 0);
  }

  // Held by a dlock exec, with one more waiting (queued by its attempt, then subscribed).
  const std::string cmd = "echo ready $DLOCK_FENCING_TOKEN; exec sleep 30";
  const auto before_ms = unix_ms_now();
  // -v: its progress on stderr, in the diagnostics should it not become ready.
  dlock_process holder{{"--url", srv.url(), "-v", "exec", name, "--", sh, "-c", cmd}};
  const auto ready = holder->read_line(10s);
  ASSERT_TRUE(ready && ready->rfind("ready ", 0) == 0) << holder->diagnostics();
  const auto token = ready->substr(6);
  dlock_process waiter{{"--url", srv.url(), "exec", name, "--", sh, "-c", "echo waiter-ran"}};
  const auto channel = dlock::keys::lock_channel(name);
  ASSERT_TRUE(dlock::test::wait_until([&] { return dlock::test::numsub(srv, channel) == 1; }, 10s))
      << waiter->diagnostics();

  r = run_dlock({"--url", srv.url(), "status", "--json", name});
  const auto after_ms = unix_ms_now();
  EXPECT_EQ(r.code, std::optional<int>{0}) << describe(r);
  EXPECT_EQ(count_lines(r.out), 1u) << "one line";
  EXPECT_EQ(r.out.back(), '\n');
  const auto fields = srv.command({"HGETALL", name});  // "[<owner>, 1]"
  ASSERT_TRUE(fields.size() > 5 && fields.substr(fields.size() - 4) == ", 1]") << fields;
  const auto owner = fields.substr(1, fields.size() - 5);
  {
    const auto j = parse_json(r.out);
    EXPECT_EQ(j.keys(), top_keys);
    EXPECT_EQ(j.at("name").text, name);
    EXPECT_TRUE(j.at("held").boolean);
    ASSERT_EQ(j.at("holders").items.size(), 1u) << r.out;
    const auto& h = j.at("holders").items[0];
    EXPECT_EQ(h.keys(), (std::vector<std::string>{"owner", "count", "host", "pid", "command",
                                                  "acquired_at"}));
    EXPECT_EQ(h.at("owner").text, owner);
    EXPECT_EQ(h.at("count").integer(), 1);
    EXPECT_EQ(h.at("host").text, host_name());
    EXPECT_EQ(h.at("pid").integer(), holder->pid()) << "the dlock process";
    EXPECT_EQ(h.at("command").text, std::string{sh} + " -c " + cmd);
    const auto acquired = parse_iso_utc(h.at("acquired_at").text);
    ASSERT_TRUE(acquired) << "ISO-8601 UTC with milliseconds: " << h.at("acquired_at").text;
    EXPECT_GE(*acquired, before_ms - 1000);
    EXPECT_LE(*acquired, after_ms + 1000);
    EXPECT_GT(j.at("remaining_lease_ms").integer(), 0);
    EXPECT_LE(j.at("remaining_lease_ms").integer(), 30000) << "the 30 s watchdog lease";
    EXPECT_EQ(j.at("fencing_counter").text, token) << "the holder's token";
    EXPECT_EQ(j.at("queued").integer(), 1) << "the waiting dlock";
    EXPECT_EQ(j.at("subscribers").integer(), 1) << "the waiting dlock";
  }
  r = run_dlock({"--url", srv.url(), "status", name});
  EXPECT_EQ(r.code, std::optional<int>{0}) << describe(r);
  EXPECT_EQ(r.out.rfind(name + ": held\n", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("holder " + owner + " (count 1)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("host " + host_name() + ", pid " + std::to_string(holder->pid())),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("fencing counter: " + token + "\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("dlock waiters queued: 1\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("waiting subscribers: 1\n"), std::string::npos) << r.out;

  // Released: the waiter runs (taking the next token) and exits.
  ::kill(holder->pid(), SIGTERM);
  EXPECT_EQ(holder->wait_exit(5s), std::optional<int>{128 + SIGTERM}) << holder->diagnostics();
  EXPECT_EQ(waiter->read_line(5s), std::optional<std::string>{"waiter-ran"})
      << waiter->diagnostics();
  EXPECT_EQ(waiter->wait_exit(5s), std::optional<int>{0}) << waiter->diagnostics();

  r = run_dlock({"--url", srv.url(), "status", "--json", name});
  EXPECT_EQ(r.code, std::optional<int>{1}) << describe(r);
  {
    const auto j = parse_json(r.out);
    EXPECT_EQ(j.keys(), top_keys);
    EXPECT_FALSE(j.at("held").boolean);
    EXPECT_TRUE(j.at("holders").items.empty());
    EXPECT_EQ(j.at("remaining_lease_ms").integer(), 0);
    EXPECT_GT(std::stoull(j.at("fencing_counter").text), std::stoull(token))
        << "the last token issued (the waiter's) stays";
    EXPECT_EQ(j.at("queued").integer(), 0) << "the waiter left the queue with the hold";
    EXPECT_EQ(j.at("subscribers").integer(), 0);
  }
  r = run_dlock({"--url", srv.url(), "status", name});
  EXPECT_EQ(r.code, std::optional<int>{1}) << describe(r);
  EXPECT_EQ(r.out.rfind(name + ": free\n", 0), 0u) << r.out;
  EXPECT_EQ(r.out.find("dlock waiters queued"), std::string::npos) << "none: " << r.out;

  // Held twice by a dlock::mutex, which does not describe itself: owner and count only.
  dlock::client c{dlock::test::config_for(srv)};
  dlock::mutex m{c, name};
  m.lock();
  m.lock();
  r = run_dlock({"--url", srv.url(), "status", "--json", name});
  EXPECT_EQ(r.code, std::optional<int>{0}) << describe(r);
  {
    const auto j = parse_json(r.out);
    EXPECT_EQ(j.keys(), top_keys);
    ASSERT_EQ(j.at("holders").items.size(), 1u) << r.out;
    const auto& h = j.at("holders").items[0];
    EXPECT_EQ(h.keys(), (std::vector<std::string>{"owner", "count"}));
    EXPECT_EQ(srv.command({"HGETALL", name}), "[" + h.at("owner").text + ", 2]");
    EXPECT_EQ(h.at("count").integer(), 2) << "reentrant holds";
  }
  m.unlock();
  m.unlock();

  // Handed to a queued waiter whose attempt has not come yet (as mutex_release.lua leaves it:
  // the waiter's owner field at 1, its record `g <token>`), with two more dlock waiters queued:
  // held by that owner, and the two counted.
  const auto queue = dlock::keys::waiter_queue(name);
  const auto records = dlock::keys::waiter_records(name);
  srv.command({"HSET", name, "0b9f4a2c-5d1e-4f3a-9c7b-2e8d6f1a3b5c:7", "1"});
  srv.command({"PEXPIRE", name, "60000"});
  srv.command({"HSET", records, "4294967297", "g 12"});
  srv.command({"ZADD", queue, "1700000000000001", "4294967298", "1700000000000002", "4294967299"});
  r = run_dlock({"--url", srv.url(), "status", "--json", name});
  EXPECT_EQ(r.code, std::optional<int>{0}) << describe(r);
  {
    const auto j = parse_json(r.out);
    EXPECT_EQ(j.keys(), top_keys);
    EXPECT_TRUE(j.at("held").boolean);
    ASSERT_EQ(j.at("holders").items.size(), 1u) << r.out;
    EXPECT_EQ(j.at("holders").items[0].at("owner").text, "0b9f4a2c-5d1e-4f3a-9c7b-2e8d6f1a3b5c:7");
    EXPECT_EQ(j.at("holders").items[0].at("count").integer(), 1);
    EXPECT_GT(j.at("remaining_lease_ms").integer(), 50000);
    EXPECT_EQ(j.at("queued").integer(), 2);
  }
  r = run_dlock({"--url", srv.url(), "status", name});
  EXPECT_EQ(r.code, std::optional<int>{0}) << describe(r);
  EXPECT_EQ(r.out.rfind(name + ": held\n", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("holder 0b9f4a2c-5d1e-4f3a-9c7b-2e8d6f1a3b5c:7 (count 1)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("dlock waiters queued: 2\n"), std::string::npos) << r.out;
  srv.command({"DEL", queue, records});
  srv.command({"DEL", name});
}

// -- unlock --force -------------------------------------------------------------------------------

TEST(cli, unlock_force_wakes_a_waiting_exec_at_once) {
  redis_server srv;
  const auto name = dlock::test::unique_name("cli-force");
  dlock::client c{dlock::test::config_for(srv)};  // watchdog lease 30 s, waiter recheck 3 s
  dlock::mutex m{c, name};
  m.lock();
  dlock_process waiter{
      {"--url", srv.url(), "exec", name, "--", sh, "-c", "echo acquired $(date +%s%N)"}};
  const auto channel = dlock::keys::lock_channel(name);
  ASSERT_TRUE(dlock::test::wait_until([&] { return dlock::test::numsub(srv, channel) == 1; }, 10s))
      << "the waiter subscribed; " << waiter->diagnostics();

  const auto wall_before = std::chrono::system_clock::now();
  const auto r = run_dlock({"--url", srv.url(), "unlock", "--force", name});
  const auto unlocked_at = steady::now();
  const auto wall_after = std::chrono::system_clock::now();
  EXPECT_EQ(r.code, std::optional<int>{0}) << "it was held: " << describe(r);
  const auto line = waiter->read_line(5s);
  const auto lag = ms_since(unlocked_at);
  ASSERT_TRUE(line && line->rfind("acquired ", 0) == 0) << waiter->diagnostics();
  // Woken by the unlock message: the lease had ~30 s left and the re-check is 3 s. Slop 200 ms
  // (dlock acquires, describes itself and starts the shell).
  EXPECT_LT(lag, 200ms) << "acquired " << lag.count() << " ms after unlock --force returned";
  const auto printed = std::chrono::system_clock::time_point{
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::nanoseconds{std::stoll(line->substr(9))})};
  EXPECT_GT(printed, wall_before) << "only after the force unlock";
  EXPECT_LT(printed, wall_after + 200ms);
  EXPECT_EQ(waiter->wait_exit(5s), std::optional<int>{0}) << waiter->diagnostics();

  const auto again = run_dlock({"--url", srv.url(), "unlock", "--force", name});
  EXPECT_EQ(again.code, std::optional<int>{1}) << "it was free: " << describe(again);

  // The hold this process had was taken away: its unlock says so and touches nothing.
  std::error_code ec;
  m.unlock(ec);
  EXPECT_EQ(ec, dlock::errc::lease_lost) << ec.message();
  EXPECT_EQ(exists(srv, name), ":0");
}

// -- ping -----------------------------------------------------------------------------------------

TEST(cli, ping_prints_version_and_role) {
  redis_server srv;
  child_process p{dlock_argv({"--url", srv.url(), "ping"})};
  const auto out = p.read_to_eof(10s);
  EXPECT_EQ(p.wait_exit(10s), std::optional<int>{0}) << p.diagnostics();
  EXPECT_TRUE(std::regex_search(out, std::regex{R"((^|\n)redis_version: \d+\.\d+\.\d+\n)"})) << out;
  EXPECT_NE(out.find("\nrole: master\n"), std::string::npos) << out;
  EXPECT_NE(out.find("\nmaxmemory-policy: noeviction\n"), std::string::npos) << out;
  EXPECT_EQ(p.read_stderr(), "") << "no warning for noeviction";
}

TEST(cli, ping_warns_about_a_policy_that_evicts_lock_keys) {
  redis_server srv{{.extra_args = {"--maxmemory-policy", "allkeys-lru"}}};
  child_process p{dlock_argv({"--url", srv.url(), "ping"})};
  const auto out = p.read_to_eof(10s);
  EXPECT_EQ(p.wait_exit(10s), std::optional<int>{0})
      << "a warning, not an error; " << p.diagnostics();
  EXPECT_NE(out.find("redis_version: "), std::string::npos) << out;
  EXPECT_NE(out.find("\nmaxmemory-policy: allkeys-lru\n"), std::string::npos) << out;
  const auto err = p.read_stderr();
  EXPECT_NE(err.find("warning"), std::string::npos) << err;
  EXPECT_NE(err.find("maxmemory-policy allkeys-lru"), std::string::npos) << err;
  EXPECT_NE(err.find("evict"), std::string::npos) << err;
}

}  // namespace
