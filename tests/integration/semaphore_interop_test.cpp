// dlock's semaphores and latch with processes that speak Redisson's RPermitExpirableSemaphore,
// RSemaphore and RCountDownLatch protocols (redisson_client.py --kind permits|semaphore|latch,
// no dlock code; checked by redisson_sync_check.py) on one name: at most N hold in a mixed
// fleet, each side's release wakes the other's waiter (Redisson's waiters wake only on a
// positive count, its latch waiters only on `0`), each side reclaims the other's expired permit.
#include <gtest/gtest.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <future>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "dlock/counting_semaphore.hpp"
#include "dlock/latch.hpp"
#include "dlock/leased_semaphore.hpp"
#include "support/child_process.hpp"
#include "support/redis_server.hpp"
#include "test_util.hpp"

#ifndef DLOCK_REDISSON_PY
#error "DLOCK_REDISSON_PY must name redisson_client.py"
#endif
#ifndef DLOCK_PYTHON3
#define DLOCK_PYTHON3 "/usr/bin/python3"
#endif

using namespace std::chrono_literals;

namespace semaphore_interop {

using dlock::test::child_process;
using dlock::test::redis_server;
using dlock::test::unique_name;

#ifdef DLOCK_TEST_SANITIZED
constexpr long long slack_ms = 2000;
#else
constexpr long long slack_ms = 1000;
#endif

std::int64_t mono_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

std::unique_ptr<child_process> redisson(const std::string& kind, std::vector<std::string> args) {
  std::vector<std::string> argv{DLOCK_PYTHON3, DLOCK_REDISSON_PY, "--kind", kind};
  argv.insert(argv.end(), args.begin(), args.end());
  return std::make_unique<child_process>(argv);
}

// Reads lines until one starts with `prefix`; nullopt if none within `limit`.
std::optional<std::string> line_starting(child_process& p, const std::string& prefix,
                                         std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    auto line = p.read_line(std::chrono::duration_cast<std::chrono::milliseconds>(
        end - std::chrono::steady_clock::now()));
    if (!line) return std::nullopt;
    if (line->rfind(prefix, 0) == 0) return line;
  }
  return std::nullopt;
}

// The most holds ("<start ns> <end ns>") that overlap at any instant.
std::size_t most_at_once(std::vector<std::pair<std::int64_t, std::int64_t>> holds) {
  std::vector<std::pair<std::int64_t, int>> edges;
  for (const auto& [from, to] : holds) {
    edges.emplace_back(from, 1);
    edges.emplace_back(to, -1);
  }
  std::sort(edges.begin(), edges.end());  // an end sorts before a start at the same ns
  std::size_t now = 0, most = 0;
  for (const auto& [at, step] : edges) {
    now = step > 0 ? now + 1 : now - 1;
    most = std::max(most, now);
  }
  return most;
}

TEST(semaphore_interop, a_mixed_fleet_never_holds_more_than_n_permits) {
  redis_server srv;
  const auto name = unique_name("mixed");
  dlock::client c{dlock::config::from_uri(srv.url())};
  dlock::leased_semaphore s{c, name};
  ASSERT_TRUE(s.try_set_permits(2));
  const auto log = srv.dir() + "/holds.log";
  std::vector<std::unique_ptr<child_process>> py;
  for (int i = 0; i < 3; ++i) {
    py.push_back(redisson("permits", {"--lease-ms", "10000", "--hold-ms", "5", "--duration-s", "4",
                                      "--log", log, "loop", srv.url(), name}));
  }
  for (auto& p : py) ASSERT_TRUE(line_starting(*p, "ready", 10s)) << p->diagnostics();
  for (auto& p : py) p->close_stdin();
  std::mutex mu;
  std::vector<std::pair<std::int64_t, std::int64_t>> holds;
  std::vector<std::future<void>> mine;
  for (int t = 0; t < 3; ++t) {
    mine.push_back(std::async(std::launch::async, [&] {
      const auto until = std::chrono::steady_clock::now() + 4s;
      while (std::chrono::steady_clock::now() < until) {
        auto p = s.try_acquire_for(2s);
        if (!p) continue;
        const auto from = mono_ns();
        std::this_thread::sleep_for(5ms);
        const auto to = mono_ns();
        p.release();
        std::lock_guard lock{mu};
        holds.emplace_back(from, to);
      }
    }));
  }
  for (auto& f : mine) f.get();
  std::size_t redisson_holds = 0;
  for (auto& p : py) {
    const auto count = line_starting(*p, "count ", 15s);
    ASSERT_TRUE(count) << p->diagnostics();
    redisson_holds += std::stoul(count->substr(6));
  }
  std::ifstream in{log};
  for (std::int64_t from = 0, to = 0; in >> from >> to;) holds.emplace_back(from, to);
  EXPECT_GT(redisson_holds, 10u) << "the Redisson processes got permits";
  EXPECT_GT(holds.size(), redisson_holds + 10) << "so did dlock";
  EXPECT_EQ(most_at_once(holds), 2u) << "never more than 2, and 2 at once";
  EXPECT_EQ(s.available(), 2);
  EXPECT_EQ(s.leased(), 0);
}

