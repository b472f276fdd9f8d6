// Processes of the lock family on one name, for family_process_test.cpp and
// family_interop_test.cpp: dlock_lock_worker (lock_worker.cpp) and redisson_client.py, each a
// dlock::test::child_process, started one by one or as a looping fleet whose members log their
// holds ("<start ns> <end ns>", CLOCK_MONOTONIC, inside each hold), and the checks made on the
// merged logs: holds that overlap, by kind.
#pragma once

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
#include <stop_token>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "dlock/client.hpp"
#include "dlock/keys.hpp"
#include "support/child_process.hpp"
#include "support/redis_server.hpp"
#include "test_util.hpp"

#ifndef DLOCK_LOCK_WORKER
#error "DLOCK_LOCK_WORKER must name the dlock_lock_worker executable"
#endif
#ifndef DLOCK_REDISSON_PY
#error "DLOCK_REDISSON_PY must name redisson_client.py"
#endif
#ifndef DLOCK_PYTHON3
#define DLOCK_PYTHON3 "/usr/bin/python3"
#endif

namespace dlock::test::family_fleet {

using namespace std::chrono_literals;
using dlock::test::child_process;
using std::chrono::milliseconds;
using steady = std::chrono::steady_clock;

// Slack on every timed bound: process wake-ups and Python on 2 shared cores (twice that under
// the sanitizers, where the test process and the workers run instrumented).
#ifdef DLOCK_TEST_SANITIZED
constexpr long long slack_ms = 2000;
#else
constexpr long long slack_ms = 1000;
#endif

inline std::int64_t mono_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

inline long long ms_between(std::int64_t from_ns, std::int64_t to_ns) {
  return (to_ns - from_ns) / 1'000'000;
}

inline std::vector<std::string> split_words(const std::string& line) {
  std::istringstream s{line};
  std::vector<std::string> out;
  for (std::string w; s >> w;) out.push_back(w);
  return out;
}

// "acquired 17" (a dlock worker) -> 17; nullopt for anything else.
inline std::optional<std::uint64_t> worker_token(const std::optional<std::string>& line) {
  if (!line || line->rfind("acquired ", 0) != 0) return std::nullopt;
  return std::stoull(line->substr(9));
}

// dlock_lock_worker --kind <kind> <args...>
inline std::unique_ptr<child_process> dlock_worker(const std::string& kind,
                                                   std::vector<std::string> args) {
  args.insert(args.begin(), {DLOCK_LOCK_WORKER, "--kind", kind});
  return std::make_unique<child_process>(std::move(args));
}

// redisson_client.py --kind <kind> <args...> (options may come anywhere)
inline std::unique_ptr<child_process> redisson(const std::string& kind,
                                               std::vector<std::string> args) {
  args.insert(args.begin(), {DLOCK_PYTHON3, "-u", DLOCK_REDISSON_PY, "--kind", kind});
  return std::make_unique<child_process>(std::move(args));
}

struct member {
  std::string label;  // d0.. (dlock), r0.. (Redisson), with the kind: "d0:read"
  std::string kind;   // fair | read | write
  bool redisson = false;
  std::unique_ptr<child_process> proc;
  std::string log;
  std::string owner;                       // dlock members started with --owner
  std::map<std::string, long long> stats;  // the "key value" lines printed at the end
  long long count() const {
    auto it = stats.find("count");
    return it == stats.end() ? -1 : it->second;
  }
  bool writes() const { return kind != "read"; }  // excludes every other hold
};

struct hold {
  std::int64_t start, end;
  std::size_t who;
};

// A looping fleet on one name. add() each member, then run().
class fleet {
 public:
  explicit fleet(std::string url, std::string name)
      : url_{std::move(url)}, name_{std::move(name)} {}

  // A dlock_lock_worker loop (`url_query` appended to the URL, e.g. "?recheck=500ms") or a
  // redisson_client.py loop (`extra`: its options, e.g. {"--fair-wait-ms", "100"}).
  void add(bool is_redisson, const std::string& kind, long hold_ms, long pause_ms,
           const std::string& url_query = "", std::vector<std::string> extra = {}) {
    specs_.push_back({is_redisson, kind, hold_ms, pause_ms, url_query, std::move(extra)});
  }

