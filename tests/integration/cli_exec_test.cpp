// The `dlock` command (tools/dlock) against real redis-server processes: what `dlock exec` gives
// its command (the lock name and its fencing token in the environment), the signals it forwards
// (and one that ends its wait), and the mutual exclusion of concurrent `dlock exec` on one name.
// (Helpers: cli_helpers.hpp.)
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
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

// -- the command's environment --------------------------------------------------------------------

TEST(cli, the_command_sees_the_lock_name_and_its_fencing_token) {
  redis_server srv;
  const auto name = dlock::test::unique_name("cli env {x}");  // a space and a hash tag
  EXPECT_EQ(dlock::keys::fencing_counter(name), "redisson_lock_token:" + name)
      << "hash-tagged names are not braced again (RFencedLock's counter)";
  const auto counter = dlock::keys::slot_fencing_counter_of(name);
  // Tokens continue from whatever was issued before, even far ahead of the clock.
  EXPECT_EQ(srv.command({"SET", counter, "8000000000000041"}), "+OK");
  std::uint64_t last = 8000000000000041;
  // dlock's own environment reaches the command, except the two it sets: those are replaced.
  ::setenv("DLOCK_NAME", "stale", 1);
  ::setenv("DLOCK_TEST_INHERITED", "kept", 1);
  for (int i = 0; i < 3; ++i) {
    const auto r = run_dlock(
        {"--url", srv.url(), "exec", name, "--", sh, "-c",
         R"(printf '%s|%s|%s\n' "$DLOCK_TEST_INHERITED" "$DLOCK_NAME" "$DLOCK_FENCING_TOKEN")"});
    ASSERT_EQ(r.code, std::optional<int>{0}) << describe(r);
    const auto first = r.out.find('|');
    const auto bar = r.out.rfind('|');
    ASSERT_NE(bar, std::string::npos) << r.out;
    ASSERT_NE(first, bar) << r.out;
    EXPECT_EQ(r.out.substr(0, first), "kept");
    EXPECT_EQ(r.out.substr(first + 1, bar - first - 1), name);
    const auto token = std::stoull(r.out.substr(bar + 1));
    EXPECT_GT(token, last) << "strictly increasing";
    EXPECT_EQ(srv.command({"GET", counter}), std::to_string(token)) << "the token is the counter";
    last = token;
  }
  EXPECT_EQ(last, 8000000000000044u) << "counter + 1 each time, while it is ahead of the clock";
  {
    // Replaced, not added beside the inherited one (a shell reads the last of two; others the
    // first).
    const auto r = run_dlock({"--url", srv.url(), "exec", name, "--", "env"});
    ASSERT_EQ(r.code, std::optional<int>{0}) << describe(r);
    std::size_t names = 0;
    for (auto at = r.out.find("DLOCK_NAME="); at != std::string::npos;
         at = r.out.find("DLOCK_NAME=", at + 1))
      ++names;
    EXPECT_EQ(names, 1u) << r.out;
    EXPECT_EQ(r.out.find("DLOCK_NAME=stale"), std::string::npos) << r.out;
  }
  ::unsetenv("DLOCK_NAME");
  ::unsetenv("DLOCK_TEST_INHERITED");
  EXPECT_EQ(exists(srv, name), ":0");
}

// -- signals --------------------------------------------------------------------------------------

TEST(cli, sigterm_sigint_and_sighup_are_forwarded_and_the_lock_is_released) {
  redis_server srv;
  const std::vector<std::pair<int, std::string>> signals = {
      {SIGTERM, "TERM"}, {SIGINT, "INT"}, {SIGHUP, "HUP"}};
  for (const auto& [sig, sig_name] : signals) {
    const auto name = dlock::test::unique_name("cli-forward");
    dlock_process d{{"--url", srv.url(), "exec", name, "--", sh, "-c", script(traps, 30)}};
    ASSERT_EQ(d->read_line(10s), std::optional<std::string>{"ready"}) << d->diagnostics();
    EXPECT_EQ(exists(srv, name), ":1");
    ::kill(d->pid(), sig);
    EXPECT_EQ(d->read_line(5s), std::optional<std::string>{"got-" + sig_name}) << d->diagnostics();
    EXPECT_EQ(d->wait_exit(5s), std::optional<int>{7})
        << sig_name << ": the command's code; " << d->diagnostics();
    EXPECT_EQ(exists(srv, name), ":0") << "released once the command exited (" << sig_name << ")";
    EXPECT_EQ(exists(srv, dlock::keys::holder_info(name)), ":0") << "description removed";
    EXPECT_EQ(d->read_stderr(), "");
  }
}

