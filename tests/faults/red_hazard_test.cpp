// dlock::red_lock's documented hazards (issue 27) on live runs, and what fencing does about them.
// - A server restarted without persistence while held forgets the name: a second quorum can form
//   behind the holder's back (Redlock's known hazard). Built deterministically: the holder's
//   quorum is servers 0 and 1 (another owner holds server 2 as it acquires); server 1 restarts
//   empty while the other owner leaves server 2; a second worker takes servers 1 and 2. The
//   holder's clients reconnect only 2.5–5 s after a drop, standing for a holder that has not yet
//   noticed (dlock's client asks after its holds at every reconnect: that narrows the window,
//   it cannot close it). The checker must report the overlap and the trust violation; the fence
//   refuses the holder's stale write, so fenced lost updates stay 0 while the unfenced counter
//   beside it loses the second worker's update.
// - The fencing floor: server 0's counter is set far ahead; a first holder takes servers 0 and
//   1 (token: server 0's, written back to server 1); then server 0 is held by another owner and
//   a second holder's quorum is servers 1 and 2. Its token must still be the larger, though
//   server 2 alone issues a smaller one: it comes from server 1's floor.
// - A holder frozen (SIGSTOP) past its validity, by itself, between its last lease check and
//   its fenced write: the next holder enters once a majority of the keys expired, the thawed
//   holder is told its lease is lost and its one write is refused by the fence.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "group_fault_lab.hpp"

using namespace std::chrono_literals;

