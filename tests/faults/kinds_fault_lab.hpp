// The fault lab for dlock's other lock kinds (issue 25): fair_mutex and both sides of
// shared_mutex, run by dlock_fault_worker --kind (worker_lock.hpp). Helpers to see waiters
// queue on each kind's keys, to freeze a holder past its lease — by the test in its hold, or by
// itself in the window between its last lease check and its fenced write (--stop-before-write)
// — and to check what the thawed holder did.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "dlock/error.hpp"
#include "dlock/keys.hpp"
#include "fault_lab.hpp"

namespace dlock::faults::test {

class kinds_lab : public fault_lab {
 public:
  enum class freeze {
    in_the_hold,     // the test stops it once it has read, mid-hold
    before_a_write,  // it stops itself after its lease check, before its fenced write
  };

 protected:
  static const char* freeze_name(freeze how) {
    return how == freeze::in_the_hold ? "in its hold" : "before its write";
  }

  // The holder's arguments for `how` (its --kind added by the caller).
  static std::vector<std::string> frozen_args(freeze how) {
    if (how == freeze::in_the_hold) return {"--hold", "1500"};
    return {"--hold", "800", "--stop-before-write", "1"};
  }

  // Stops `holder` as `how` says; returns the fault's time.
  std::int64_t freeze_holder(child_process& holder, const std::string& id, freeze how) {
    if (how == freeze::in_the_hold) {
      EXPECT_TRUE(recorded(id, "uread", 5s)) << holder.diagnostics();
      holder.pause();
      return fault("sigstop " + id);
    }
    EXPECT_TRUE(wait_line(holder, "stop ", 5s)) << holder.diagnostics();
    EXPECT_TRUE(stopped(holder, 5s)) << holder.diagnostics();
    return fault("stopped itself before its write: " + id);
  }

  // SIGCONT; returns its time once the holder has said `lost`.
  std::int64_t thaw(child_process& holder, const std::string& id) {
    const auto resumed = fault("sigcont " + id);  // stamped before: the holder runs at once
    holder.resume();
    EXPECT_TRUE(wait_line(holder, "lost ", 5s)) << holder.diagnostics();
    return resumed;
  }

  // How late after the frozen hold's lease end the next holder may enter: it re-checks at the
  // lease's end (a few ms when the machine is idle), not at its next wait_recheck (3 s).
  static constexpr std::int64_t takeover_bound_ns = 600 * ns_per_ms;

  // What a thawed holder shows: `lost` on resume (returns how long after, in ns), its release
  // told lease_lost, and — stopped before a write — that one write sent and refused by the fence.
  std::int64_t expect_thawed(const std::string& id, std::int64_t resumed, freeze how) {
    const auto* lost = first_event("lost", id);
    EXPECT_NE(lost, nullptr) << id << " recorded lost";
    if (lost == nullptr) return -1;
    EXPECT_GE(lost->t, resumed) << id << ": lost fires on resume";
    // On resume: within a fraction of the lease (250 ms when the machine is idle).
    EXPECT_LE(lost->t - resumed, 500 * ns_per_ms) << id << ": on resume, not later";
    const auto releases = dlock::faults::select(events_, "release", id);
    EXPECT_EQ(releases.size(), 1u) << id;
    if (!releases.empty()) {
      EXPECT_EQ(releases.front().detail, make_error_code(dlock::errc::lease_lost).message());
    }
    const auto writes = dlock::faults::select(events_, "write", id);
    EXPECT_EQ(writes.size(), how == freeze::before_a_write ? 1u : 0u) << id;
    for (const auto& w : writes) EXPECT_FALSE(w.ok) << id << ": the fence refused its write";
    EXPECT_TRUE(dlock::faults::select(events_, "uwrite", id).empty()) << id;
    return lost->t - resumed;
  }

  // An integer reply of the lock server (":n"), or -1.
  long long lock_int(const std::vector<std::string>& command) const {
    const auto v = lock_srv_.command(command);
    return v.size() > 1 && v[0] == ':' ? std::stoll(v.substr(1)) : -1;
  }