TEST(cli, a_signal_while_waiting_ends_the_wait) {
  redis_server srv;
  const auto name = dlock::test::unique_name("cli-wait-signal");
  dlock::client c{dlock::test::config_for(srv)};
  dlock::mutex m{c, name};
  m.lock();
  dlock_process d{{"--url", srv.url(), "exec", name, "--", sh, "-c", "echo ran"}};
  const auto channel = dlock::keys::lock_channel(name);
  ASSERT_TRUE(dlock::test::wait_until([&] { return dlock::test::numsub(srv, channel) == 1; }, 10s))
      << "dlock waits, subscribed; " << d->diagnostics();
  ::kill(d->pid(), SIGTERM);
  EXPECT_EQ(d->wait_exit(5s), std::optional<int>{128 + SIGTERM}) << d->diagnostics();
  EXPECT_EQ(d->read_to_eof(1s), "") << "the command never ran";
  EXPECT_TRUE(m.is_held_by_current_thread()) << "the hold in this process is untouched";
  EXPECT_TRUE(dlock::test::wait_until([&] { return dlock::test::numsub(srv, channel) == 0; }, 5s));
  m.unlock();
}

// -- mutual exclusion -----------------------------------------------------------------------------

TEST(cli, concurrent_execs_on_one_name_never_overlap) {
  constexpr int loops = 3, runs = 10;
  redis_server srv;
  dlock::test::temp_dir dir;
  const auto name = dlock::test::unique_name("cli-overlap");
  const auto file = dir.path() + "/sections";
  // Each section appends "start <token> <ns>" and "end <token> <ns>" (wall clock, one host).
  const auto section = "echo start $DLOCK_FENCING_TOKEN $(date +%s%N) >> " + file +
                       "; sleep 0.05; echo end $DLOCK_FENCING_TOKEN $(date +%s%N) >> " + file;
  std::string loop = "for i in";
  for (int i = 1; i <= runs; ++i) loop += " " + std::to_string(i);
  loop += R"(; do "$0" --url "$1" exec "$2" -- /bin/sh -c "$3" || exit $?; done)";
  const auto started = steady::now();
  std::vector<std::unique_ptr<child_process>> shells;
  for (int i = 0; i < loops; ++i) {
    shells.push_back(std::make_unique<child_process>(
        std::vector<std::string>{sh, "-c", loop, DLOCK_CLI, srv.url(), name, section}));
  }
  for (auto& s : shells) {
    EXPECT_EQ(s->wait_exit(std::max(0ms, 40s - ms_since(started))), std::optional<int>{0})
        << s->diagnostics();
  }

  struct interval {
    std::int64_t start = -1, end = -1;
  };
  std::map<std::uint64_t, interval> by_token;
  std::ifstream in{file};
  std::string what;
  std::uint64_t token = 0;
  std::int64_t ns = 0;
  while (in >> what >> token >> ns) {
    auto& iv = by_token[token];
    (what == "start" ? iv.start : iv.end) = ns;
  }
  ASSERT_EQ(by_token.size(), std::size_t{loops * runs}) << "one token per section";
  std::vector<std::pair<interval, std::uint64_t>> sections;
  for (const auto& [t, iv] : by_token) {
    ASSERT_GE(iv.start, 0) << "token " << t;
    ASSERT_GT(iv.end, iv.start) << "token " << t;
    sections.emplace_back(iv, t);
  }
  std::sort(sections.begin(), sections.end(),
            [](const auto& a, const auto& b) { return a.first.start < b.first.start; });
  for (std::size_t i = 1; i < sections.size(); ++i) {
    EXPECT_LE(sections[i - 1].first.end, sections[i].first.start)
        << "sections with tokens " << sections[i - 1].second << " and " << sections[i].second
        << " overlap";
    EXPECT_LT(sections[i - 1].second, sections[i].second) << "tokens increase in lock order";
  }
  EXPECT_EQ(srv.command({"GET", dlock::keys::slot_fencing_counter_of(name)}),
            std::to_string(sections.back().second))
      << "the last token issued";
  EXPECT_EQ(exists(srv, name), ":0");
}

}  // namespace
