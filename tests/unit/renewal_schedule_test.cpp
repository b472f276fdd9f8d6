// detail::renewal_schedule: when holds are renewed (watchdog) or checked (explicit lease) and
// until when they are trusted, driven by constructed steady_clock time points (no sleeping, no
// timers). Checks and PTTL caps: renewal_schedule_check_test.cpp.
#include "runtime/renewal_schedule.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

using namespace std::chrono_literals;
using dlock::detail::renewal_schedule;
using clock_type = renewal_schedule::clock;
using hold_id = renewal_schedule::id;
using time_point = clock_type::time_point;

// An arbitrary origin, far from the clock's epoch so that earlier times are representable.
const time_point t0 = time_point{} + 1000h;
constexpr clock_type::duration lease = 30s;
constexpr clock_type::duration third = lease / 3;  // 10 s: the renewal period
constexpr clock_type::duration no_slack = 0s;
// take_renewals' `renew` argument: watchdog holds to renew, or explicit-lease holds to check.
constexpr bool renew = true;
constexpr bool check = false;

std::vector<hold_id> sorted(std::vector<hold_id> v) {
  std::sort(v.begin(), v.end());
  return v;
}

TEST(renewal_schedule, drift_is_one_percent_plus_two_ms) {
  EXPECT_EQ(renewal_schedule::drift(30s), 302ms);
  EXPECT_EQ(renewal_schedule::drift(10s), 102ms);
  EXPECT_EQ(renewal_schedule::drift(100ms), 3ms);
  EXPECT_EQ(renewal_schedule::drift(0s), 2ms);
}

TEST(renewal_schedule, trusted_until_is_sent_plus_lease_minus_drift) {
  EXPECT_EQ(renewal_schedule::trusted_until(t0, 30s), t0 + 30s - 302ms);
  EXPECT_EQ(renewal_schedule::trusted_until(t0 + 5s, 10s), t0 + 15s - 102ms);
}

TEST(renewal_schedule, empty_schedule_has_nothing_to_do) {
  renewal_schedule s;
  EXPECT_EQ(s.size(), 0u);
  EXPECT_FALSE(s.contains(1));
  EXPECT_EQ(s.trusted_until(1), std::nullopt);
  EXPECT_EQ(s.next_due(), std::nullopt);
  EXPECT_TRUE(s.take_renewals(t0 + 1h, lease, 100, renew).empty());
  EXPECT_TRUE(s.take_expired(t0 + 1h).empty());
  s.remove(1);         // unknown: no-op
  s.confirmed(1, t0);  // unknown: no-op, does not add
  s.checked(1, t0, 1000);
  s.failed(1, t0);
  EXPECT_FALSE(s.renews(1));
  EXPECT_TRUE(s.take_renewals(t0 + 1h, lease, 100, check).empty());
  EXPECT_EQ(s.size(), 0u);
  EXPECT_FALSE(s.contains(1));
}

TEST(renewal_schedule, add_with_renew_schedules_renewal_at_a_third_of_the_lease) {
  renewal_schedule s;
  s.add(7, t0, lease, true);
  EXPECT_TRUE(s.contains(7));
  EXPECT_EQ(s.size(), 1u);
  EXPECT_EQ(s.trusted_until(7), t0 + lease - 302ms);
  EXPECT_EQ(s.next_due(), t0 + third);

  EXPECT_TRUE(s.take_renewals(t0, no_slack, 100, renew).empty());
  EXPECT_TRUE(s.take_renewals(t0 + third - 1ns, no_slack, 100, renew).empty());
  EXPECT_TRUE(s.take_renewals(t0 + third, no_slack, 100, check).empty()) << "renewed, not checked";
  EXPECT_TRUE(s.renews(7));
  EXPECT_EQ(s.take_renewals(t0 + third, no_slack, 100, renew), std::vector<hold_id>{7});
}

