// transport::backoff: jittered exponential reconnect delays.
#include "transport/backoff.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

namespace {

using namespace std::chrono_literals;
using dlock::transport::backoff;
using ms = std::chrono::milliseconds;

// The un-jittered step of attempt `n` (0-based): min doubled n times, capped at max.
ms step_of(unsigned n, ms min, ms max) {
  ms step = min;
  for (unsigned i = 0; i < n && step < max; ++i) step *= 2;
  return step > max ? max : step;
}

void expect_in_step(ms delay, ms step, unsigned attempt) {
  EXPECT_GE(delay, step / 2) << "attempt " << attempt;
  EXPECT_LE(delay, step) << "attempt " << attempt;
}

TEST(backoff, delays_stay_within_half_step_and_step) {
  backoff b{100ms, 1000ms, 42};
  const ms steps[] = {100ms, 200ms, 400ms, 800ms, 1000ms, 1000ms, 1000ms, 1000ms};
  unsigned attempt = 0;
  for (ms step : steps) {
    expect_in_step(b.next(), step, attempt);
    ++attempt;
    EXPECT_EQ(b.attempts(), attempt);
  }
}

TEST(backoff, step_doubles_from_min_and_is_capped_at_max) {
  // Over many seeds the largest delay seen for an attempt is close to its step and never above.
  constexpr unsigned attempts = 10;
  std::vector<ms> largest(attempts, 0ms), smallest(attempts, 1h);
  for (std::uint64_t seed = 1; seed <= 200; ++seed) {
    backoff b{50ms, 2000ms, seed};
    for (unsigned n = 0; n < attempts; ++n) {
      const ms d = b.next();
      largest[n] = std::max(largest[n], d);
      smallest[n] = std::min(smallest[n], d);
    }
  }
  for (unsigned n = 0; n < attempts; ++n) {
    const ms step = step_of(n, 50ms, 2000ms);
    EXPECT_LE(largest[n], step) << n;
    EXPECT_GE(smallest[n], step / 2) << n;
    EXPECT_GT(largest[n], step * 9 / 10) << n;   // the whole range is used...
    EXPECT_LT(smallest[n], step * 6 / 10) << n;  // ...at both ends
  }
  EXPECT_EQ(step_of(0, 50ms, 2000ms), 50ms);
  EXPECT_EQ(step_of(5, 50ms, 2000ms), 1600ms);
  EXPECT_EQ(step_of(6, 50ms, 2000ms), 2000ms);
  EXPECT_EQ(step_of(9, 50ms, 2000ms), 2000ms);
}

TEST(backoff, reset_restarts_from_min) {
  backoff b{100ms, 10s, 7};
  for (int i = 0; i < 6; ++i) b.next();
  EXPECT_EQ(b.attempts(), 6u);
  b.reset();
  EXPECT_EQ(b.attempts(), 0u);
  expect_in_step(b.next(), 100ms, 0);
  expect_in_step(b.next(), 200ms, 1);
  EXPECT_EQ(b.attempts(), 2u);
}

TEST(backoff, stays_at_max_after_many_attempts) {
  backoff b{1ms, 30s, 3};
  for (unsigned i = 0; i < 1000; ++i) {
    const ms d = b.next();
    ASSERT_LE(d, 30s) << i;
    ASSERT_GE(d, 0ms) << i;
  }
  for (unsigned i = 0; i < 20; ++i) expect_in_step(b.next(), 30s, 1000 + i);
}

TEST(backoff, min_equal_to_max) {
  backoff b{500ms, 500ms, 9};
  for (unsigned i = 0; i < 5; ++i) expect_in_step(b.next(), 500ms, i);
}

TEST(backoff, seeds_give_different_sequences_each_in_range) {
  backoff a{100ms, 5s, 1};
  backoff b{100ms, 5s, 2};
  std::vector<ms> sa, sb;
  for (unsigned n = 0; n < 20; ++n) {
    sa.push_back(a.next());
    sb.push_back(b.next());
    const ms step = step_of(n, 100ms, 5s);
    expect_in_step(sa.back(), step, n);
    expect_in_step(sb.back(), step, n);
  }
  EXPECT_NE(sa, sb);
}

TEST(backoff, same_seed_same_sequence) {
  backoff a{100ms, 5s, 1234};
  backoff b{100ms, 5s, 1234};
  for (unsigned n = 0; n < 20; ++n) EXPECT_EQ(a.next(), b.next()) << n;
}

}  // namespace