namespace dlock::faults::test {
namespace {

TEST_F(group_lab, red_lock_server_restarted_empty_while_held_lets_a_second_quorum_form_fenced) {
  const auto url = lock_url("watchdog=3000ms");
  const auto slow = lock_url("watchdog=3000ms&reconnect_max=5000ms&reconnect_min=5000ms");
  occupy(2, 60s);  // another owner on server 2: the holder's quorum is servers 0 and 1
  auto& first = spawn("first", slow, red_args({"--hold", "1500"}));
  ASSERT_TRUE(wait_line(first, "enter ", 15s)) << first.diagnostics();
  ASSERT_TRUE(recorded("first", "uread", 5s)) << "its read raised the fence to its token";
  auto& second = spawn("second", url, red_args({"--hold", "100", "--wait", "10000"}));
  ASSERT_TRUE(recorded("second", "acquire", 5s)) << second.diagnostics();
  const auto restarting = fault("restart server 1 without persistence");
  server(1).restart();
  fault("server 1 up, empty; the other owner left server 2");
  vacate(2);
  ASSERT_TRUE(wait_line(second, "exit ", 5s))
      << "a second quorum, servers 1 and 2, behind the holder's back\n"
      << second.diagnostics();
  wait_all_exit(15s);
  const auto r = finish();
  // The hazard, caught by the checker.
  EXPECT_FALSE(r.clean()) << report_json_;
  EXPECT_EQ(r.overlaps.size(), 1u) << report_json_;
  EXPECT_EQ(r.trust_violations, 1u) << "the second entered while the first trusted its hold\n"
                                    << report_json_;
  // What fencing keeps.
  EXPECT_EQ(r.fenced_lost_updates, 0u) << report_json_;
  EXPECT_EQ(r.fenced_order_violations, 0u) << report_json_;
  EXPECT_EQ(r.token_regressions, 0u) << report_json_;
  EXPECT_TRUE(r.final_fenced_consistent()) << report_json_;
  const auto* a = first_enter_after(r, 0, "first");
  const auto* b = first_enter_after(r, 0, "second");
  ASSERT_TRUE(a && b) << report_json_;
  EXPECT_GT(b->token, a->token) << "tokens follow the servers' clocks: the restart lowers none";
  EXPECT_LT(b->enter, a->end) << "both held at once";
  const auto writes = dlock::faults::select(events_, "write", "first");
  ASSERT_EQ(writes.size(), 1u) << "the first still trusted its hold when it wrote\n"
                               << report_json_;
  EXPECT_FALSE(writes.front().ok) << "the fence refused the stale token";
  EXPECT_EQ(r.unfenced_lost_updates, 1u) << "without the fence, the second's update is lost\n"
                                         << report_json_;
  measured(
      "red_lock over 3 servers, a holder's quorum server restarted without persistence "
      "(watchdog lease 3000 ms): second quorum in " +
      ms_text(b->enter - restarting) + " ms after the restart began, " +
      ms_text(a->enter + a->left_ms * ns_per_ms - b->enter) +
      " ms before the first holder's trust ended; " + std::to_string(r.overlaps.size()) +
      " overlap, " + std::to_string(r.trust_violations) + " trust violation, " +
      std::to_string(r.stale_accesses) + " stale accesses; the stale write refused (" +
      std::to_string(r.fenced_rejections) + " fenced rejections), " +
      std::to_string(r.fenced_lost_updates) + " fenced lost updates, " +
      std::to_string(r.unfenced_lost_updates) + " unfenced lost update");
}

TEST_F(group_lab, red_lock_token_written_back_as_a_floor_stays_above_in_a_quorum_without_it) {
  const auto url = lock_url("watchdog=1000ms");
  constexpr std::uint64_t ahead = 4'000'000'000'000'000;  // µs, about 2096; below 2^53
  server(0).command({"SET", dlock::keys::slot_fencing_counter_of(name_), std::to_string(ahead)});
  occupy(2, 60s);  // the first holder's quorum: servers 0 and 1
  auto& first = spawn("first", url, red_args({"--hold", "50"}));
  ASSERT_EQ(first.wait_exit(15s), std::optional<int>{0}) << first.diagnostics();
  const auto floor_on_1 = counter(1);
  fault("another owner on server 0, none on server 2");
  occupy(0, 60s);  // the second holder's quorum: servers 1 and 2
  vacate(2);
  auto& second = spawn("second", url, red_args({"--hold", "50"}));
  ASSERT_EQ(second.wait_exit(15s), std::optional<int>{0}) << second.diagnostics();
  const auto r = finish();
  EXPECT_TRUE(r.clean()) << report_json_;
  expect_fenced_safety(r);
  EXPECT_EQ(r.token_regressions, 0u) << report_json_;
  EXPECT_EQ(r.fenced_rejections, 0u) << "the second's accesses were accepted\n" << report_json_;
  const auto* a = first_event("enter", "first");
  const auto* b = first_event("enter", "second");
  ASSERT_TRUE(a && b) << report_json_;
  EXPECT_EQ(a->token, ahead + 1) << "the quorum's token: server 0's, the largest";
  EXPECT_EQ(floor_on_1, a->token) << "written back to server 1 as its floor";
  const auto tokens = member_tokens(*b);
  ASSERT_EQ(tokens.size(), 3u) << b->detail;
  EXPECT_EQ(tokens[0], 0u) << "server 0 was not acquired";
  EXPECT_EQ(tokens[1], a->token + 1) << "server 1 issued above its floor";
  EXPECT_LT(tokens[2], a->token) << "server 2 alone issues from its clock: below the first's";
  EXPECT_EQ(b->token, tokens[1]);
  EXPECT_GT(b->token, a->token) << "the later quorum's token is the larger";
  measured("red_lock fencing floor: server 0's counter set to " + std::to_string(ahead) +
           "; first token " + std::to_string(a->token) + " (servers 0+1), server 1's counter " +
           std::to_string(floor_on_1) + " after it; second token " + std::to_string(b->token) +
           " (servers 1+2; server 2's own " + std::to_string(tokens[2]) +
           "): larger without server 0");
}

TEST_F(group_lab, red_lock_holder_frozen_past_its_validity_is_told_and_its_write_is_fenced) {
  const auto url = lock_url("watchdog=1000ms");
  auto& holder = spawn("frozen", url, red_args(frozen_args(freeze::before_a_write)));
  ASSERT_TRUE(wait_line(holder, "enter ", 15s)) << holder.diagnostics();
  auto& next = spawn("next", url, red_args({"--hold", "200", "--wait", "10000"}));
  ASSERT_TRUE(recorded("next", "acquire", 5s)) << next.diagnostics();
  const auto stopped = freeze_holder(holder, "frozen", freeze::before_a_write);
  const auto lease_end = red_lease_end();
  ASSERT_TRUE(wait_line(next, "enter ", 5s)) << next.diagnostics();
  ASSERT_TRUE(recorded("next", "read", 5s)) << "its read raised the fence";
  const auto resumed = thaw(holder, "frozen");
  ASSERT_TRUE(wait_line(next, "exit ", 5s)) << next.diagnostics();
  wait_all_exit(10s);
  const auto r = finish();
  expect_no_violation(r);
  EXPECT_EQ(r.overlaps.size(), 1u) << "the frozen holder believed it held on\n" << report_json_;
  EXPECT_TRUE(overlaps_involve(r, "frozen")) << report_json_;
  EXPECT_EQ(r.accesses_after_lost + r.stale_accesses, 1u) << "the write from the window only\n"
                                                          << report_json_;
  const auto* held = first_enter_after(r, 0, "frozen");
  const auto* in = first_enter_after(r, stopped, "next");
  ASSERT_TRUE(held && in) << report_json_;
  EXPECT_GT(in->token, held->token);
  constexpr std::int64_t slop = 20 * ns_per_ms;  // PTTL's and the clocks' granularity
  EXPECT_GE(in->enter, lease_end - slop) << "not before a majority of its keys expired";
  EXPECT_LE(in->enter, lease_end + takeover_bound_ns) << "the next round comes soon after";
  const auto lost_ns = expect_thawed("frozen", resumed, freeze::before_a_write);
  measured(
      "red_lock over 3 servers, a holder stopped before its write past its validity "
      "(watchdog lease 1000 ms): next enter " +
      ms_text(in->enter - stopped) + " ms after the stop, " + ms_text(in->enter - lease_end) +
      " ms after the majority's PTTL ran out; thawed holder's lost " + ms_text(lost_ns) +
      " ms after SIGCONT, its write refused (" + std::to_string(r.fenced_rejections) +
      " fenced rejections, " + std::to_string(r.fenced_lost_updates) + " fenced lost updates)");
}

}  // namespace
}  // namespace dlock::faults::test