  // Starts every member, waits until all are connected, lets them go together for `seconds`,
  // collects their stats and logs. `owners`: dlock members print their owner field first.
  void run(double seconds, bool owners = false) {
    int dlocks = 0, redissons = 0;
    for (const auto& s : specs_) {
      member m;
      m.kind = s.kind;
      m.redisson = s.redisson;
      m.label = (s.redisson ? "r" + std::to_string(redissons++) : "d" + std::to_string(dlocks++)) +
                ":" + s.kind;
      m.log = dir_.path() + "/" + std::to_string(members.size()) + ".log";
      std::vector<std::string> args = s.extra;
      args.insert(args.end(), {"loop", url_ + (s.redisson ? "" : s.query), name_, "--hold-ms",
                               std::to_string(s.hold_ms), "--pause-ms", std::to_string(s.pause_ms),
                               "--duration-s", std::to_string(seconds), "--log", m.log});
      if (owners && !s.redisson) args.push_back("--owner");
      m.proc =
          s.redisson ? redisson(s.kind, std::move(args)) : dlock_worker(s.kind, std::move(args));
      members.push_back(std::move(m));
    }
    for (auto& m : members) {
      if (owners && !m.redisson) {
        const auto line = m.proc->read_line(30s);
        ASSERT_TRUE(line && line->rfind("owner ", 0) == 0)
            << m.label << ": " << m.proc->diagnostics();
        m.owner = line->substr(6);
      }
      ASSERT_EQ(m.proc->read_line(30s), std::optional<std::string>{"ready"})
          << m.label << ": " << m.proc->diagnostics();
    }
    started_ns = mono_ns();
    for (auto& m : members) m.proc->close_stdin();
    const auto limit =
        std::chrono::duration_cast<milliseconds>(std::chrono::duration<double>{seconds}) + 30s;
    for (auto& m : members) {
      ASSERT_EQ(m.proc->wait_exit(limit), std::optional<int>{0})
          << m.label << ": " << m.proc->diagnostics();
      while (auto line = m.proc->read_line(5s)) {
        const auto w = split_words(*line);
        if (w.size() == 2) m.stats[w[0]] = std::stoll(w[1]);
      }
      ASSERT_GE(m.count(), 0) << m.label << " printed no count: " << m.proc->diagnostics();
      std::ifstream in{m.log};
      std::int64_t a = 0, b = 0;
      long long logged = 0;
      while (in >> a >> b) {
        holds.push_back({a, b, static_cast<std::size_t>(&m - members.data())});
        ++logged;
      }
      EXPECT_EQ(logged, m.count()) << m.label << " logged a hold per acquisition";
    }
    std::sort(holds.begin(), holds.end(),
              [](const hold& x, const hold& y) { return x.start < y.start; });
  }

  long long total() const {
    long long n = 0;
    for (const auto& m : members) n += m.count();
    return n;
  }

  // One line per member: its count and stats.
  void report(const std::string& what) const {
    std::ostringstream out;
    out << "[          ] " << what << ": " << total() << " acquisitions\n";
    for (const auto& m : members) {
      out << "[          ]   " << m.label;
      for (const auto& [k, v] : m.stats) out << ' ' << k << '=' << v;
      out << '\n';
    }
    std::cout << out.str() << std::flush;
  }

  std::vector<member> members;
  std::vector<hold> holds;  // sorted by start
  std::int64_t started_ns = 0;

