// The fault lab on a real Redis Sentinel deployment (support/redis_sentinel.hpp: master + 2
// replicas + 3 sentinels, down-after 1000 ms, failover-timeout 3000 ms): the workers of
// fault_lab.hpp take the lock through the group's `redis+sentinel://` URL (the resource stays on
// its own server), and a probe in the test's process (probe_client.hpp) locks another name
// through the faults, so that the test can read what its client sent to which node and when it
// learnt of a demotion.
//
// Each test starts its own group (start_group): a sentinel that led a failover waits
// 2 × failover-timeout before leading another, so groups are not shared between failovers.
// fault_lab's single lock server is started but not used here.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "dlock/keys.hpp"
#include "fault_lab.hpp"
#include "probe_client.hpp"
#include "support/redis_sentinel.hpp"

namespace dlock::faults::test {

class sentinel_fault_lab : public fault_lab {
 protected:
  // The recovery bound: down-after 1000 ms + failover (~1.3 s) + the client following,
  // with room for a loaded 2-core machine. Not a speed assertion.
  static constexpr std::chrono::seconds recovery_bound{6};
  static constexpr std::int64_t bound_ns = 6'000'000'000;
  // The workers' lease and renewals: short, so that holds end within the bound.
  static constexpr const char* short_lease = "watchdog=1500ms";

  void start_group(dlock::test::sentinel_group_options opts = {}) {
    group_ = std::make_unique<dlock::test::sentinel_group>(std::move(opts));
  }
  dlock::test::sentinel_group& group() { return *group_; }

  // The group's URL with quick reconnects and `params`.
  std::string url(const std::string& params = "") const {
    return group_->url("reconnect_min=10ms&reconnect_max=200ms" +
                       (params.empty() ? "" : "&" + params));
  }

  // Workers w0..w<n-1>: sections of 100-200 ms, each waiting up to 20 s for the lock, until
  // stop_workers() (their stdin's EOF): with three, the lock is held and waited on throughout.
  void spawn_workers(int n, const std::string& params = short_lease) {
    for (int i = 0; i < n; ++i) {
      spawn("w" + std::to_string(i), url(params),
            {"--count", "100000", "--hold", "100", "--jitter", "100", "--wait", "20000", "--seed",
             std::to_string(31 + i)});
    }
  }
  void stop_workers() {
    for (auto& w : workers_) {
      if (w->pid() > 0) w->close_stdin();
    }
    wait_all_exit(40s);
  }

  // Until the lock is held (an enter) and `n` clients wait on its channel at the master.
  void wait_held_and_waited(long n) {
    ASSERT_TRUE(wait_event("enter", 0, 10s)) << "nobody took the lock";
    const auto channel = dlock::keys::lock_channel(name_);
    const bool waiting = dlock::test::wait_until(
        [&] {
          try {
            return dlock::test::numsub(group_->master(), channel) >= n;
          } catch (const std::exception&) {
            return false;
          }
        },
        10s);
    ASSERT_TRUE(waiting) << "the workers never waited on the lock's channel";
  }

  // The time of the `n`th `kind` event after `t` in the histories written so far (by any
  // worker but `except`), waiting up to `limit`.
  std::optional<std::int64_t> wait_event(const std::string& kind, std::int64_t t,
                                         milliseconds limit, const std::string& except = "",
                                         std::size_t n = 1) {
    const auto until = std::chrono::steady_clock::now() + limit;
    for (;;) {
      std::size_t seen = 0;
      for (const auto& e : dlock::faults::read_histories(dir_.path())) {
        if (e.kind != kind || e.t <= t || e.proc == except || e.proc == "test") continue;
        if (++seen == n) return e.t;
      }
      if (std::chrono::steady_clock::now() >= until) return std::nullopt;
      std::this_thread::sleep_for(20ms);
    }
  }

  // Waits for the sentinels' new master (10 s at most) and records it; returns its time.
  std::int64_t wait_failover(std::uint16_t old_port, std::int64_t fault_at,
                             const std::string& what) {
    const auto now = group_->wait_new_master(old_port, 10s);
    const auto at = fault("new master " + std::to_string(now) + " (ROLE master)");
    measured(what + ": the sentinels named a new master " + ms_text(at - fault_at) + " ms after");
    return at;
  }