  bool at_least(const std::function<long long()>& count, long long n) {
    return dlock::test::wait_until([&] { return count() >= n; }, 10s);
  }
  // fair_mutex waiters in the queue; shared_mutex writers announced as waiting; processes
  // subscribed to the read-write lock's channel (each waiting worker: one).
  bool fair_queued(long n) {
    return at_least([&] { return lock_int({"LLEN", dlock::keys::fair_queue(name_)}); }, n);
  }
  bool writers_waiting(long n) {
    return at_least([&] { return lock_int({"ZCARD", dlock::keys::waiting_writers(name_)}); }, n);
  }
  bool rw_subscribed(long n) {
    return at_least(
        [&] { return dlock::test::numsub(lock_srv_, dlock::keys::rwlock_channel(name_)); }, n);
  }

  // When the lease in `key` ends (monotonic ns), asked once its owner can no longer renew it.
  std::int64_t lease_end(const std::string& key) {
    const auto asked = dlock::faults::monotonic_ns();
    const auto pttl = lock_int({"PTTL", key});
    EXPECT_GT(pttl, 0) << key << ": the frozen holder's lease still runs";
    return asked + pttl * ns_per_ms;
  }

  // The key of the one read hold now on the lock (the first reader's, before others come).
  std::string only_read_hold_key() const {
    const auto pattern = dlock::keys::suffixed(name_, "*:rwlock_timeout:*");
    auto keys = lock_srv_.command({"KEYS", pattern});  // "[key]" for one key
    EXPECT_TRUE(keys.size() > 2 && keys.front() == '[' && keys.find(", ") == std::string::npos)
        << keys;
    return keys.size() > 2 ? keys.substr(1, keys.size() - 2) : keys;
  }

  // Whether `proc`'s history shows an event of `kind` within `limit` (polled).
  bool recorded(const std::string& proc, const std::string& kind, milliseconds limit) {
    return dlock::test::wait_until(
        [&] {
          for (const auto& e : dlock::faults::read_history(dir_.path() + "/" + proc + ".jsonl")) {
            if (e.kind == kind) return true;
          }
          return false;
        },
        limit);
  }

  // Whether `p` is stopped within `limit` (state T in /proc: a worker that stopped itself).
  static bool stopped(const child_process& p, milliseconds limit) {
    return dlock::test::wait_until(
        [&] {
          std::ifstream stat{"/proc/" + std::to_string(p.pid()) + "/stat"};
          std::string text{std::istreambuf_iterator<char>{stat}, {}};
          const auto paren = text.rfind(')');
          return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] == 'T';
        },
        limit);
  }

  // Every overlap the checker reported involves `proc_prefix`'s sections (the frozen ones).
  static bool overlaps_involve(const report& r, const std::string& proc_prefix) {
    for (const auto& ov : r.overlaps) {
      if (r.sections[ov.first].proc.rfind(proc_prefix, 0) != 0 &&
          r.sections[ov.second].proc.rfind(proc_prefix, 0) != 0) {
        return false;
      }
    }
    return true;
  }

  // The safety verdicts every scenario here expects (overlaps with a frozen holder aside, and
  // the one access a holder stopped before its write makes: checked by expect_thawed).
  void expect_no_violation(const report& r) {
    EXPECT_EQ(r.trust_violations, 0u) << report_json_;
    EXPECT_EQ(r.token_regressions, 0u) << report_json_;
    EXPECT_EQ(r.fenced_lost_updates, 0u) << report_json_;
    EXPECT_EQ(r.unfenced_lost_updates, 0u) << report_json_;
    EXPECT_EQ(r.fenced_order_violations, 0u) << report_json_;
    EXPECT_EQ(r.accesses_outside, 0u) << report_json_;
    EXPECT_TRUE(r.final_fenced_consistent()) << report_json_;
    EXPECT_EQ(r.errors, 0u) << report_json_;
  }
};

}  // namespace dlock::faults::test