// An explicit lease is never renewed, but checked every third of its lease like a watchdog hold
// is renewed: take_renewals(..., check) returns it, take_renewals(..., renew) never does.
TEST(renewal_schedule, add_without_renew_is_checked_at_a_third_of_the_lease) {
  renewal_schedule s;
  s.add(7, t0, lease, false);
  EXPECT_FALSE(s.renews(7));
  EXPECT_EQ(s.trusted_until(7), t0 + lease - 302ms);
  EXPECT_EQ(s.due(7), t0 + third);
  EXPECT_EQ(s.next_due(), t0 + third);

  EXPECT_TRUE(s.take_renewals(t0 + third - 1ns, no_slack, 100, check).empty());
  EXPECT_TRUE(s.take_renewals(t0 + lease, lease, 100, renew).empty()) << "never renewed";
  EXPECT_EQ(s.take_renewals(t0 + third, no_slack, 100, check), std::vector<hold_id>{7});
  EXPECT_TRUE(s.take_renewals(t0 + third, no_slack, 100, check).empty()) << "in flight";
  EXPECT_EQ(s.next_due(), t0 + lease - 302ms) << "in flight: only its end is left to watch";
}

TEST(renewal_schedule, top_up_takes_holds_not_yet_due_earliest_first) {
  renewal_schedule s;
  s.add(1, t0, lease, true);
  s.add(2, t0 + 200ms, lease, true);
  s.add(3, t0 + 100ms, lease, true);
  s.add(4, t0 + 5s, lease, true);     // due far later than the top-up's slack
  s.add(5, t0 + 50ms, lease, false);  // never renewed (checked: another batch)
  EXPECT_TRUE(s.take_renewals(t0, third, 100, renew).empty()) << "nothing due now";
  EXPECT_EQ(s.take_renewals(t0, third + 1s, 2, renew, true), (std::vector<hold_id>{1, 3}))
      << "earliest first";
  EXPECT_EQ(s.take_renewals(t0, third + 1s, 100, renew, true), (std::vector<hold_id>{2}))
      << "in flight: not again";
  EXPECT_EQ(s.take_renewals(t0, third + 1s, 100, check, true), (std::vector<hold_id>{5}))
      << "checks apart";
}

TEST(renewal_schedule, an_explicit_lease_with_no_check_answered_expires) {
  renewal_schedule s;
  s.add(7, t0, lease, false);
  const time_point trusted = t0 + lease - 302ms;
  ASSERT_EQ(s.take_renewals(t0 + third, no_slack, 100, check), std::vector<hold_id>{7});
  EXPECT_EQ(s.next_due(), trusted);  // the check is in flight: the next event is its expiry

  EXPECT_TRUE(s.take_expired(trusted - 1ns).empty());
  EXPECT_TRUE(s.contains(7));
  EXPECT_EQ(s.take_expired(trusted), std::vector<hold_id>{7});
  EXPECT_FALSE(s.contains(7));
  EXPECT_EQ(s.size(), 0u);
  EXPECT_EQ(s.trusted_until(7), std::nullopt);
  EXPECT_EQ(s.next_due(), std::nullopt);
}

TEST(renewal_schedule, take_renewals_returns_nothing_before_the_first_is_due) {
  renewal_schedule s;
  s.add(1, t0, lease, true);       // due t0 + 10 s
  s.add(2, t0 + 1s, lease, true);  // due t0 + 11 s
  // Both are within the slack, but neither is due yet: nothing is sent early on its own.
  EXPECT_TRUE(s.take_renewals(t0 + 9s, 5s, 100, renew).empty());
  EXPECT_TRUE(s.take_renewals(t0 + third - 1ns, 5s, 100, renew).empty());
  EXPECT_EQ(s.next_due(), t0 + third);
}

