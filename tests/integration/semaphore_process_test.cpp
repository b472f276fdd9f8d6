// dlock's semaphores and latch across processes (dlock_sync_worker, sync_worker.cpp) against a
// real redis-server:
// - 8 processes loop on a leased_semaphore of 3 permits: at most 3 sections run at once, seen
//   by a gauge on the server (INCR after acquiring, DECR before releasing) and by a sweep over
//   the sections' CLOCK_MONOTONIC times; and 3 do run at once (so the test can fail both ways);
// - a leased permit whose holder is SIGKILLed comes back when its lease ends: a waiter in
//   another process has it within watchdog lease + wait_recheck of the kill;
// - a counting_semaphore permit whose holder is SIGKILLed never comes back (the documented trap
//   that leased_semaphore fixes);
// - a latch opens for 2 waiting processes once 5 others have counted down, not before.
// Every wait is bounded.
#include <gtest/gtest.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "dlock/client.hpp"
#include "dlock/counting_semaphore.hpp"
#include "dlock/keys.hpp"
#include "dlock/latch.hpp"
#include "dlock/leased_semaphore.hpp"
#include "support/child_process.hpp"
#include "support/redis_server.hpp"
#include "test_util.hpp"

#ifndef DLOCK_SYNC_WORKER
#error "DLOCK_SYNC_WORKER must name the dlock_sync_worker executable"
#endif

