// The fault lab's test fixture: a lock server and a resource server (real redis-server
// processes), a directory of histories, dlock_fault_worker processes (fault_worker.cpp) and the
// test's own history of the faults it injects. finish() checks the merged histories
// (checker.hpp); a failing test prints the report and every event.
//
// Every wait is bounded; measurements go through measured() (measured.hpp) for docs/safety.md.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "checker.hpp"
#include "dlock/keys.hpp"
#include "history.hpp"
#include "integration/test_util.hpp"
#include "measured.hpp"
#include "resource.hpp"
#include "support/child_process.hpp"
#include "support/redis_server.hpp"

#ifndef DLOCK_FAULT_WORKER
#error "DLOCK_FAULT_WORKER must name the dlock_fault_worker executable"
#endif
#ifndef DLOCK_FAULT_CHECKER
#error "DLOCK_FAULT_CHECKER must name the dlock_fault_checker executable"
#endif

namespace dlock::faults::test {

using namespace std::chrono_literals;
using std::chrono::milliseconds;

using dlock::faults::report;
using dlock::test::child_process;

inline constexpr std::int64_t ns_per_ms = 1'000'000;

inline double to_ms(std::int64_t ns) { return static_cast<double>(ns) / 1e6; }

// `ns` in milliseconds with one decimal, for measured() lines.
inline std::string ms_text(std::int64_t ns) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", to_ms(ns));
  return text;
}

class fault_lab : public ::testing::Test {
 protected:
  void TearDown() override {
    if (HasFailure()) dump();
  }

  // The lock server's URL with quick reconnects and `params` ("watchdog=1000ms&...").
  std::string lock_url(const std::string& params) const {
    return lock_srv_.url() + "?reconnect_min=10ms&reconnect_max=100ms" +
           (params.empty() ? "" : "&" + params);
  }

  // Starts a worker `id` on lock URL `url` with `args` (--count, --hold, ...).
  child_process& spawn(const std::string& id, const std::string& url,
                       std::vector<std::string> args) {
    std::vector<std::string> argv{DLOCK_FAULT_WORKER,
                                  "--lock-url",
                                  url,
                                  "--resource-url",
                                  resource_srv_.url(),
                                  "--name",
                                  name_,
                                  "--id",
                                  id,
                                  "--history",
                                  dir_.path() + "/" + id + ".jsonl"};
    argv.insert(argv.end(), args.begin(), args.end());
    workers_.push_back(std::make_unique<child_process>(std::move(argv)));
    return *workers_.back();
  }

  // Reads `p`'s stdout until a line starting with `prefix`; returns the rest of it.
  static std::optional<std::string> wait_line(child_process& p, const std::string& prefix,
                                              milliseconds limit) {
    const auto until = std::chrono::steady_clock::now() + limit;
    for (;;) {
      const auto left =
          std::chrono::duration_cast<milliseconds>(until - std::chrono::steady_clock::now());
      if (left <= 0ms) return std::nullopt;
      const auto line = p.read_line(left);
      if (!line) return std::nullopt;
      if (line->rfind(prefix, 0) == 0) return line->substr(prefix.size());
    }
  }

  // Waits until `n` clients are subscribed to the lock's channel (waiters are waiting).
  bool waiters_subscribed(long n) {
    const auto channel = dlock::keys::lock_channel(name_);
    return dlock::test::wait_until([&] { return dlock::test::numsub(lock_srv_, channel) >= n; },
                                   10s);
  }

  std::int64_t fault(const std::string& what) {
    return history_.record({.kind = "fault", .detail = what});
  }

  void wait_all_exit(milliseconds limit) {
    const auto until = std::chrono::steady_clock::now() + limit;
    for (auto& w : workers_) {
      if (w->pid() < 0) continue;  // killed, or its exit already checked
      const auto left = std::max(
          0ms, std::chrono::duration_cast<milliseconds>(until - std::chrono::steady_clock::now()));
      EXPECT_EQ(w->wait_exit(left), std::optional<int>{0}) << w->diagnostics();
    }
  }

  // Records the resource's final values and checks the merged histories (with `opts`: FIFO).
  report finish(const dlock::faults::check_options& opts = {}) {
    auto value = [&](const std::string& key) -> std::int64_t {
      const auto v = resource_srv_.command({"GET", key});
      return v == "$-1" ? 0 : std::stoll(v);
    };
    history_.record({.kind = "final",
                     .value = value(dlock::faults::resource::fenced_key(name_)),
                     .prev = value(dlock::faults::resource::plain_key(name_))});
    std::size_t bad = 0;
    events_ = dlock::faults::read_histories(dir_.path(), &bad);
    EXPECT_EQ(bad, 0u) << "malformed history lines";
    auto r = dlock::faults::check(events_, opts);
    report_json_ = dlock::faults::to_json(r);
    return r;
  }

  // The fenced-safety expectations every dlock scenario shares.
  void expect_fenced_safety(const report& r) {
    EXPECT_EQ(r.fenced_lost_updates, 0u) << report_json_;
    EXPECT_TRUE(r.final_fenced_consistent()) << report_json_;
    EXPECT_EQ(r.stale_accesses, 0u) << report_json_;
    EXPECT_EQ(r.accesses_after_lost, 0u) << report_json_;
    EXPECT_EQ(r.accesses_outside, 0u) << report_json_;
    EXPECT_EQ(r.unfenced_lost_updates, 0u) << report_json_;
  }

  // The first event of `kind` by `proc` at or after `t`.
  const dlock::faults::event* first_event(const std::string& kind, const std::string& proc,
                                          std::int64_t t = 0) const {
    for (const auto& e : events_) {
      if (e.kind == kind && e.proc == proc && e.t >= t) return &e;
    }
    return nullptr;
  }

  void dump() const {
    std::cout << "report: " << report_json_ << "\nhistory (" << events_.size() << " events):\n";
    const std::int64_t origin = events_.empty() ? 0 : events_.front().t;
    std::size_t shown = 0;
    for (const auto& e : events_) {
      if (++shown > 400) break;
      auto copy = e;
      copy.t = (e.t - origin) / 1000;  // µs from the first event
      std::cout << "  " << dlock::faults::to_json(copy) << '\n';
    }
    for (const auto& w : workers_) std::cout << "worker stderr: " << w->read_stderr() << '\n';
  }

  // Three workers of 40 short sections each (fixed seeds) while `chaos(i)` runs every `every`
  // (at most 400 times) until they are done; returns the checked report.
  report run_under_chaos(milliseconds every, const std::function<void(int)>& chaos) {
    const auto url = lock_url("watchdog=2000ms");
    for (int i = 0; i < 3; ++i) {
      spawn("w" + std::to_string(i), url,
            {"--count", "40", "--hold", "20", "--jitter", "30", "--wait", "20000", "--seed",
             std::to_string(11 + i)});
    }
    for (int i = 0; i < 400; ++i) {
      bool running = false;
      for (auto& w : workers_) running |= !w->wait_exit(0ms).has_value();
      if (!running) break;
      chaos(i);
      std::this_thread::sleep_for(every);
    }
    wait_all_exit(60s);
    return finish();
  }

  dlock::test::redis_server lock_srv_;
  dlock::test::redis_server resource_srv_;
  dlock::test::temp_dir dir_{"dlock-faults-"};
  std::string name_ = dlock::test::unique_name("faults");
  dlock::faults::history_writer history_{dir_.path() + "/test.jsonl", "test"};
  std::vector<std::unique_ptr<child_process>> workers_;
  std::vector<dlock::faults::event> events_;
  std::string report_json_;
};

}  // namespace dlock::faults::test