TEST(renewal_schedule, once_the_earliest_is_due_all_due_within_slack_go_sorted_by_due_time) {
  renewal_schedule s;
  // Ids in the opposite order of their due times, so the order checked is the due order.
  s.add(30, t0, lease, true);       // due +10 s
  s.add(20, t0 + 1s, lease, true);  // due +11 s
  s.add(10, t0 + 2s, lease, true);  // due +12 s
  s.add(40, t0 + 5s, lease, true);  // due +15 s: exactly at now + slack, included
  s.add(5, t0 + 6s, lease, true);   // due +16 s: beyond the slack
  s.add(99, t0, lease, false);      // never renewed: checked in a batch of its own

  EXPECT_EQ(s.take_renewals(t0 + third, 5s, 100, renew), (std::vector<hold_id>{30, 20, 10, 40}));
  EXPECT_EQ(s.take_renewals(t0 + third, 5s, 100, check), std::vector<hold_id>{99});
  // Those are in flight now; the remaining one is not due yet.
  EXPECT_TRUE(s.take_renewals(t0 + third, 5s, 100, renew).empty());
  EXPECT_TRUE(s.take_renewals(t0 + 16s - 1ns, 5s, 100, renew).empty());
  EXPECT_EQ(s.take_renewals(t0 + 16s, 5s, 100, renew), std::vector<hold_id>{5});
}

TEST(renewal_schedule, batch_takes_the_earliest_due_up_to_max) {
  renewal_schedule s;
  for (hold_id h = 1; h <= 5; ++h) s.add(h, t0 + std::chrono::seconds{6 - h}, lease, true);
  // Due times: 5 → +11 s, 4 → +12 s, 3 → +13 s, 2 → +14 s, 1 → +15 s.
  EXPECT_EQ(s.take_renewals(t0 + 15s, no_slack, 2, renew), (std::vector<hold_id>{5, 4}));
  EXPECT_EQ(s.take_renewals(t0 + 15s, no_slack, 2, renew), (std::vector<hold_id>{3, 2}));
  EXPECT_EQ(s.take_renewals(t0 + 15s, no_slack, 2, renew), std::vector<hold_id>{1});
  EXPECT_TRUE(s.take_renewals(t0 + 15s, no_slack, 2, renew).empty());
}

TEST(renewal_schedule, holds_due_together_go_in_batches_of_max_and_in_flight_ones_are_not_retaken) {
  renewal_schedule s;
  for (hold_id h = 0; h < 250; ++h) s.add(h, t0, lease, true);
  const time_point now = t0 + third;

  std::set<hold_id> taken;
  std::vector<std::size_t> batches;
  for (int i = 0; i < 4; ++i) {
    const auto batch = s.take_renewals(now, lease / 6, 100, renew);
    batches.push_back(batch.size());
    for (hold_id h : batch) EXPECT_TRUE(taken.insert(h).second) << "taken twice: " << h;
  }
  EXPECT_EQ(batches, (std::vector<std::size_t>{100, 100, 50, 0}));
  EXPECT_EQ(taken.size(), 250u);
  EXPECT_EQ(s.size(), 250u);

  // All in flight: only their trust deadline is left to watch.
  EXPECT_EQ(s.next_due(), t0 + lease - 302ms);
  EXPECT_TRUE(s.take_renewals(now + 5s, lease / 6, 100, renew).empty());

  // A confirmed hold comes back one period after the confirmation was sent, a failed one at its
  // retry time; the rest stay in flight.
  s.confirmed(0, now);
  s.failed(1, now + 1s);
  EXPECT_EQ(s.next_due(), now + 1s);
  EXPECT_EQ(s.take_renewals(now + 1s, no_slack, 100, renew), std::vector<hold_id>{1});
  EXPECT_TRUE(s.take_renewals(now + third - 1ns, no_slack, 100, renew).empty());
  EXPECT_EQ(s.take_renewals(now + third, no_slack, 100, renew), std::vector<hold_id>{0});
}

TEST(renewal_schedule, confirmed_moves_trust_and_next_renewal_from_the_send_time) {
  renewal_schedule s;
  s.add(1, t0, lease, true);
  const time_point sent = t0 + third;
  ASSERT_EQ(s.take_renewals(sent, no_slack, 100, renew), std::vector<hold_id>{1});
  // The reply comes later; what counts is when the renewal was sent.
  s.confirmed(1, sent);
  EXPECT_EQ(s.trusted_until(1), sent + lease - 302ms);
  EXPECT_EQ(s.next_due(), sent + third);
  EXPECT_TRUE(s.take_renewals(sent + third - 1ns, no_slack, 100, renew).empty());
  EXPECT_EQ(s.take_renewals(sent + third, no_slack, 100, renew), std::vector<hold_id>{1});
}

