// The mixed fleet of fairness_test.cpp and fairness_cluster_test.cpp: dlock processes
// (dlock_lock_worker loop) and processes of Redisson's RLock protocol (redisson_client.py loop)
// on one lock name, each logging its holds ("<start ns> <end ns>", CLOCK_MONOTONIC, inside each
// hold), and the checks made on what they did: exclusion (sorted by start, no hold begins before
// the previous one ended), Redisson's channel carrying only `0`/`1`, and hand-overs from dlock to
// Redisson within a bound. See fairness_test.cpp for what dlock owes the Redisson processes.
#pragma once

#include <gtest/gtest.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "dlock/client.hpp"
#include "dlock/keys.hpp"
#include "dlock/mutex.hpp"
#include "runtime/client_access.hpp"
#include "runtime/client_impl.hpp"
#include "support/child_process.hpp"
#include "support/redis_server.hpp"
#include "test_util.hpp"
#include "transport/subscriber.hpp"

#ifndef DLOCK_LOCK_WORKER
#error "DLOCK_LOCK_WORKER must name the dlock_lock_worker executable"
#endif
#ifndef DLOCK_REDISSON_PY
#error "DLOCK_REDISSON_PY must name redisson_client.py"
#endif
#ifndef DLOCK_PYTHON3
#define DLOCK_PYTHON3 "/usr/bin/python3"
#endif

namespace dlock::test::fleet_test {

using namespace std::chrono_literals;
using dlock::test::child_process;
using std::chrono::milliseconds;

// The requirement: a Redisson waiter takes a lock left free to it within this long...
constexpr std::int64_t wake_bound_ms = 50;
// ...plus this much for a loaded test machine (2 shared cores): process wake-ups, Python.
constexpr std::int64_t wake_slack_ms = 100;

inline std::int64_t monotonic_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

inline std::vector<std::string> words(const std::string& line) {
  std::istringstream s{line};
  std::vector<std::string> out;
  for (std::string w; s >> w;) out.push_back(w);
  return out;
}

// A glob pattern matching exactly `s` (PSUBSCRIBE).
inline std::string glob_exact(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '*' || ch == '?' || ch == '[' || ch == ']' || ch == '\\') out += '\\';
    out += ch;
  }
  return out;
}

// Every message on Redisson's and dlock's channels of a name, watched by pattern.
class channel_watch {
 public:
  channel_watch(const dlock::test::redis_server& srv, const std::string& name)
      : c_{dlock::config::from_uri(srv.url())} {
    auto& sub = dlock::detail::client_access::impl(c_).subscriber();
    ids_[0] = sub.listen_pattern(glob_exact(dlock::keys::lock_channel(name)),
                                 [this](const auto& ev) { on(ev, redisson_); });
    ids_[1] = sub.listen_pattern(glob_exact(dlock::keys::dlock_channel(name)),
                                 [this](const auto& ev) { on(ev, dlock_); });
  }
  ~channel_watch() { stop(); }
  bool wait_confirmed(milliseconds limit) {
    return dlock::test::wait_until([&] { return confirmed_.load() == 2; }, limit);
  }
  void stop() {
    if (stopped_) return;
    stopped_ = true;
    auto& sub = dlock::detail::client_access::impl(c_).subscriber();
    for (auto id : ids_) sub.unlisten(id);
  }
  std::vector<std::string> redisson() const { return redisson_.items(); }
  std::vector<std::string> dlock() const { return dlock_.items(); }

 private:
  void on(const dlock::transport::pubsub_event& ev, dlock::test::recorder<std::string>& into) {
    using type = dlock::transport::pubsub_event::type;
    if (ev.what == type::subscribed) ++confirmed_;
    if (ev.what == type::message) into.push(std::string{ev.payload});
  }
  dlock::client c_;
  dlock::transport::listener_id ids_[2] = {};
  std::atomic<int> confirmed_{0};
  dlock::test::recorder<std::string> redisson_, dlock_;
  bool stopped_ = false;
};