// Each side's release wakes the other side's waiter (Redisson's permits waiter wakes only on a
// positive count, and otherwise sleeps to the nearest deadline: 30 s for dlock's lease).
TEST(semaphore_interop, each_sides_release_wakes_the_others_waiter) {
  redis_server srv;
  const auto name = unique_name("wake");
  auto cfg = dlock::config::from_uri(srv.url());
  cfg.wait_recheck = 20s;
  dlock::client c{cfg};
  dlock::leased_semaphore s{c, name};
  s.try_set_permits(1);
  auto held = s.acquire();
  auto py = redisson("permits", {"--stamp", "acquire_wait", srv.url(), name});
  ASSERT_TRUE(line_starting(*py, "waiting", 10s)) << py->diagnostics();
  const auto released = mono_ns();
  held.release();
  auto got = line_starting(*py, "acquired ", 10s);
  ASSERT_TRUE(got) << py->diagnostics();
  const auto stamp = std::stoll(got->substr(got->rfind(' ') + 1));
  EXPECT_LT((stamp - released) / 1'000'000, slack_ms) << "woken by dlock's release";
  ASSERT_TRUE(line_starting(*py, "released 1", 5s)) << py->diagnostics();
  // Redisson holds; a dlock waiter wakes on its release, not on the 20 s re-check.
  auto holder = redisson("permits", {"hold", srv.url(), name});
  ASSERT_TRUE(line_starting(*holder, "acquired ", 10s)) << holder->diagnostics();
  auto waiter = std::async(std::launch::async, [&] {
    auto p = s.try_acquire_for(15s);
    return std::pair{p.count(), mono_ns()};
  });
  std::this_thread::sleep_for(300ms);
  const auto let_go = mono_ns();
  holder->close_stdin();
  const auto [count, at] = waiter.get();
  EXPECT_EQ(count, 1u);
  EXPECT_LT((at - let_go) / 1'000'000, slack_ms) << "woken by Redisson's release";
  EXPECT_TRUE(line_starting(*holder, "released 1", 5s)) << holder->diagnostics();
}

// A Redisson permit with a lease that its holder never releases comes back to dlock when the
// lease ends (Redisson's client-clock deadline, reclaimed by dlock's script by server time), and
// Redisson's late release answers 0 and adds nothing.
TEST(semaphore_interop, each_side_reclaims_the_others_expired_permit) {
  redis_server srv;
  const auto name = unique_name("reclaim");
  auto cfg = dlock::config::from_uri(srv.url());
  cfg.wait_recheck = 20s;
  dlock::client c{cfg};
  dlock::leased_semaphore s{c, name};
  s.try_set_permits(1);
  auto holder = redisson("permits", {"--lease-ms", "600", "hold", srv.url(), name});
  ASSERT_TRUE(line_starting(*holder, "acquired ", 10s)) << holder->diagnostics();
  const auto start = std::chrono::steady_clock::now();
  auto p = s.try_acquire_for(10s);
  ASSERT_TRUE(p);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 600ms + std::chrono::milliseconds{slack_ms})
      << "woken at the Redisson permit's deadline";
  holder->close_stdin();
  EXPECT_TRUE(line_starting(*holder, "released 0", 5s)) << holder->diagnostics();
  EXPECT_EQ(s.available(), 0) << "Redisson's late release added nothing";
  p.release();
  // dlock's expired permit, reclaimed by Redisson's acquire.
  auto stale = s.acquire(1, 400ms);
  auto py = redisson("permits", {"--stamp", "acquire_wait", srv.url(), name});
  ASSERT_TRUE(line_starting(*py, "acquired ", 10s)) << py->diagnostics();
  std::error_code ec;
  stale.release(ec);
  EXPECT_EQ(ec, dlock::errc::lease_lost);
  ASSERT_TRUE(line_starting(*py, "released 1", 5s)) << py->diagnostics();
  EXPECT_EQ(s.available(), 1);
}