TEST(renewal_schedule, an_older_confirmation_does_not_shorten_trust) {
  renewal_schedule s;
  s.add(1, t0, lease, true);
  s.confirmed(1, t0 + 10s);
  const auto trusted = t0 + 10s + lease - 302ms;
  EXPECT_EQ(s.trusted_until(1), trusted);

  s.confirmed(1, t0 + 5s);  // a late, stale confirmation
  EXPECT_EQ(s.trusted_until(1), trusted);

  s.confirmed(1, t0 - 1s);  // even older than the acquire
  EXPECT_EQ(s.trusted_until(1), trusted);

  s.confirmed(1, t0 + 12s);  // a newer one does move it
  EXPECT_EQ(s.trusted_until(1), t0 + 12s + lease - 302ms);
}

TEST(renewal_schedule, confirmation_uses_the_lease_the_hold_was_added_with) {
  renewal_schedule s;
  constexpr clock_type::duration short_lease = 10s;  // in ns: 10s / 3 would round to 3 s
  s.add(1, t0, short_lease, true);
  s.add(2, t0, 60s, true);
  EXPECT_EQ(s.next_due(), t0 + short_lease / 3);
  s.confirmed(1, t0 + 3s);
  s.confirmed(2, t0 + 3s);
  EXPECT_EQ(s.trusted_until(1), t0 + 3s + 10s - 102ms);
  EXPECT_EQ(s.trusted_until(2), t0 + 3s + 60s - 602ms);
  EXPECT_EQ(s.next_due(), t0 + 3s + short_lease / 3);
}

TEST(renewal_schedule, failed_retries_at_the_given_time) {
  renewal_schedule s;
  s.add(1, t0, lease, true);
  ASSERT_EQ(s.take_renewals(t0 + third, no_slack, 100, renew), std::vector<hold_id>{1});
  EXPECT_TRUE(s.take_renewals(t0 + third, no_slack, 100, renew).empty());  // in flight

  s.failed(1, t0 + 12s);
  EXPECT_EQ(s.trusted_until(1), t0 + lease - 302ms);  // a failure does not extend trust
  EXPECT_EQ(s.next_due(), t0 + 12s);
  EXPECT_TRUE(s.take_renewals(t0 + 12s - 1ns, no_slack, 100, renew).empty());
  EXPECT_EQ(s.take_renewals(t0 + 12s, no_slack, 100, renew), std::vector<hold_id>{1});
}

TEST(renewal_schedule, take_expired_removes_holds_past_their_trusted_time) {
  renewal_schedule s;
  s.add(1, t0, lease, true);
  s.add(2, t0 + 1s, lease, false);
  s.add(3, t0 + 2s, lease, true);
  const time_point trusted1 = t0 + lease - 302ms;

  EXPECT_TRUE(s.take_expired(trusted1 - 1ns).empty());
  EXPECT_EQ(s.take_expired(trusted1), std::vector<hold_id>{1});
  EXPECT_EQ(s.size(), 2u);
  // Several at once, leaving the others.
  s.add(4, t0 + 1h, lease, true);
  EXPECT_EQ(sorted(s.take_expired(t0 + 2s + lease)), (std::vector<hold_id>{2, 3}));
  EXPECT_EQ(s.size(), 1u);
  EXPECT_TRUE(s.contains(4));
}

TEST(renewal_schedule, an_unconfirmed_renewal_does_not_save_a_hold_from_expiry) {
  renewal_schedule s;
  s.add(1, t0, lease, true);
  ASSERT_EQ(s.take_renewals(t0 + third, no_slack, 100, renew), std::vector<hold_id>{1});
  const time_point trusted = t0 + lease - 302ms;
  // In flight: its renewal time no longer counts, its deadline still does.
  EXPECT_EQ(s.next_due(), trusted);
  EXPECT_TRUE(s.take_expired(trusted - 1ns).empty());
  EXPECT_EQ(s.take_expired(trusted), std::vector<hold_id>{1});
  EXPECT_FALSE(s.contains(1));

  // A confirmation (or failure) arriving after the deadline does not bring it back.
  s.confirmed(1, t0 + third);
  s.failed(1, trusted + 1s);
  EXPECT_FALSE(s.contains(1));
  EXPECT_EQ(s.size(), 0u);
  EXPECT_EQ(s.next_due(), std::nullopt);
}