namespace dlock::test::semaphore_process {

using namespace std::chrono_literals;
using std::chrono::milliseconds;
using steady = std::chrono::steady_clock;

// Slack on every timed bound: process wake-ups on 2 shared cores (twice that sanitized).
#ifdef DLOCK_TEST_SANITIZED
constexpr long long sem_slack_ms = 2000;
#else
constexpr long long sem_slack_ms = 1000;
#endif

std::unique_ptr<child_process> sync_worker(std::vector<std::string> args) {
  args.insert(args.begin(), DLOCK_SYNC_WORKER);
  return std::make_unique<child_process>(std::move(args));
}

// The "key value" lines a loop worker prints at the end.
std::map<std::string, long long> read_stats(child_process& p) {
  std::map<std::string, long long> stats;
  while (auto line = p.read_line(5s)) {
    std::istringstream s{*line};
    std::string key;
    long long value = 0;
    if (s >> key >> value) stats[key] = value;
  }
  return stats;
}

struct section_times {
  std::int64_t start, end;
};

// The most sections in progress at once: ends sort before starts at the same time.
std::size_t max_concurrent(const std::vector<section_times>& sections) {
  std::vector<std::pair<std::int64_t, int>> edges;
  for (const auto& s : sections) {
    edges.emplace_back(s.start, +1);
    edges.emplace_back(s.end, -1);
  }
  std::sort(edges.begin(), edges.end());
  long now = 0, most = 0;
  for (const auto& [t, d] : edges) most = std::max(most, now += d);
  return static_cast<std::size_t>(most);
}

// The milliseconds left on the one leased permit of `name`: its deadline in {name}:timeout
// against the server's TIME.
long long permit_ms_left(dlock::client& c, const std::string& name) {
  const auto members =
      c.execute({"ZRANGE", dlock::keys::permit_timeouts(name), "0", "-1", "WITHSCORES"});
  if (members.elements().size() != 2) return -1;
  const auto time = c.execute({"TIME"});
  const auto now_ms =
      std::stoll(time.elements()[0].str()) * 1000 + std::stoll(time.elements()[1].str()) / 1000;
  return std::stoll(members.elements()[1].str()) - now_ms;
}

TEST(semaphore_process, eight_processes_never_run_more_than_three_sections_at_once) {
  constexpr int processes = 8;
  constexpr long long permits = 3;
  redis_server srv;
  temp_dir dir;
  const auto name = unique_name("sem-fleet");
  const auto gauge = name + ":gauge";
  std::vector<std::unique_ptr<child_process>> workers;
  for (int i = 0; i < processes; ++i) {
    workers.push_back(sync_worker({"loop", srv.url(), name, "--permits", std::to_string(permits),
                                   "--hold-ms", "15", "--duration-s", "4", "--gauge", gauge,
                                   "--log", dir.path() + "/" + std::to_string(i) + ".log"}));
  }
  for (auto& w : workers) {
    ASSERT_EQ(w->read_line(30s), std::optional<std::string>{"ready"}) << w->diagnostics();
  }
  for (auto& w : workers) w->close_stdin();
  std::vector<section_times> sections;
  long long max_gauge = 0, total = 0, busy = 0;
  std::ostringstream per_process;
  for (int i = 0; i < processes; ++i) {
    auto& w = *workers[static_cast<std::size_t>(i)];
    ASSERT_EQ(w.wait_exit(40s), std::optional<int>{0}) << w.diagnostics();
    const auto stats = read_stats(w);
    ASSERT_TRUE(stats.contains("count") && stats.contains("max_gauge")) << w.diagnostics();
    max_gauge = std::max(max_gauge, stats.at("max_gauge"));
    total += stats.at("count");
    busy += stats.at("count") > 0;
    per_process << ' ' << stats.at("count");
    std::ifstream in{dir.path() + "/" + std::to_string(i) + ".log"};
    long long logged = 0;
    for (std::int64_t a = 0, b = 0; in >> a >> b; ++logged) sections.push_back({a, b});
    EXPECT_EQ(logged, stats.at("count")) << "worker " << i << " logged every section";
  }
  const auto most = max_concurrent(sections);
  std::cout << "[          ] 8 processes, 3 permits, hold 15 ms, 4 s: " << total
            << " sections (per process:" << per_process.str() << "); at most " << max_gauge
            << " at once by the gauge, " << most << " by the sweep\n";
  EXPECT_LE(max_gauge, permits) << "the gauge saw more sections than permits";
  EXPECT_LE(most, static_cast<std::size_t>(permits)) << "sections overlapped beyond 3";
  EXPECT_EQ(max_gauge, permits) << "3 sections did run at once";
  EXPECT_EQ(most, static_cast<std::size_t>(permits));
  EXPECT_GE(total, 150) << "a floor: 3 permits x 4 s / 15 ms is 800 at best";
  EXPECT_GE(busy, processes / 2) << "not fair, but not one process either";
  dlock::client c{dlock::config::from_uri(srv.url())};
  dlock::leased_semaphore s{c, name};
  EXPECT_EQ(s.available(), permits) << "every permit came back";
  EXPECT_EQ(s.leased(), 0);
  EXPECT_EQ(c.execute({"GET", gauge}).str(), "0");
}

// The holder's watchdog lease is 1 s and the waiter re-checks every 500 ms: the waiter has the
// permit when the dead holder's lease ends (it sleeps until the nearest permit deadline), within
// lease + re-check of the kill at most.
TEST(semaphore_process, leased_a_kill9_holder_s_permit_comes_back_within_lease_plus_recheck) {
  constexpr long long lease_ms = 1000, recheck_ms = 500;
  redis_server srv;
  const auto name = unique_name("sem-kill");
  const auto url = srv.url() + "?watchdog=1s&recheck=500ms";
  dlock::client c{dlock::config::from_uri(srv.url())};
  auto holder = sync_worker({"hold", url, name, "--permits", "1"});
  const auto first = holder->read_line(15s);
  ASSERT_TRUE(first && first->rfind("acquired ", 0) == 0) << holder->diagnostics();
  auto waiter = sync_worker({"hold", url, name, "--permits", "1"});
  ASSERT_TRUE(
      wait_until([&] { return numsub(srv, dlock::keys::semaphore_channel(name)) >= 1; }, 15s))
      << waiter->diagnostics();
  std::this_thread::sleep_for(1500ms);  // past the first lease: the watchdog renewed it
  EXPECT_EQ(waiter->read_line(0ms), std::nullopt) << "the live holder's permit is renewed";

  const auto killed_at = steady::now();
  holder->kill9();
  const auto left = permit_ms_left(c, name);  // nothing renews it from here on
  ASSERT_GT(left, 0);
  ASSERT_LE(left, lease_ms);
  const auto line = waiter->read_line(milliseconds{lease_ms + recheck_ms} + 10s);
  const auto took = dlock::test::since(killed_at).count();
  ASSERT_TRUE(line && line->rfind("acquired ", 0) == 0) << waiter->diagnostics();
  std::cout << "[          ] leased permit: " << left << " ms of lease left at the kill; the "
            << "waiter had it " << took << " ms after the kill (bound " << lease_ms << " + "
            << recheck_ms << " + slack " << sem_slack_ms << " ms)\n";
  EXPECT_NE(*line, *first) << "a new permit id";
  EXPECT_GE(took, left - 50) << "not before the dead holder's lease ended";
  EXPECT_LE(took, lease_ms + recheck_ms + sem_slack_ms);
  waiter->close_stdin();
  EXPECT_EQ(waiter->read_line(5s), std::optional<std::string>{"released"}) << waiter->diagnostics();
  EXPECT_EQ(waiter->wait_exit(5s), std::optional<int>{0});
  dlock::leased_semaphore s{c, name};
  EXPECT_EQ(s.available(), 1) << "the dead holder's permit counted back once";
  EXPECT_EQ(s.leased(), 0);
}

// The trap leased_semaphore fixes: a counting_semaphore (Redisson's RSemaphore) permit taken by
// a process that dies is gone for good. Nobody gets it within the leased case's bound.
TEST(semaphore_process, counting_a_kill9_holder_s_permit_never_comes_back) {
  constexpr long long lease_ms = 1000, recheck_ms = 500;
  redis_server srv;
  const auto name = unique_name("sem-leak");
  const auto url = srv.url() + "?watchdog=1s&recheck=500ms";
  auto holder = sync_worker({"hold", url, name, "--permits", "2", "--type", "counting"});
  ASSERT_EQ(holder->read_line(15s), std::optional<std::string>{"acquired"})
      << holder->diagnostics();
  dlock::client c{dlock::config::from_uri(url)};
  dlock::counting_semaphore s{c, name};
  EXPECT_EQ(s.available(), 1);
  holder->kill9();
  ASSERT_TRUE(s.try_acquire_for(1s)) << "the other permit";
  const auto asked = steady::now();
  EXPECT_FALSE(s.try_acquire_for(milliseconds{lease_ms + recheck_ms + sem_slack_ms}))
      << "the dead holder's permit is not reclaimed";
  std::cout << "[          ] counting_semaphore: the dead holder's permit still missing "
            << dlock::test::since(asked).count() << " ms after the kill; available "
            << s.available() << " of 2 with one live holder\n";
  EXPECT_EQ(s.available(), 0) << "leaked: the counter stays one lower";
  s.release();
  EXPECT_EQ(s.available(), 1) << "only a release by hand (anyone may) brings it back";
}

// Two processes wait on a latch of 5; five others count down one by one. The waiters stay
// closed through the first four and open at the fifth, woken by `0` (their re-check is 20 s).
TEST(semaphore_process, a_latch_opens_for_two_waiting_processes_when_five_have_counted_down) {
  redis_server srv;
  const auto name = unique_name("latch-fleet");
  dlock::client c{dlock::config::from_uri(srv.url())};
  dlock::latch l{c, name};
  ASSERT_TRUE(l.try_set_count(5));
  std::vector<std::unique_ptr<child_process>> waiters;
  for (int i = 0; i < 2; ++i) {
    waiters.push_back(
        sync_worker({"wait", srv.url() + "?recheck=20s", name, "--timeout-ms", "15000"}));
    ASSERT_EQ(waiters.back()->read_line(15s), std::optional<std::string>{"waiting"})
        << waiters.back()->diagnostics();
  }
  ASSERT_TRUE(wait_until([&] { return numsub(srv, dlock::keys::latch_channel(name)) >= 2; }, 10s));
  steady::time_point last_at{};
  for (int i = 0; i < 5; ++i) {
    auto counter = sync_worker({"count-down", srv.url(), name});
    ASSERT_EQ(counter->read_line(15s), std::optional<std::string>{"counted"})
        << counter->diagnostics();
    if (i == 4) last_at = steady::now();
    EXPECT_EQ(counter->wait_exit(5s), std::optional<int>{0});
    if (i < 4) {
      EXPECT_EQ(l.count(), 4 - i);
      for (auto& w : waiters) EXPECT_EQ(w->read_line(0ms), std::nullopt) << "closed at " << i;
    }
  }
  for (auto& w : waiters) {
    EXPECT_EQ(w->read_line(10s), std::optional<std::string>{"open"}) << w->diagnostics();
    EXPECT_EQ(w->wait_exit(5s), std::optional<int>{0});
  }
  const auto took = dlock::test::since(last_at).count();
  std::cout << "[          ] latch: both waiters open within " << took
            << " ms of the fifth count-down\n";
  EXPECT_LT(took, sem_slack_ms) << "woken by `0`, not by a re-check";
  EXPECT_EQ(l.count(), 0);
  EXPECT_EQ(c.execute({"EXISTS", name}).integer(), 0) << "deleted at zero";
}

}  // namespace dlock::test::semaphore_process