struct member {
  std::string label;  // d0.. (dlock), r0.. (Redisson)
  bool redisson = false;
  std::unique_ptr<child_process> proc;
  std::string log;
  std::map<std::string, long long> stats;  // the "key value" lines it printed at the end
  long long count() const {
    auto it = stats.find("count");
    return it == stats.end() ? -1 : it->second;
  }
};

struct hold {
  std::int64_t start, end;
  std::size_t who;
};

struct fleet {
  std::vector<member> members;
  std::vector<hold> holds;  // sorted by start
  std::vector<std::string> redisson_messages, dlock_messages;
  long long total = 0, redisson_total = 0;
  double fair = 0;  // total / members

  bool redisson(const hold& h) const { return members[h.who].redisson; }
};

// Runs `dlocks` dlock processes and `redissons` Redisson processes on `name`, each holding the
// lock 1 ms per acquisition and pausing `pause_ms` after each unlock, for `seconds`.
// `url` is the lock server's (or cluster's); the channels are watched on `watched` when given
// (a single server: pattern subscriptions do not see a cluster's shard messages). `during` runs
// on its own thread while the fleet runs (a fault, say).
inline void run_fleet(fleet& f, const std::string& url, const dlock::test::redis_server* watched,
                      const std::string& name, int dlocks, int redissons, int pause_ms, int seconds,
                      const std::function<void()>& during = {}) {
  dlock::test::temp_dir dir;
  std::optional<channel_watch> watch;
  if (watched) {
    watch.emplace(*watched, name);
    ASSERT_TRUE(watch->wait_confirmed(10s)) << "the pattern subscriptions were confirmed";
  }
  const std::vector<std::string> common = {"loop",
                                           url,
                                           name,
                                           "--hold-ms",
                                           "1",
                                           "--pause-ms",
                                           std::to_string(pause_ms),
                                           "--duration-s",
                                           std::to_string(seconds)};
  for (int i = 0; i < dlocks + redissons; ++i) {
    member m;
    m.redisson = i >= dlocks;
    m.label = (m.redisson ? "r" : "d") + std::to_string(m.redisson ? i - dlocks : i);
    m.log = dir.path() + "/" + m.label + ".log";
    std::vector<std::string> argv;
    if (m.redisson) {
      argv = {DLOCK_PYTHON3, "-u", DLOCK_REDISSON_PY};
    } else {
      argv = {DLOCK_LOCK_WORKER};
    }
    argv.insert(argv.end(), common.begin(), common.end());
    argv.insert(argv.end(), {"--log", m.log});
    m.proc = std::make_unique<child_process>(std::move(argv));
    f.members.push_back(std::move(m));
  }
  // All connected before any starts: Python takes a while to start.
  for (auto& m : f.members) {
    ASSERT_EQ(m.proc->read_line(30s), std::optional<std::string>{"ready"})
        << m.label << ": " << m.proc->diagnostics();
  }
  for (auto& m : f.members) m.proc->close_stdin();
  std::jthread fault;
  if (during) fault = std::jthread{during};
  for (auto& m : f.members) {
    ASSERT_EQ(m.proc->wait_exit(std::chrono::seconds{seconds} + 60s), std::optional<int>{0})
        << m.label << ": " << m.proc->diagnostics();
    while (auto line = m.proc->read_line(5s)) {
      const auto w = words(*line);
      if (w.size() == 2) m.stats[w[0]] = std::stoll(w[1]);
    }
    ASSERT_GE(m.count(), 0) << m.label << " printed no count: " << m.proc->diagnostics();
    f.total += m.count();
    if (m.redisson) f.redisson_total += m.count();
    std::ifstream in{m.log};
    std::int64_t a = 0, b = 0;
    long long logged = 0;
    while (in >> a >> b) {
      f.holds.push_back({a, b, static_cast<std::size_t>(&m - f.members.data())});
      ++logged;
    }
    EXPECT_EQ(logged, m.count()) << m.label << " logged a hold per acquisition";
  }
  if (fault.joinable()) fault.join();
  if (watch) {
    std::this_thread::sleep_for(100ms);  // the last messages
    watch->stop();
    f.redisson_messages = watch->redisson();
    f.dlock_messages = watch->dlock();
  }
  f.fair = static_cast<double>(f.total) / static_cast<double>(f.members.size());
  std::sort(f.holds.begin(), f.holds.end(),
            [](const hold& x, const hold& y) { return x.start < y.start; });

  std::ostringstream report;
  report << "[          ] " << dlocks << " dlock + " << redissons << " Redisson processes, "
         << seconds << " s, pause " << pause_ms << " ms: " << f.total
         << " acquisitions, fair share " << static_cast<long long>(f.fair) << "\n";
  for (const auto& m : f.members) {
    report << "[          ]   " << m.label << " share " << static_cast<double>(m.count()) / f.fair;
    for (const auto& [k, v] : m.stats) report << ' ' << k << '=' << v;
    report << '\n';
  }
  std::cout << report.str() << std::flush;
}