TEST(renewal_schedule, next_due_is_the_earliest_renewal_check_or_deadline) {
  renewal_schedule s;
  s.add(1, t0, lease, true);     // renew +10 s, trusted +29.698 s
  s.add(2, t0, 60s, false);      // check +20 s, trusted +59.398 s
  s.add(3, t0 + 5s, 6s, false);  // check +7 s, trusted +5 s + 6 s - 62 ms = +10.938 s
  EXPECT_EQ(s.next_due(), t0 + 7s);
  ASSERT_EQ(s.take_renewals(t0 + 7s, no_slack, 100, check), std::vector<hold_id>{3});
  EXPECT_EQ(s.next_due(), t0 + third);

  ASSERT_EQ(s.take_renewals(t0 + third, no_slack, 100, renew), std::vector<hold_id>{1});
  // 1 is in flight: its deadline counts, not its renewal; 3's deadline is earlier.
  EXPECT_EQ(s.next_due(), t0 + 11s - 62ms);
  s.remove(3);
  EXPECT_EQ(s.next_due(), t0 + 20s) << "2's check";
  s.failed(1, t0 + 10s + 500ms);
  EXPECT_EQ(s.next_due(), t0 + 10s + 500ms);
  s.remove(1);
  EXPECT_EQ(s.next_due(), t0 + 20s);
  ASSERT_EQ(s.take_renewals(t0 + 20s, no_slack, 100, check), std::vector<hold_id>{2});
  EXPECT_EQ(s.next_due(), t0 + 60s - 602ms);
  s.remove(2);
  EXPECT_EQ(s.next_due(), std::nullopt);
}

TEST(renewal_schedule, next_due_never_later_than_trust_even_if_renewal_is_later) {
  renewal_schedule s;
  s.add(1, t0, lease, true);
  s.failed(1, t0 + 1h);  // a retry far beyond the deadline
  EXPECT_EQ(s.next_due(), t0 + lease - 302ms);
}

TEST(renewal_schedule, remove_forgets_a_hold) {
  renewal_schedule s;
  s.add(1, t0, lease, true);
  s.add(2, t0, lease, true);
  s.remove(1);
  EXPECT_FALSE(s.contains(1));
  EXPECT_TRUE(s.contains(2));
  EXPECT_EQ(s.size(), 1u);
  EXPECT_EQ(s.trusted_until(1), std::nullopt);
  EXPECT_EQ(s.take_renewals(t0 + third, no_slack, 100, renew), std::vector<hold_id>{2});
  s.remove(2);  // while in flight
  EXPECT_EQ(s.size(), 0u);
  s.confirmed(2, t0 + third);  // its reply comes after the release: ignored
  EXPECT_FALSE(s.contains(2));
  EXPECT_TRUE(s.take_expired(t0 + 1h).empty());
  s.remove(3);  // unknown: no-op
  EXPECT_EQ(s.size(), 0u);
}

