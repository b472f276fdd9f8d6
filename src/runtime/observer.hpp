// What a client counts and tells (metrics.hpp, events.hpp): one observer per client, an Asio
// service of the client's io_context, so that every part of the client (links, router, watchdog,
// acquisitions) reaches it through the executor it already has, without plumbing.
//
// Counters are relaxed atomics: any thread may bump them and snapshot() reads them without a
// lock (a snapshot taken while a histogram is being updated may see its sum a step behind its
// buckets). Events are given on the strand, where every caller of emit() runs.
#pragma once

#include <asio/execution_context.hpp>
#include <atomic>
#include <chrono>
#include <functional>
#include <string>

#include "dlock/config.hpp"
#include "dlock/detail/lock_base.hpp"
#include "dlock/metrics.hpp"
#include "runtime/hold.hpp"
#include "transport/link.hpp"

namespace dlock::detail {

using atomic_counter = std::atomic<std::uint64_t>;

class atomic_histogram {
 public:
  void observe(std::chrono::steady_clock::duration d) noexcept;
  histogram read() const noexcept;

 private:
  std::array<atomic_counter, histogram::bounds.size() + 1> buckets_{};
  atomic_counter sum_ns_{0};
};

struct kind_counters {
  std::array<atomic_counter, acquire_outcome_count> acquisitions{};
  atomic_histogram wait, hold, handoff;
  atomic_counter renewals_sent{0}, renewals_batched{0}, renewals_failed{0};
  std::array<atomic_counter, loss_cause_count> leases_lost{};
};

class observer : public asio::execution_context::service {
 public:
  using key_type = observer;
  static asio::execution_context::id id;

  explicit observer(asio::execution_context& ctx) : asio::execution_context::service(ctx) {}

  // Set once by the client before its I/O thread starts.
  void set_config(const config& cfg) { cfg_ = &cfg; }

  kind_counters& of(sync_kind k) noexcept { return kinds_[static_cast<std::size_t>(k)]; }
  void count_error(std::error_code ec) noexcept;
  // An acquisition started at `started` ended with `ec`; `busy`: it ended because the lock was
  // held until its deadline (not because of an error); `woken_at`: when a release message last
  // woke it (a hand-off), if one did.
  void acquisition(sync_kind k, std::chrono::steady_clock::time_point started, std::error_code ec,
                   bool busy, std::optional<std::chrono::steady_clock::time_point> woken_at = {});

  // Whether config::on_event is set (callers skip building an event's message otherwise).
  bool wants_events() const noexcept;
  // Strand only: gives `e` to config::on_event.
  void emit(const event& e) const;
  metrics snapshot() const noexcept;

  atomic_counter commands_sent{0}, script_reloads{0}, reconnects{0}, disconnects{0}, redirects{0},
      failovers{0};
  std::array<atomic_counter, errc_slots> errors{};

 private:
  void shutdown() override {}

  const config* cfg_ = nullptr;
  std::array<kind_counters, sync_kind_count> kinds_{};
};

// The observer of the client whose strand (or any executor of its io_context) `ex` is.
observer& observer_of(const transport::executor_type& ex);

// Strand only: marks `h` lost (hold.hpp's mark_lost) and, if this call is the one that did,
// counts it, records its hold time, and gives a lease_lost event.
void report_lost(observer& obs, hold_state& h, loss_cause cause);
// Strand only: the hold's last release was confirmed (records its hold time).
void report_released(observer& obs, const hold_state& h);

}  // namespace dlock::detail