// Exclusion: no hold begins before the one before it ended.
inline void expect_exclusion(const fleet& f) {
  std::size_t overlaps = 0;
  for (std::size_t i = 1; i < f.holds.size(); ++i) {
    if (f.holds[i].start < f.holds[i - 1].end) {
      if (++overlaps <= 3) {
        ADD_FAILURE() << f.members[f.holds[i].who].label << " took the lock at " << f.holds[i].start
                      << " ns while " << f.members[f.holds[i - 1].who].label << " held it until "
                      << f.holds[i - 1].end << " ns";
      }
    }
  }
  EXPECT_EQ(overlaps, 0u) << "holds that overlapped another";
}

// Redisson's channel carries `0` and `1` only (LockPubSub parses every message as a Long).
inline void expect_integer_messages(const fleet& f) {
  EXPECT_FALSE(f.redisson_messages.empty());
  std::size_t bad = 0;
  for (const auto& m : f.redisson_messages) {
    if (m != "0" && m != "1" && ++bad <= 3) ADD_FAILURE() << "message '" << m << "'";
  }
  EXPECT_EQ(bad, 0u) << "messages other than 0/1 on Redisson's channel";
  for (const auto& m : f.members) {
    if (m.redisson) {
      EXPECT_EQ(m.stats.at("bad_messages"), 0) << m.label;
    }
  }
}

// A dlock unlock followed by a Redisson hold: the lock was left free to the Redisson waiters
// (the dlock waiters were queued too: every process loops). The gap from the dlock hold's end
// to the Redisson hold's start bounds how long the freed lock waited for them.
inline void expect_yields_taken_quickly(const fleet& f) {
  std::int64_t worst = 0;
  std::size_t yields_taken = 0, late = 0;
  for (std::size_t i = 1; i < f.holds.size(); ++i) {
    const auto& before = f.holds[i - 1];
    const auto& after = f.holds[i];
    if (f.redisson(before) || !f.redisson(after)) continue;
    ++yields_taken;
    const auto gap_ms = (after.start - before.end) / 1'000'000;
    worst = std::max(worst, gap_ms);
    if (gap_ms > wake_bound_ms) ++late;
  }
  std::cout << "[          ] dlock -> Redisson hand-overs: " << yields_taken << ", slowest "
            << worst << " ms, over " << wake_bound_ms << " ms: " << late
            << "; `y` on dlock's channel: "
            << std::count(f.dlock_messages.begin(), f.dlock_messages.end(), "y") << "\n"
            << std::flush;
  EXPECT_LE(worst, wake_bound_ms + wake_slack_ms)
      << "a Redisson process took a lock a dlock unlock left to it only " << worst << " ms later";
}

// The requirement as stated, where RLock's own protocol allows it: every process pauses 5 ms
// between its acquisitions, so a Redisson process does not take the lock straight back after
// its own unlock.

}  // namespace dlock::test::fleet_test
