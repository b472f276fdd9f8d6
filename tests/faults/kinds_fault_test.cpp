// SIGSTOP of a holder past its lease for fair_mutex and both sides of shared_mutex (issue 25),
// through the checker. Each scenario freezes a holder (watchdog lease 1 s) while others wait,
// checks who takes over and when (against the frozen hold's PTTL, read once it can no longer be
// renewed), thaws it and checks that it sees its loss. Writers are frozen twice: by the test in
// their hold, and by themselves between their last lease check and their fenced write, which
// they send when thawed: the fence must refuse it.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "kinds_fault_lab.hpp"

using namespace std::chrono_literals;

namespace dlock::faults::test {
namespace {

constexpr std::int64_t kinds_slop_ns = 20 * ns_per_ms;  // PTTL's and the clocks' granularity

struct frozen_round {
  std::string holder;
  kinds_lab::freeze how;
  std::int64_t stopped = 0, lease_end = 0, resumed = 0;
};

// The accesses the checker counts as made after the loss (`lost` recorded first) or stale (the
// section still open): one per holder frozen before its write, which it sends when thawed.
std::size_t window_writes(const std::vector<frozen_round>& rounds) {
  return static_cast<std::size_t>(std::count_if(rounds.begin(), rounds.end(), [](const auto& rd) {
    return rd.how == kinds_lab::freeze::before_a_write;
  }));
}

std::vector<std::string> kinds_args(std::vector<std::string> args, std::vector<std::string> more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

TEST_F(kinds_lab, fair_mutex_sigstop_of_a_holder_past_its_lease_the_queue_s_next_takes_over) {
  const auto url = lock_url("watchdog=1000ms");
  const std::vector<std::string> waiter{"--kind", "fair", "--hold", "200", "--wait", "10000"};
  std::vector<frozen_round> rounds;
  for (const auto how : {freeze::in_the_hold, freeze::before_a_write}) {
    const auto n = std::to_string(rounds.size());
    frozen_round rd{"frozen" + n, how};
    auto& holder = spawn(rd.holder, url, kinds_args(frozen_args(how), {"--kind", "fair"}));
    ASSERT_TRUE(wait_line(holder, "enter ", 15s)) << holder.diagnostics();
    auto& first = spawn("first" + n, url, waiter);
    ASSERT_TRUE(fair_queued(1)) << first.diagnostics();
    std::this_thread::sleep_for(40ms);  // not ordering: spaces the arrivals past the FIFO margin
    auto& second = spawn("second" + n, url, waiter);
    ASSERT_TRUE(fair_queued(2)) << second.diagnostics();
    rd.stopped = freeze_holder(holder, rd.holder, how);
    rd.lease_end = lease_end(name_);
    ASSERT_TRUE(wait_line(first, "enter ", 5s)) << first.diagnostics();
    ASSERT_TRUE(recorded("first" + n, "read", 5s)) << "its read raised the fence";
    ASSERT_TRUE(wait_line(second, "enter ", 5s)) << second.diagnostics();
    rd.resumed = thaw(holder, rd.holder);
    ASSERT_TRUE(wait_line(second, "exit ", 5s)) << second.diagnostics();
    rounds.push_back(rd);
  }
  wait_all_exit(10s);
  const auto r = finish({.fifo = true, .fifo_margin_ns = 20 * ns_per_ms});
  expect_no_violation(r);
  EXPECT_EQ(r.fifo_violations, 0u) << report_json_;
  EXPECT_GE(r.overlaps.size(), rounds.size()) << "each frozen holder overlapped\n" << report_json_;
  EXPECT_TRUE(overlaps_involve(r, "frozen")) << report_json_;
  EXPECT_EQ(r.accesses_after_lost + r.stale_accesses, window_writes(rounds))
      << "the write sent from the window only\n"
      << report_json_;
  for (std::size_t i = 0; i < rounds.size(); ++i) {
    const auto& rd = rounds[i];
    const auto n = std::to_string(i);
    const auto* held = first_enter_after(r, 0, rd.holder);
    const auto* next = first_enter_after(r, rd.stopped);
    const auto* second = first_enter_after(r, rd.stopped, "second" + n);
    ASSERT_TRUE(held && next && second) << report_json_;
    EXPECT_EQ(next->proc, "first" + n) << "the queue's head took over";
    EXPECT_GT(second->enter, next->enter);
    EXPECT_GT(next->token, held->token);
    EXPECT_GE(next->enter, rd.lease_end - kinds_slop_ns) << "not before the lease ended";
    EXPECT_LE(next->enter, rd.lease_end + takeover_bound_ns) << "the head re-checks at its end";
    const auto lost_ns = expect_thawed(rd.holder, rd.resumed, rd.how);
    measured(std::string{"fair_mutex, SIGSTOP "} + freeze_name(rd.how) +
             ", watchdog lease 1000 ms: the queue's head in " + ms_text(next->enter - rd.stopped) +
             " ms after the stop, " + ms_text(next->enter - rd.lease_end) +
             " ms after the lease end (PTTL), the second " + ms_text(second->enter - next->enter) +
             " ms after it; thawed holder's lost " + ms_text(lost_ns) + " ms after SIGCONT" +
             (rd.how == freeze::before_a_write ? ", its write refused by the fence" : ""));
  }
  measured("fair_mutex SIGSTOP, 2 rounds: " + std::to_string(r.overlaps.size()) +
           " overlaps (all with the frozen holder), " + std::to_string(r.trust_violations) +
           " trust violations, " + std::to_string(r.fifo_violations) + " FIFO violations, " +
           std::to_string(r.fenced_rejections) + " fenced rejections, " +
           std::to_string(r.fenced_lost_updates) + " fenced lost updates");
}

TEST_F(kinds_lab, shared_mutex_sigstop_of_a_writer_past_its_lease_the_waiting_writer_then_readers) {
  const auto url = lock_url("watchdog=1000ms");
  const std::vector<std::string> reader{"--kind", "read", "--hold", "300", "--wait", "10000"};
  std::vector<frozen_round> rounds;
  for (const auto how : {freeze::in_the_hold, freeze::before_a_write}) {
    const auto n = std::to_string(rounds.size());
    frozen_round rd{"frozen" + n, how};
    auto& holder = spawn(rd.holder, url, kinds_args(frozen_args(how), {"--kind", "write"}));
    ASSERT_TRUE(wait_line(holder, "enter ", 15s)) << holder.diagnostics();
    auto& ra = spawn("reader" + n + "a", url, reader);
    auto& rb = spawn("reader" + n + "b", url, reader);
    ASSERT_TRUE(rw_subscribed(2)) << ra.diagnostics() << rb.diagnostics();
    auto& writer =
        spawn("writer" + n, url, {"--kind", "write", "--hold", "200", "--wait", "10000"});
    ASSERT_TRUE(writers_waiting(1) && rw_subscribed(3)) << writer.diagnostics();
    rd.stopped = freeze_holder(holder, rd.holder, how);
    rd.lease_end = lease_end(name_);
    ASSERT_TRUE(wait_line(writer, "enter ", 5s)) << writer.diagnostics();
    ASSERT_TRUE(recorded("writer" + n, "read", 5s)) << "its read raised the fence";
    ASSERT_TRUE(wait_line(ra, "enter ", 5s)) << ra.diagnostics();
    ASSERT_TRUE(wait_line(rb, "enter ", 5s)) << rb.diagnostics();
    rd.resumed = thaw(holder, rd.holder);
    ASSERT_TRUE(wait_line(ra, "exit ", 5s) && wait_line(rb, "exit ", 5s));
    rounds.push_back(rd);
  }
  wait_all_exit(10s);
  const auto r = finish();
  expect_no_violation(r);
  EXPECT_GE(r.overlaps.size(), rounds.size()) << report_json_;
  EXPECT_TRUE(overlaps_involve(r, "frozen")) << report_json_;
  EXPECT_GE(r.shared_overlaps, rounds.size()) << "each round's readers together\n" << report_json_;
  EXPECT_EQ(r.accesses_after_lost + r.stale_accesses, window_writes(rounds)) << report_json_;
  for (std::size_t i = 0; i < rounds.size(); ++i) {
    const auto& rd = rounds[i];
    const auto n = std::to_string(i);
    const auto* held = first_enter_after(r, 0, rd.holder);
    const auto* next = first_enter_after(r, rd.stopped);
    const auto* ra = first_enter_after(r, rd.stopped, "reader" + n + "a");
    const auto* rb = first_enter_after(r, rd.stopped, "reader" + n + "b");
    ASSERT_TRUE(held && next && ra && rb) << report_json_;
    EXPECT_EQ(next->proc, "writer" + n) << "the waiting writer first: readers queue behind it";
    EXPECT_GT(next->token, held->token);
    EXPECT_GE(next->enter, rd.lease_end - kinds_slop_ns) << "not before the lease ended";
    EXPECT_LE(next->enter, rd.lease_end + takeover_bound_ns);
    EXPECT_GE(std::min(ra->enter, rb->enter), next->end) << "the readers after the writer";
    const auto lost_ns = expect_thawed(rd.holder, rd.resumed, rd.how);
    measured(std::string{"shared_mutex writer, SIGSTOP "} + freeze_name(rd.how) +
             ", watchdog lease 1000 ms: the waiting writer in " +
             ms_text(next->enter - rd.stopped) + " ms after the stop, " +
             ms_text(next->enter - rd.lease_end) + " ms after the lease end (PTTL); the readers " +
             ms_text(std::min(ra->enter, rb->enter) - next->end) + " and " +
             ms_text(std::max(ra->enter, rb->enter) - next->end) +
             " ms after its exit, together; thawed writer's lost " + ms_text(lost_ns) +
             " ms after SIGCONT" +
             (rd.how == freeze::before_a_write ? ", its write refused by the fence" : ""));
  }
  measured("shared_mutex writer SIGSTOP, 2 rounds: " + std::to_string(r.overlaps.size()) +
           " overlaps (all with the frozen writer), " + std::to_string(r.shared_overlaps) +
           " read-read overlaps, " + std::to_string(r.trust_violations) + " trust violations, " +
           std::to_string(r.fenced_rejections) + " fenced rejections, " +
           std::to_string(r.fenced_lost_updates) + " fenced lost updates");
}

// A reader frozen among live readers while a writer waits. Round 0: the live readers leave
// while the frozen reader's lease still runs (the writer waits for that lease); round 1: its
// lease ends first (the writer waits for the live readers).
TEST_F(kinds_lab, shared_mutex_sigstop_of_a_reader_past_its_lease_the_writer_waits_for_all_reads) {
  const auto url = lock_url("watchdog=1000ms");
  struct reader_round {
    frozen_round frozen;
    std::string live_hold;
  };
  std::vector<reader_round> rounds;
  for (const char* live_hold : {"500", "2000"}) {
    const auto n = std::to_string(rounds.size());
    reader_round rd{{"frozen" + n, freeze::in_the_hold}, live_hold};
    auto& holder = spawn(rd.frozen.holder, url, {"--kind", "read", "--hold", "3000"});
    ASSERT_TRUE(wait_line(holder, "enter ", 15s)) << holder.diagnostics();
    const auto hold_key = only_read_hold_key();
    const std::vector<std::string> live{"--kind", "read", "--hold", live_hold};
    auto& la = spawn("live" + n + "a", url, live);
    auto& lb = spawn("live" + n + "b", url, live);
    ASSERT_TRUE(wait_line(la, "enter ", 5s) && wait_line(lb, "enter ", 5s));
    auto& writer =
        spawn("writer" + n, url, {"--kind", "write", "--hold", "200", "--wait", "10000"});
    ASSERT_TRUE(writers_waiting(1)) << writer.diagnostics();
    rd.frozen.stopped = freeze_holder(holder, rd.frozen.holder, freeze::in_the_hold);
    rd.frozen.lease_end = lease_end(hold_key);
    ASSERT_TRUE(wait_line(writer, "enter ", 10s)) << writer.diagnostics();
    ASSERT_TRUE(recorded("writer" + n, "write", 5s)) << writer.diagnostics();
    rd.frozen.resumed = thaw(holder, rd.frozen.holder);
    ASSERT_TRUE(wait_line(writer, "exit ", 5s)) << writer.diagnostics();
    rounds.push_back(rd);
  }
  wait_all_exit(10s);
  const auto r = finish();
  expect_no_violation(r);
  EXPECT_EQ(r.stale_accesses, 0u) << report_json_;
  EXPECT_EQ(r.accesses_after_lost, 0u) << report_json_;
  EXPECT_EQ(r.overlaps.size(), rounds.size()) << "the frozen reader with the writer\n"
                                              << report_json_;
  EXPECT_TRUE(overlaps_involve(r, "frozen")) << report_json_;
  EXPECT_GE(r.shared_overlaps, 3 * rounds.size()) << "three readers at once\n" << report_json_;
  for (std::size_t i = 0; i < rounds.size(); ++i) {
    const auto& rd = rounds[i].frozen;
    const auto n = std::to_string(i);
    const auto* w = first_enter_after(r, 0, "writer" + n);
    const auto* la = first_enter_after(r, 0, "live" + n + "a");
    const auto* lb = first_enter_after(r, 0, "live" + n + "b");
    ASSERT_TRUE(w && la && lb) << report_json_;
    const auto live_end = std::max(la->end, lb->end);
    EXPECT_GE(w->enter, live_end) << "the writer after the live readers left";
    EXPECT_GE(w->enter, rd.lease_end - kinds_slop_ns) << "and after the frozen reader's lease";
    EXPECT_LE(w->enter, std::max(live_end, rd.lease_end) + 1000 * ns_per_ms);
    EXPECT_GT(w->token, std::max(la->token, lb->token));
    const auto lost_ns = expect_thawed(rd.holder, rd.resumed, rd.how);
    measured("shared_mutex reader, SIGSTOP in its hold among 2 live readers (hold " +
             rounds[i].live_hold +
             " ms), a writer waiting, watchdog lease 1000 ms: the writer in " +
             ms_text(w->enter - rd.lease_end) + " ms after the frozen reader's lease end (PTTL), " +
             ms_text(w->enter - live_end) + " ms after the last live reader's exit; thawed " +
             "reader's lost " + ms_text(lost_ns) + " ms after SIGCONT");
  }
  measured("shared_mutex reader SIGSTOP, 2 rounds: " + std::to_string(r.overlaps.size()) +
           " overlaps (the frozen reader with the writer), " + std::to_string(r.shared_overlaps) +
           " read-read overlaps, " + std::to_string(r.trust_violations) + " trust violations, " +
           std::to_string(r.stale_accesses) + " stale accesses");
}

}  // namespace
}  // namespace dlock::faults::test