 private:
  struct spec {
    bool redisson;
    std::string kind;
    long hold_ms, pause_ms;
    std::string query;
    std::vector<std::string> extra;
  };
  std::string url_, name_;
  std::vector<spec> specs_;
  dlock::test::temp_dir dir_;
};

// Pairs of holds that overlap in time, split by what they break: a pair with a writing member
// (fair, write) breaks exclusion; a pair of readers is what a read-write lock allows.
struct overlaps {
  std::size_t exclusive = 0;  // a writer's hold overlapped another hold
  std::size_t readers = 0;    // two readers' holds overlapped
  std::size_t cross = 0;      // ... of which a dlock reader with a Redisson reader
};

inline overlaps count_overlaps(const fleet& f) {
  overlaps o;
  for (std::size_t i = 0; i < f.holds.size(); ++i) {
    const auto& a = f.holds[i];
    for (std::size_t j = i + 1; j < f.holds.size() && f.holds[j].start < a.end; ++j) {
      const auto& b = f.holds[j];
      const auto& ma = f.members[a.who];
      const auto& mb = f.members[b.who];
      if (ma.writes() || mb.writes()) {
        if (++o.exclusive <= 3) {
          ADD_FAILURE() << mb.label << " held from " << b.start << " ns while " << ma.label
                        << " held from " << a.start << " to " << a.end << " ns";
        }
      } else {
        ++o.readers;
        if (ma.redisson != mb.redisson) ++o.cross;
      }
    }
  }
  return o;
}

// -- FIFO against the queue itself ----------------------------------------------------------------

// One atomic look at a fair lock: its queue (owners, head first) and its holder, with the
// monotonic times before the script was sent and after its answer.
struct queue_look {
  std::int64_t sent, answered;
  std::vector<std::string> queue, holders;
};

// Looks at redisson_lock_queue:{name} and the lock hash's fields in one script every 4 ms, on its
// own thread, from construction until stop().
class queue_sampler {
 public:
  queue_sampler(const std::string& url, const std::string& name)
      : c_{dlock::config::from_uri(url)}, thread_{[this, name](std::stop_token stop) {
          const auto strings = [](const dlock::reply& r) {
            std::vector<std::string> out;
            for (const auto& e : r.elements()) out.push_back(e.str());
            return out;
          };
          while (!stop.stop_requested()) {
            queue_look l;
            l.sent = mono_ns();
            const auto r = c_.execute({"EVAL",
                                       "return {redis.call('lrange', KEYS[1], 0, -1), "
                                       "redis.call('hkeys', KEYS[2])}",
                                       "2", dlock::keys::fair_queue(name), name});
            l.answered = mono_ns();
            l.queue = strings(r.elements()[0]);
            l.holders = strings(r.elements()[1]);
            looks_.push_back(std::move(l));
            std::this_thread::sleep_for(4ms);
          }
        }} {}
  std::vector<queue_look> stop() {
    thread_.request_stop();
    thread_.join();
    return std::move(looks_);
  }

 private:
  dlock::client c_;
  std::vector<queue_look> looks_;
  std::jthread thread_;
};

struct fifo_result {
  std::size_t checked = 0;     // looks with a queue
  std::size_t served = 0;      // queued acquisitions that came in queue order
  std::size_t violations = 0;  // looks after which someone else took the lock first
  std::size_t longest = 0;     // the longest queue seen
};

// Whoever is in the queue at a look is served next, in the queue's order, before anybody who
// was not (the holder's hold in progress aside). Only looks sent in [from_ns, until_ns] and
// answered within max_look_ns are used. The members' owner fields (fleet::run(s, true)) name
// them in the queue.
inline fifo_result check_fifo(const fleet& f, const std::vector<queue_look>& looks,
                              std::int64_t from_ns, std::int64_t until_ns,
                              std::int64_t max_look_ns) {
  fifo_result r;
  std::map<std::string, std::size_t> by_owner;
  for (std::size_t i = 0; i < f.members.size(); ++i) by_owner[f.members[i].owner] = i;
  for (const auto& l : looks) {
    if (l.queue.empty() || l.answered - l.sent >= max_look_ns || l.sent < from_ns ||
        l.sent > until_ns) {
      continue;
    }
    ++r.checked;
    r.longest = std::max(r.longest, l.queue.size());
    std::optional<std::size_t> holder;
    if (!l.holders.empty()) holder = by_owner.at(l.holders[0]);
    auto it = std::lower_bound(f.holds.begin(), f.holds.end(), l.sent,
                               [](const hold& h, std::int64_t t) { return h.start <= t; });
    // The holder's hold in progress may have been logged after `sent`: skip it, unless the
    // holder has a hold that covers `sent` (then that one is in progress, and a later hold of
    // the holder here would have overtaken the queue).
    if (holder && it != f.holds.end() && it->who == *holder) {
      const bool covered = std::any_of(
          f.holds.begin(), it, [&](const hold& h) { return h.who == *holder && h.end >= l.sent; });
      if (!covered) ++it;
    }
    for (const auto& owner : l.queue) {
      const auto want = by_owner.find(owner);
      if (want == by_owner.end()) {
        ADD_FAILURE() << "an unknown owner in the queue: " << owner;
        ++r.violations;
        break;
      }
      if (it == f.holds.end() || it->who != want->second) {
        if (++r.violations <= 3) {
          ADD_FAILURE() << "queue at " << l.sent << " ns had " << f.members[want->second].label
                        << " next, but "
                        << (it == f.holds.end() ? std::string{"nobody"} : f.members[it->who].label)
                        << " took the lock next";
        }
        break;
      }
      ++r.served;
      ++it;
    }
  }
  return r;
}

}  // namespace dlock::test::family_fleet
