// detail::renewal_schedule: checks of explicit-lease holds, and checked() capping the trusted
// time at `sent + pttl - drift` (a server restored from an older snapshot, an eviction, a
// force-unlock that another owner's acquisition followed...). Constructed steady_clock time
// points, no timers.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "runtime/renewal_schedule.hpp"

namespace {

using namespace std::chrono_literals;
using dlock::detail::renewal_schedule;
using clock_type = renewal_schedule::clock;
using hold_id = renewal_schedule::id;
using time_point = clock_type::time_point;

const time_point t0 = time_point{} + 1000h;
constexpr clock_type::duration lease = 30s;
constexpr clock_type::duration third = lease / 3;  // 10 s: the check (and renewal) period
constexpr clock_type::duration no_slack = 0s;
constexpr bool renew = true;
constexpr bool check = false;

// A check that finds as much time left as the acquisition set: nothing moves but the next check.
TEST(renewal_schedule_check, an_answered_check_schedules_the_next_a_third_later) {
  renewal_schedule s;
  s.add(1, t0, lease, false);
  const time_point sent = t0 + third;
  ASSERT_EQ(s.take_renewals(sent, no_slack, 100, check), std::vector<hold_id>{1});
  s.checked(1, sent, 20'000);  // 30 s - 10 s left
  EXPECT_EQ(s.trusted_until(1), t0 + lease - 302ms);
  EXPECT_EQ(s.due(1), sent + third);
  EXPECT_TRUE(s.take_renewals(sent + third - 1ns, no_slack, 100, check).empty());
  EXPECT_EQ(s.take_renewals(sent + third, no_slack, 100, check), std::vector<hold_id>{1});
}

TEST(renewal_schedule_check, checked_caps_trust_at_sent_plus_pttl_minus_drift) {
  renewal_schedule s;
  s.add(1, t0, lease, false);
  s.checked(1, t0 + 1s, 5'000);
  EXPECT_EQ(s.trusted_until(1), t0 + 1s + 5s - 302ms);  // drift of the hold's lease, not the PTTL's
  EXPECT_EQ(s.due(1), t0 + 6s - 302ms) << "an explicit lease cannot be renewed: it ends";
  EXPECT_TRUE(s.take_expired(t0 + 6s - 302ms - 1ns).empty());
  EXPECT_EQ(s.take_expired(t0 + 6s - 302ms), std::vector<hold_id>{1});
}

TEST(renewal_schedule_check, checked_never_raises_trust) {
  renewal_schedule s;
  s.add(1, t0, lease, false);
  s.checked(1, t0 + 1s, 5'000);
  const time_point capped = t0 + 1s + 5s - 302ms;
  s.checked(1, t0 + 2s, 30'000);  // more time left than believed: not trusted
  EXPECT_EQ(s.trusted_until(1), capped);
  s.checked(1, t0 + 3s, 3'000'000);
  EXPECT_EQ(s.trusted_until(1), capped);
  s.checked(1, t0 + 2s, 2'000);  // less: capped further
  EXPECT_EQ(s.trusted_until(1), t0 + 2s + 2s - 302ms);
}

TEST(renewal_schedule_check, pttl_minus_one_changes_no_trust) {
  renewal_schedule s;
  s.add(1, t0, lease, false);
  s.add(2, t0, lease, true);
  ASSERT_EQ(s.take_renewals(t0 + third, no_slack, 100, check), std::vector<hold_id>{1});
  s.checked(1, t0 + third, -1);  // a key with no expiry
  s.checked(2, t0 + 1s, -1);
  EXPECT_EQ(s.trusted_until(1), t0 + lease - 302ms);
  EXPECT_EQ(s.trusted_until(2), t0 + lease - 302ms);
  EXPECT_EQ(s.due(1), t0 + third + third) << "no longer in flight: checked again later";
  EXPECT_EQ(s.due(2), t0 + 1s + third);
}

TEST(renewal_schedule_check, pttl_zero_ends_trust_at_once) {
  renewal_schedule s;
  s.add(1, t0, lease, false);
  s.checked(1, t0 + 5s, 0);
  EXPECT_EQ(s.trusted_until(1), t0 + 5s - 302ms);
  EXPECT_EQ(s.take_expired(t0 + 5s), std::vector<hold_id>{1});
}

TEST(renewal_schedule_check, a_stale_check_does_not_move_the_next_one_earlier) {
  renewal_schedule s;
  s.add(1, t0, lease, false);
  s.confirmed(1, t0 + 10s);       // a re-entry reset the TTL: next check +20 s
  s.checked(1, t0 + 5s, 29'000);  // sent before it
  EXPECT_LE(s.trusted_until(1), t0 + 10s + lease - 302ms) << "never raised";
  EXPECT_EQ(s.due(1), t0 + 10s + third);
}

// A watchdog hold whose key ends before its next renewal would be lost: it is renewed at once.
TEST(renewal_schedule_check, a_watchdog_hold_capped_before_its_renewal_is_due_at_once) {
  renewal_schedule s;
  s.add(1, t0, lease, true);
  s.checked(1, t0 + 1s, 5'000);
  EXPECT_EQ(s.trusted_until(1), t0 + 1s + 5s - 302ms);
  EXPECT_EQ(s.due(1), t0 + 1s) << "renewal moved to the check's send time";
  EXPECT_EQ(s.next_due(), t0 + 1s);
  EXPECT_TRUE(s.take_renewals(t0 + 1s, no_slack, 100, check).empty());
  EXPECT_EQ(s.take_renewals(t0 + 1s, no_slack, 100, renew), std::vector<hold_id>{1});
  s.confirmed(1, t0 + 1s);  // the renewal sets a full lease again
  EXPECT_EQ(s.trusted_until(1), t0 + 1s + lease - 302ms);
  EXPECT_EQ(s.due(1), t0 + 1s + third);
}

TEST(renewal_schedule_check, a_watchdog_hold_capped_after_its_renewal_keeps_its_turn) {
  renewal_schedule s;
  s.add(1, t0, lease, true);
  s.checked(1, t0 + 1s, 15'000);
  EXPECT_EQ(s.trusted_until(1), t0 + 1s + 15s - 302ms);  // +15.698 s
  EXPECT_EQ(s.due(1), t0 + 1s + third);                  // +11 s: before it
  EXPECT_TRUE(s.take_renewals(t0 + 11s - 1ns, no_slack, 100, renew).empty());
  EXPECT_EQ(s.take_renewals(t0 + 11s, no_slack, 100, renew), std::vector<hold_id>{1});
}

TEST(renewal_schedule_check, a_watchdog_hold_capped_exactly_at_its_renewal_is_due_at_once) {
  renewal_schedule s;
  s.add(1, t0, lease, true);
  s.checked(1, t0, 10'302);  // trusted until t0 + 10.302 s - 302 ms = the renewal time
  EXPECT_EQ(s.trusted_until(1), t0 + third);
  EXPECT_EQ(s.due(1), t0);
}

TEST(renewal_schedule_check, checks_and_renewals_go_in_separate_batches) {
  renewal_schedule s;
  for (hold_id h = 1; h <= 6; ++h) s.add(h, t0 + std::chrono::milliseconds{h}, lease, h % 2 == 0);
  const time_point now = t0 + third + 6ms;
  EXPECT_EQ(s.take_renewals(now, no_slack, 100, renew), (std::vector<hold_id>{2, 4, 6}));
  EXPECT_EQ(s.take_renewals(now, no_slack, 2, check), (std::vector<hold_id>{1, 3}));
  EXPECT_EQ(s.take_renewals(now, no_slack, 2, check), std::vector<hold_id>{5});
  EXPECT_TRUE(s.take_renewals(now, no_slack, 100, check).empty());
  EXPECT_TRUE(s.take_renewals(now, no_slack, 100, renew).empty());
}

TEST(renewal_schedule_check, checked_on_an_unknown_hold_adds_nothing) {
  renewal_schedule s;
  s.checked(9, t0, 1'000);
  s.checked(9, t0, -1);
  EXPECT_FALSE(s.contains(9));
  EXPECT_EQ(s.size(), 0u);
  EXPECT_FALSE(s.renews(9));
}

// Review finding: confirming an explicit lease (a re-entry or partial release reset its TTL)
// made it renewable. It moves its end and its next check, and it is still never renewed.
TEST(renewal_schedule_review, confirming_an_explicit_lease_never_makes_it_renewable) {
  renewal_schedule s;
  s.add(1, t0, 600ms, false);
  s.confirmed(1, t0 + 100ms);
  EXPECT_FALSE(s.renews(1));
  EXPECT_TRUE(s.take_renewals(t0 + 10s, 1s, 100, renew).empty());
  EXPECT_EQ(s.trusted_until(1), renewal_schedule::trusted_until(t0 + 100ms, 600ms));
  EXPECT_EQ(s.due(1), t0 + 100ms + 200ms) << "checked a third of the lease after";
  s.failed(1, t0 + 250ms);
  EXPECT_TRUE(s.take_renewals(t0 + 10s, 1s, 100, renew).empty());
  EXPECT_EQ(s.next_due(), t0 + 250ms) << "a failed check is retried";
  EXPECT_EQ(s.take_renewals(t0 + 250ms, no_slack, 100, check), std::vector<hold_id>{1});
  EXPECT_EQ(s.next_due(), s.trusted_until(1));
}

TEST(renewal_schedule_review, snapshot_and_restore_put_a_hold_back_as_it_was) {
  renewal_schedule s;
  EXPECT_EQ(s.snapshot(7), std::nullopt);
  s.add(7, t0, 30s, true);
  auto saved = s.snapshot(7);
  ASSERT_TRUE(saved);
  s.remove(7);
  EXPECT_FALSE(s.contains(7));
  s.restore(7, *saved);
  EXPECT_TRUE(s.renews(7));
  EXPECT_EQ(s.trusted_until(7), renewal_schedule::trusted_until(t0, 30s));
  EXPECT_EQ(s.take_renewals(t0 + 10s, no_slack, 100, renew), std::vector<hold_id>{7});
  // A snapshot taken while in flight comes back out of flight: its renewal can go again.
  auto in_flight = s.snapshot(7);
  s.remove(7);
  s.restore(7, *in_flight);
  EXPECT_EQ(s.take_renewals(t0 + 10s, no_slack, 100, renew), std::vector<hold_id>{7});
}

}  // namespace
