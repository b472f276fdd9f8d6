// The fault lab's clock scenarios (issue 24): the lock server's wall clock, by which Redis
// expires keys and from which first tokens are drawn, is stepped forward, stepped back or run
// fast while dlock_fault_worker processes hold and wait on a lock. The server runs with the
// fake-clock shim (support/fake_clock.hpp); the workers and the test keep the real clocks, so
// dlock's local deadlines (steady clock) and the server's expiry disagree exactly as on a host
// whose clock is stepped. Every wait is bounded.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "fault_lab.hpp"
#include "support/fake_clock.hpp"

using namespace std::chrono_literals;

namespace dlock::faults::test {
namespace {

// A fault lab whose lock server reads its wall clock from clock_ (the resource server keeps
// the real one: the fence compares tokens, never times).
class clock_lab : public fault_lab {
 protected:
  void SetUp() override {
    auto o = lock_srv_.options();
    o.clock_file = clock_.path();
    lock_srv_.restart(std::move(o));  // same port, now with the shim
  }

  std::int64_t lock_pttl() const {
    return std::stoll(lock_srv_.command({"PTTL", name_}).substr(1));
  }

  // Watchdog lease 3 s (renewed every second); waiters re-check at least every second.
  std::string url() const { return lock_url("watchdog=3000ms&recheck=1000ms"); }
  static constexpr std::int64_t lease_ms = 3000;

  dlock::test::fake_clock clock_;
};

// A forward step expires the holder's key on the server at once; the holder, trusting its
// steady-clock deadline, learns it only at its next renewal (a third of the lease). A waiter
// re-checking in between enters while the holder still believes it holds: an overlap that
// fencing resolves, since the new token (from the server's time, 120 s ahead) is the larger.
// Two rounds: the holder learns during a long hold (`lost`), or its short hold ends first and
// it writes with its old token (refused by the fence), its release then reporting lease_lost.
struct step_round {
  std::string held, next;
  bool writes_before_told = false;
  std::int64_t stepped = 0;
};

class forward_step_lab : public clock_lab {
 protected:
  // One round: `held` holds, `next` waits (re-checking every 100 ms), the clock steps +120 s
  // once `next` waits (and, when `held` should write before it is told, 200 ms into its 700 ms
  // hold: its renewal is due at 1000 ms).
  step_round run_round(int i, bool writes_before_told) {
    step_round s{"held" + std::to_string(i), "next" + std::to_string(i), writes_before_told};
    const auto waiter_url = lock_url("watchdog=3000ms&recheck=100ms");
    auto& holder = spawn(s.held, url(), {"--hold", writes_before_told ? "700" : "5000"});
    EXPECT_TRUE(wait_line(holder, "enter ", 15s)) << holder.diagnostics();
    const auto entered = std::chrono::steady_clock::now();
    auto& next = spawn(s.next, waiter_url, {"--hold", "300", "--wait", "10000"});
    EXPECT_TRUE(waiters_subscribed(1)) << next.diagnostics();
    std::this_thread::sleep_until(entered + (writes_before_told ? 200ms : 0ms));
    s.stepped = fault("clock step +120 s");
    clock_.step(120s);
    // "done" follows its exit, or its lost should a renewal come first on a loaded machine.
    EXPECT_TRUE(wait_line(holder, writes_before_told ? "done " : "lost ", 3s))
        << holder.diagnostics();
    EXPECT_TRUE(wait_line(next, "exit ", 5s)) << next.diagnostics();
    return s;
  }