// 10,000 watchdog holds acquired uniformly over one renewal period and kept alive by a loop that
// jumps to next_due(), as the watchdog's timer would, and confirms each batch at once.
TEST(renewal_schedule, ten_thousand_holds_are_kept_alive_in_about_a_hundred_batches_per_period) {
  constexpr std::size_t holds = 10'000;
  constexpr std::size_t max_batch = 100;
  constexpr int periods = 3;
  renewal_schedule s;
  for (std::size_t i = 0; i < holds; ++i) {
    s.add(i, t0 + third * static_cast<std::int64_t>(i) / static_cast<std::int64_t>(holds), lease,
          true);
  }

  const time_point start = t0 + third;  // the first renewal comes due
  const time_point end = start + third * periods;
  std::vector<std::size_t> batches(periods, 0);
  std::vector<int> renewals(holds, 0);
  std::size_t expired = 0;
  std::size_t steps = 0;
  std::size_t biggest = 0;
  clock_type::duration least_margin = lease;  // least trust left over when a renewal was sent
  for (auto due = s.next_due(); due && *due < end; due = s.next_due()) {
    ASSERT_LT(++steps, 100'000u) << "the loop makes no progress";
    const time_point now = *due;
    expired += s.take_expired(now).size();
    const auto batch = s.take_renewals(now, lease / 6, max_batch, renew);
    ASSERT_FALSE(batch.empty()) << "next_due() pointed at a time with nothing to do";
    ASSERT_LE(batch.size(), max_batch);
    biggest = std::max(biggest, batch.size());
    const auto period = static_cast<std::size_t>((now - start) / third);
    ASSERT_LT(period, batches.size());
    ++batches[period];
    for (hold_id h : batch) {
      least_margin = std::min(least_margin, *s.trusted_until(h) - now);
      s.confirmed(h, now);
      ++renewals[h];
    }
  }
  expired += s.take_expired(end).size();

  std::ostringstream report;
  report << "batches per period:";
  for (auto b : batches) report << ' ' << b;
  report << "; biggest batch " << biggest << "; least trust left at renewal "
         << std::chrono::duration_cast<std::chrono::milliseconds>(least_margin).count() << " ms";
  SCOPED_TRACE(report.str());
  ::testing::Test::RecordProperty("batches_per_period", report.str());
  std::cout << "[          ] " << report.str() << '\n';

  EXPECT_EQ(expired, 0u);
  EXPECT_EQ(s.size(), holds);
  for (auto b : batches) EXPECT_LE(b, holds / max_batch * 12 / 10);
  EXPECT_GE(*std::min_element(batches.begin(), batches.end()), holds / max_batch);
  // Every hold was renewed once per period (a renewal sent up to `slack` early may add one).
  EXPECT_GE(*std::min_element(renewals.begin(), renewals.end()), periods);
  EXPECT_LE(*std::max_element(renewals.begin(), renewals.end()), periods + 1);
  // Renewals went out with at least half the lease of trust left.
  EXPECT_GE(least_margin, lease / 2);
}

// A cluster's watchdog tops a slot's script up with the slot's other holds: of the candidates,
// those due within the slack, not in flight and of the same kind, earliest first, at most
// max_batch; unknown ids are skipped.
TEST(renewal_schedule, take_renewals_of_claims_the_due_candidates_only) {
  renewal_schedule s;
  s.add(1, t0, lease, renew);        // due at t0 + 10 s
  s.add(2, t0 + 2s, lease, renew);   // due at t0 + 12 s
  s.add(3, t0 + 20s, lease, renew);  // due at t0 + 30 s: beyond the slack
  s.add(4, t0, lease, false);        // an explicit lease: checked, not renewed
  s.add(5, t0 + 1s, lease, renew);   // due at t0 + 11 s, but already in flight
  ASSERT_EQ(s.take_renewals_of({5}, t0 + third, no_slack, 100, renew).size(), 0u);
  ASSERT_EQ(s.take_renewals_of({5}, t0 + 11s, no_slack, 100, renew), std::vector<hold_id>{5});
  const std::vector<hold_id> candidates{3, 2, 99, 1, 4, 5};
  EXPECT_EQ(s.take_renewals_of(candidates, t0 + third, third, 100, renew),
            (std::vector<hold_id>{1, 2}));
  EXPECT_TRUE(s.take_renewals_of(candidates, t0 + third, third, 100, renew).empty())
      << "both are in flight now";
  s.confirmed(1, t0 + third);
  s.confirmed(2, t0 + third);
  EXPECT_EQ(s.take_renewals_of(candidates, t0 + 2 * third, third, 1, renew),
            std::vector<hold_id>{1})
      << "at most max_batch, earliest first";
  EXPECT_EQ(s.take_renewals_of(candidates, t0, lease, 100, check), std::vector<hold_id>{4});
}

}  // namespace