  // Recovery: the next enter by any worker after `fault_at`, within the bound.
  void expect_recovered(const report& r, std::int64_t fault_at, const std::string& what) {
    const auto* next = first_enter_after(r, fault_at);
    ASSERT_NE(next, nullptr) << "no section after " << what << '\n' << report_json_;
    const auto took = next->enter - fault_at;
    EXPECT_LE(took, bound_ns) << report_json_;
    measured(what + ": next holder entered " + ms_text(took) + " ms later (bound " +
             ms_text(bound_ns) + " ms)");
  }

  // Every hold that may have lived on the old master only — open at some time between the
  // fault and the new master — ended (its `lost`, a failed check, or its exit) within the
  // bound, or was released later with success, i.e. on the new master, which had it.
  void expect_old_holds_settled(const report& r, std::int64_t fault_at, std::int64_t new_master,
                                const std::string& what) {
    std::size_t lost = 0, ended = 0, kept = 0;
    std::int64_t latest_lost = 0;
    for (const auto& s : r.sections) {
      if (s.enter >= new_master || s.end <= fault_at) continue;
      if (s.end - fault_at > bound_ns && released(s)) {
        ++kept;
        continue;
      }
      EXPECT_NE(s.how, section::ending::cut) << s.proc << " never ended its hold\n" << report_json_;
      EXPECT_LE(s.end - fault_at, bound_ns)
          << s.proc << " (token " << s.token << ") trusted a hold past the bound\n"
          << report_json_;
      if (s.how == section::ending::lost) {
        ++lost;
        latest_lost = std::max(latest_lost, s.end - fault_at);
      } else {
        ++ended;
      }
    }
    measured(what + ": holds across it: " + std::to_string(lost) + " saw lease_lost (the last " +
             ms_text(latest_lost) + " ms after the fault), " + std::to_string(ended) +
             " ended within the bound, " + std::to_string(kept) + " kept on the new master");
  }

  // The checker's whole verdict. Overlaps and trust violations are allowed only where the
  // scenario loses a grant to asynchronous replication (the caller says why).
  void expect_verdict(const report& r, bool double_grant_expected = false) {
    expect_fenced_safety(r);
    // Tokens are max(counter + 1, the server's µs): every node here shares one clock.
    EXPECT_EQ(r.token_regressions, 0u) << report_json_;
    EXPECT_EQ(r.fenced_order_violations, 0u) << report_json_;
    if (double_grant_expected) return;
    EXPECT_TRUE(r.overlaps.empty()) << report_json_;
    EXPECT_EQ(r.trust_violations, 0u) << report_json_;
  }

  // The lost signals, errors and timeouts of a run, for measured().
  std::string counts(const report& r) const {
    return std::to_string(r.sections.size()) + " sections (the longest wait for the lock " +
           ms_text(r.max_handoff_gap_ns) + " ms), " + std::to_string(r.lost_events) +
           " lease_lost, " + std::to_string(r.errors) + " error(s), " + std::to_string(r.timeouts) +
           " timeout(s), " + std::to_string(r.overlaps.size()) + " overlap(s), " +
           std::to_string(r.trust_violations) + " trust violation(s), " +
           std::to_string(r.fenced_rejections) + " fenced access(es) refused" + errors_seen();
  }

  // The distinct error texts of the histories (the first three).
  std::string errors_seen() const {
    std::vector<std::string> seen;
    for (const auto& e : events_) {
      if (e.kind != "error" || std::find(seen.begin(), seen.end(), e.detail) != seen.end())
        continue;
      if (seen.size() < 3) seen.push_back(e.detail);
    }
    std::string out;
    for (const auto& s : seen) out += (out.empty() ? " (" : "; ") + s;
    return out.empty() ? out : out + ")";
  }

  std::string probe_name() const { return name_ + ":probe"; }

  // The client-side view of the probe: how long its lock calls took and how many failed.
  static std::string probe_figures(const probe_client& p) {
    return std::to_string(p.cycles()) + " probe cycles, " + std::to_string(p.failures()) +
           " failed" + (p.failures() > 0 ? " (first: " + p.first_error() + ")" : "") +
           ", the longest lock+unlock " + std::to_string(p.longest_ms()) + " ms";
  }

  std::unique_ptr<dlock::test::sentinel_group> group_;

 private:
  // The release that followed `s` succeeded.
  bool released(const section& s) const {
    for (const auto& e : events_) {
      if (e.kind == "release" && e.proc == s.proc && e.token == s.token && e.t >= s.end) {
        return e.detail.empty();
      }
    }
    return false;
  }
};

}  // namespace dlock::faults::test