  // The holder was told: its `lost` within a third of the lease (+ slop) of the step, or its
  // release reported lease_lost.
  void expect_told(const step_round& s) {
    const auto* lost = first_event("lost", s.held);
    const auto* release = first_event("release", s.held);
    ASSERT_TRUE(lost || release) << s.held;
    if (lost) {
      EXPECT_LE(lost->t - s.stepped, (lease_ms / 3 + 300) * ns_per_ms) << s.held;
    } else {
      EXPECT_EQ(release->detail, "the lease was lost") << s.held;
    }
  }
};

TEST_F(forward_step_lab, a_forward_step_may_overlap_but_fencing_holds_and_the_holder_is_told) {
  std::vector<step_round> rounds{run_round(0, false), run_round(1, true)};
  wait_all_exit(10s);
  const auto r = finish();
  EXPECT_EQ(r.fenced_lost_updates, 0u) << report_json_;
  EXPECT_TRUE(r.final_fenced_consistent()) << report_json_;
  EXPECT_EQ(r.accesses_after_lost, 0u) << report_json_;
  EXPECT_EQ(r.token_regressions, 0u) << report_json_;
  EXPECT_EQ(r.errors, 0u) << report_json_;
  for (const auto& s : rounds) {
    expect_told(s);
    const auto* held = dlock::faults::first_enter_after(r, 0, s.held);
    const auto* next = dlock::faults::first_enter_after(r, 0, s.next);
    ASSERT_TRUE(held && next);
    EXPECT_GT(next->token, held->token) << "the fence lets the new holder in, not the old one";
    const auto* lost = first_event("lost", s.held);
    measured("clock step +120 s on the lock server, watchdog lease 3000 ms, " +
             std::string{s.writes_before_told ? "700 ms hold: " : "5000 ms hold: "} +
             "next holder in " + ms_text(next->enter - s.stepped) + " ms after the step" +
             (next->enter < held->end ? " (overlap)" : "") + ", token +" +
             std::to_string(next->token - held->token) + "; old holder " +
             (lost ? "told (lost) " + ms_text(lost->t - s.stepped) + " ms after the step"
                   : "exited " + ms_text(held->end - s.stepped) + " ms after the step, " +
                         std::to_string(held->accesses) +
                         " accesses, its release: " + first_event("release", s.held)->detail));
  }
  measured("clock step +120 s, 2 rounds: " + std::to_string(r.overlaps.size()) +
           " overlaps, fenced lost updates " + std::to_string(r.fenced_lost_updates) +
           ", fenced rejections " + std::to_string(r.fenced_rejections) +
           ", unfenced lost updates " + std::to_string(r.unfenced_lost_updates) +
           ", stale accesses " + std::to_string(r.stale_accesses) + ", token regressions " +
           std::to_string(r.token_regressions));
}

// A backward step leaves the holder's key an hour longer on the server until the next renewal
// sets a fresh lease by the new clock; the hold goes on, the waiter enters after the release,
// and the next token, no longer drawn from the (earlier) server time, is the counter's + 1.
TEST_F(clock_lab, a_backward_step_keeps_the_lock_and_tokens_still_increase) {
  auto& holder = spawn("held", url(), {"--hold", "2500"});
  ASSERT_TRUE(wait_line(holder, "enter ", 15s)) << holder.diagnostics();
  auto& next = spawn("next", url(), {"--hold", "100", "--wait", "10000"});
  ASSERT_TRUE(waiters_subscribed(1)) << next.diagnostics();
  const auto stepped = fault("clock step -1 h");
  clock_.step(-1h);
  const auto pttl_after_step = lock_pttl();
  // The next renewal (within a second) re-sets the lease by the server's new time.
  ASSERT_TRUE(dlock::test::wait_until(
      [&] {
        const auto p = lock_pttl();
        return p > 0 && p <= lease_ms;
      },
      3s))
      << "a renewal brings the key's PTTL back to the lease";
  const auto renewed = dlock::faults::monotonic_ns();
  ASSERT_TRUE(wait_line(holder, "exit ", 5s)) << holder.diagnostics();
  ASSERT_TRUE(wait_line(next, "exit ", 5s)) << next.diagnostics();
  wait_all_exit(10s);
  const auto r = finish();
  EXPECT_TRUE(r.clean()) << report_json_;
  expect_fenced_safety(r);
  EXPECT_EQ(r.lost_events, 0u) << "the holder keeps its lock\n" << report_json_;
  EXPECT_EQ(r.errors, 0u) << report_json_;
  EXPECT_EQ(r.token_regressions, 0u) << report_json_;
  EXPECT_GE(pttl_after_step, 3'600'000 - lease_ms) << "the key outlives its lease by the step";
  const auto* held = dlock::faults::first_enter_after(r, 0, "held");
  const auto* after = dlock::faults::first_enter_after(r, 0, "next");
  ASSERT_TRUE(held && after);
  EXPECT_EQ(held->how, dlock::faults::section::ending::exit);
  EXPECT_GE(after->enter, held->end) << "the waiter enters after the release, not before";
  EXPECT_GT(after->token, held->token);
  measured("clock step -1 h on the lock server while held, watchdog lease 3000 ms: PTTL " +
           std::to_string(pttl_after_step) + " ms right after the step, back under the lease " +
           ms_text(renewed - stepped) + " ms after it (the next renewal); hold completed, " +
           std::to_string(r.lost_events) + " lost; waiter in " + ms_text(after->enter - held->end) +
           " ms after the release, token +" + std::to_string(after->token - held->token) +
           " (the counter, not the server time)");
}

// At 1.5x the server's lease runs out in 2 s of real time while the holder trusts 3 s less the
// drift margin. Renewals every second re-set it every 1.5 s of server time, so the key keeps at
// least 1.5 s in hand. Either the hold is kept, or its loss is signalled before another holder
// enters: no overlap.
TEST_F(clock_lab, at_one_and_a_half_times_the_rate_a_watchdog_hold_is_kept_or_lost_first) {
  fault("clock rate 1.5");
  clock_.set_rate(1.5);
  auto& a = spawn("a", url(), {"--hold", "4000"});
  ASSERT_TRUE(wait_line(a, "enter ", 15s)) << a.diagnostics();
  const auto entered = dlock::faults::monotonic_ns();
  auto& b = spawn("b", url(), {"--hold", "1000", "--wait", "15000"});
  // The key's PTTL while a holds (server milliseconds), sampled every 50 ms.
  std::int64_t min_pttl = lease_ms, samples = 0;
  while (dlock::faults::monotonic_ns() - entered < 3500 * ns_per_ms) {
    const auto p = lock_pttl();
    min_pttl = std::min(min_pttl, p);
    ++samples;
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_TRUE(wait_line(b, "exit ", 10s)) << b.diagnostics();
  wait_all_exit(10s);
  const auto r = finish();
  // A section ends at its exit or its lost: no overlap means no one entered before it.
  EXPECT_TRUE(r.overlaps.empty()) << report_json_;
  expect_fenced_safety(r);
  EXPECT_EQ(r.token_regressions, 0u) << report_json_;
  EXPECT_EQ(r.errors, 0u) << report_json_;
  const auto* first = dlock::faults::first_enter_after(r, 0, "a");
  const auto* second = dlock::faults::first_enter_after(r, 0, "b");
  ASSERT_TRUE(first && second);
  EXPECT_GE(second->enter, first->end);
  measured("clock rate 1.5 on the lock server, watchdog lease 3000 ms renewed every 1000 ms, " +
           std::string{"a 4000 ms hold: "} +
           (first->how == dlock::faults::section::ending::exit ? "kept" : "lost") +
           ", lowest PTTL " + std::to_string(min_pttl) + " ms (server ms) in " +
           std::to_string(samples) + " samples; " + std::to_string(r.overlaps.size()) +
           " overlaps; next holder in " + ms_text(second->enter - first->end) +
           " ms after the release");
}

}  // namespace
}  // namespace dlock::faults::test