TEST(semaphore_interop, counting_semaphores_wake_each_other) {
  redis_server srv;
  const auto name = unique_name("counting");
  auto cfg = dlock::config::from_uri(srv.url());
  cfg.wait_recheck = 20s;
  dlock::client c{cfg};
  dlock::counting_semaphore s{c, name};
  s.try_set_permits(1);
  ASSERT_TRUE(s.try_acquire());
  auto py = redisson("semaphore", {"--stamp", "acquire_wait", srv.url(), name});
  ASSERT_TRUE(line_starting(*py, "waiting", 10s)) << py->diagnostics();
  const auto released = mono_ns();
  s.release();
  auto got = line_starting(*py, "acquired ", 10s);
  ASSERT_TRUE(got) << py->diagnostics();
  EXPECT_LT((std::stoll(got->substr(got->rfind(' ') + 1)) - released) / 1'000'000, slack_ms);
  ASSERT_TRUE(line_starting(*py, "released 1", 5s));
  auto holder = redisson("semaphore", {"hold", srv.url(), name});
  ASSERT_TRUE(line_starting(*holder, "acquired ", 10s)) << holder->diagnostics();
  auto waiter = std::async(std::launch::async, [&] {
    const bool got_it = s.try_acquire_for(15s);
    return std::pair{got_it, mono_ns()};
  });
  std::this_thread::sleep_for(300ms);
  const auto let_go = mono_ns();
  holder->close_stdin();
  const auto [ok, at] = waiter.get();
  EXPECT_TRUE(ok);
  EXPECT_LT((at - let_go) / 1'000'000, slack_ms);
}

// Redisson's await() wakes only on `0`: dlock publishes it also past zero, and opens on
// Redisson's count-down.
TEST(semaphore_interop, latches_open_each_others_waiters) {
  redis_server srv;
  const auto name = unique_name("latch");
  auto cfg = dlock::config::from_uri(srv.url());
  cfg.wait_recheck = 20s;
  dlock::client c{cfg};
  dlock::latch l{c, name};
  ASSERT_TRUE(l.try_set_count(1));
  auto py = redisson("latch", {"await", srv.url(), name});
  ASSERT_TRUE(line_starting(*py, "waiting", 10s)) << py->diagnostics();
  l.count_down(3);  // past zero: Redisson's own count-down would publish nothing
  EXPECT_TRUE(line_starting(*py, "opened ", 5s)) << py->diagnostics();
  auto set = redisson("latch", {"latch_set", srv.url(), name, "2"});
  ASSERT_TRUE(line_starting(*set, "1", 10s)) << set->diagnostics();
  auto waiter = std::async(std::launch::async, [&] {
    const bool open = l.wait_for(15s);
    return std::pair{open, mono_ns()};
  });
  for (int i = 0; i < 2; ++i) {
    std::this_thread::sleep_for(200ms);
    auto down = redisson("latch", {"count_down", srv.url(), name});
    ASSERT_TRUE(line_starting(*down, "ok", 10s)) << down->diagnostics();
  }
  const auto opened = mono_ns();
  const auto [open, at] = waiter.get();
  EXPECT_TRUE(open);
  EXPECT_LT((at - opened) / 1'000'000, slack_ms) << "woken by Redisson's `0`";
}

}  // namespace semaphore_interop
