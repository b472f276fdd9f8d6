// dlock/metrics.hpp — what a client has done, as counters and histograms: client::metrics().
//
// A snapshot costs a few hundred relaxed atomic loads (no lock, no strand hop): read it every
// second if you like. Counters only grow over a client's life; compare two snapshots for rates.
// Histograms share one set of bucket bounds (seconds); `buckets[i]` counts observations in
// (bounds[i-1], bounds[i]], the last one everything above the last bound, and `count` is their
// sum. dlock::prometheus (dlock/prometheus.hpp, an optional component) exports all of it.
//
//   auto m = client.metrics();
//   const auto& mx = m.of(dlock::sync_kind::mutex);
//   double mean_wait = mx.wait.count ? mx.wait.sum / mx.wait.count : 0;  // seconds
//
// docs/metrics.md says where each is counted, and what is not.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <system_error>

#include "dlock/error.hpp"

namespace dlock {

// The synchronizers, as metrics and events tell them apart. A shared_mutex's two sides are two
// kinds; multi_lock and red_lock count their acquisitions as theirs, and their members' holds
// (hold time, renewals, losses) as theirs too.
enum class sync_kind : std::uint8_t {
  mutex,
  fair_mutex,
  shared_read,   // shared_mutex, the read side
  shared_write,  // shared_mutex, the write side
  leased_semaphore,
  counting_semaphore,
  latch,  // an "acquisition" is a wait that found the latch open
  multi_lock,
  red_lock,
};
inline constexpr std::size_t sync_kind_count = 9;
// "mutex", "fair_mutex", "shared_read", ...: the label values of the Prometheus export.
std::string_view to_string(sync_kind k) noexcept;

// How an acquisition (lock, try_lock*, acquire, wait, and their async forms) ended.
enum class acquire_outcome : std::uint8_t {
  acquired,   // got it (a latch: found open)
  busy,       // a try without waiting, or a wait that ran out: timeout / false
  cancelled,  // stop_token, Asio cancellation, or the client shut down
  failed,     // any other error (errors_by_errc() says which)
};
inline constexpr std::size_t acquire_outcome_count = 4;
std::string_view to_string(acquire_outcome o) noexcept;

// Why a held lease was reported lost (lease::lost(), lease_lost from unlock).
enum class loss_cause : std::uint8_t {
  not_held,     // Redis answered that the hold is gone (expired there, deleted, failed over)
  unconfirmed,  // no renewal was confirmed before the trusted time ran out (Redis unreachable,
                // replicas short under on_shortfall::fail, the process paused)
};
inline constexpr std::size_t loss_cause_count = 2;
std::string_view to_string(loss_cause c) noexcept;

struct histogram {
  static constexpr std::array<double, 15> bounds{
      0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10, 30, 120};
  std::array<std::uint64_t, bounds.size() + 1> buckets{};
  std::uint64_t count = 0;
  double sum = 0;  // seconds
};

struct kind_metrics {
  std::array<std::uint64_t, acquire_outcome_count> acquisitions{};  // by acquire_outcome
  // From the call to its outcome, for every outcome.
  histogram wait;
  // From acquisition to the last release's confirmation (or the loss), for leased kinds.
  histogram hold;
  // From the release message that woke a waiter (received) to its acquisition, for acquisitions
  // that followed such a wake-up: this client's share of a hand-off.
  histogram handoff;
  std::uint64_t renewals_sent = 0;     // holds renewed or checked (one per hold per renewal)
  std::uint64_t renewals_batched = 0;  // ... of which in a script together with other holds
  std::uint64_t renewals_failed = 0;   // ... that failed: no answer in time, an error, or
                                       // replicas short of wait_replicas
  std::array<std::uint64_t, loss_cause_count> leases_lost{};  // by loss_cause

  std::uint64_t acquired() const noexcept {
    return acquisitions[static_cast<std::size_t>(acquire_outcome::acquired)];
  }
  std::uint64_t lost() const noexcept { return leases_lost[0] + leases_lost[1]; }
};

// errc values run from 1 to below this (error.hpp); errors[0] counts other categories.
inline constexpr std::size_t errc_slots = 64;
// Where `ec` is counted in metrics::errors: its errc value, or 0 for another category.
inline std::size_t errc_slot(std::error_code ec) noexcept {
  const bool ours = ec.category() == error_category() && ec.value() > 0 &&
                    static_cast<std::size_t>(ec.value()) < errc_slots;
  return ours ? static_cast<std::size_t>(ec.value()) : 0;
}

struct metrics {
  std::array<kind_metrics, sync_kind_count> kinds{};
  std::uint64_t commands_sent = 0;     // requests written to command connections
  std::uint64_t script_reloads = 0;    // EVALSHA answered NOSCRIPT and resent as EVAL
  std::uint64_t reconnects = 0;        // connections re-established after a loss
  std::uint64_t disconnects = 0;       // established connections lost
  std::uint64_t subscribe_errors = 0;  // SUBSCRIBE / SSUBSCRIBE refused
  std::uint64_t redirects = 0;         // MOVED / ASK followed (Redis Cluster)
  std::uint64_t failovers = 0;         // master changes followed (Sentinel)
  // Commands completed with an error, by errc (an error reply or a transport error).
  std::array<std::uint64_t, errc_slots> errors{};

  const kind_metrics& of(sync_kind k) const noexcept { return kinds[static_cast<std::size_t>(k)]; }
  std::uint64_t errors_of(errc e) const noexcept { return errors[errc_slot(e)]; }
};

}  // namespace dlock
