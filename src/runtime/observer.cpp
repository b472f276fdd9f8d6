#include "runtime/observer.hpp"

#include <asio/error.hpp>
#include <asio/execution/context.hpp>
#include <asio/query.hpp>
#include <cstdio>
#include <exception>

namespace dlock::detail {

asio::execution_context::id observer::id;

namespace {
constexpr auto relaxed = std::memory_order_relaxed;
}

void atomic_histogram::observe(std::chrono::steady_clock::duration d) noexcept {
  const double s = std::chrono::duration<double>(d).count();
  std::size_t i = 0;
  while (i < histogram::bounds.size() && s > histogram::bounds[i]) ++i;
  buckets_[i].fetch_add(1, relaxed);
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
  sum_ns_.fetch_add(ns > 0 ? static_cast<std::uint64_t>(ns) : 0, relaxed);
}

histogram atomic_histogram::read() const noexcept {
  histogram h;
  for (std::size_t i = 0; i < buckets_.size(); ++i) {
    h.buckets[i] = buckets_[i].load(relaxed);
    h.count += h.buckets[i];
  }
  h.sum = static_cast<double>(sum_ns_.load(relaxed)) / 1e9;
  return h;
}

void observer::count_error(std::error_code ec) noexcept {
  errors[errc_slot(ec)].fetch_add(1, relaxed);
}

void observer::acquisition(sync_kind k, std::chrono::steady_clock::time_point started,
                           std::error_code ec, bool busy,
                           std::optional<std::chrono::steady_clock::time_point> woken_at) {
  auto& c = of(k);
  const auto now = std::chrono::steady_clock::now();
  auto outcome = acquire_outcome::failed;
  if (!ec) {
    outcome = acquire_outcome::acquired;
  } else if (busy) {
    outcome = acquire_outcome::busy;
  } else if (ec == errc::shutdown || ec == asio::error::operation_aborted ||
             ec == std::errc::operation_canceled) {
    outcome = acquire_outcome::cancelled;
  }
  c.acquisitions[static_cast<std::size_t>(outcome)].fetch_add(1, relaxed);
  c.wait.observe(now - started);
  if (!ec && woken_at) c.handoff.observe(now - *woken_at);
}

bool observer::wants_events() const noexcept { return cfg_ && cfg_->on_event; }

void observer::emit(const event& e) const {
  if (!wants_events()) return;
  try {
    cfg_->on_event(e);
  } catch (const std::exception& x) {
    std::fprintf(stderr, "dlock: an on_event callback threw: %s\n", x.what());
  } catch (...) {
    std::fprintf(stderr, "dlock: an on_event callback threw\n");
  }
}

metrics observer::snapshot() const noexcept {
  metrics m;
  for (std::size_t k = 0; k < kinds_.size(); ++k) {
    const auto& from = kinds_[k];
    auto& to = m.kinds[k];
    for (std::size_t i = 0; i < to.acquisitions.size(); ++i) {
      to.acquisitions[i] = from.acquisitions[i].load(relaxed);
    }
    to.wait = from.wait.read();
    to.hold = from.hold.read();
    to.handoff = from.handoff.read();
    to.renewals_sent = from.renewals_sent.load(relaxed);
    to.renewals_batched = from.renewals_batched.load(relaxed);
    to.renewals_failed = from.renewals_failed.load(relaxed);
    for (std::size_t i = 0; i < to.leases_lost.size(); ++i) {
      to.leases_lost[i] = from.leases_lost[i].load(relaxed);
    }
  }
  m.commands_sent = commands_sent.load(relaxed);
  m.script_reloads = script_reloads.load(relaxed);
  m.reconnects = reconnects.load(relaxed);
  m.disconnects = disconnects.load(relaxed);
  m.redirects = redirects.load(relaxed);
  m.failovers = failovers.load(relaxed);
  for (std::size_t i = 0; i < errors.size(); ++i) m.errors[i] = errors[i].load(relaxed);
  return m;
}

observer& observer_of(const transport::executor_type& ex) {
  return asio::use_service<observer>(asio::query(ex, asio::execution::context));
}

namespace {
std::optional<std::chrono::steady_clock::duration> held_for(const hold_state& h) {
  const auto at = h.acquired_at.load();
  if (at == 0) return std::nullopt;
  return std::chrono::steady_clock::now().time_since_epoch() -
         std::chrono::steady_clock::duration{at};
}
}  // namespace

void report_lost(observer& obs, hold_state& h, loss_cause cause) {
  if (h.lost) return;
  mark_lost(h);
  const auto held = held_for(h);
  if (!held) return;  // never handed to a holder: nobody lost it
  auto& c = obs.of(h.metric);
  c.leases_lost[static_cast<std::size_t>(cause)].fetch_add(1, relaxed);
  c.hold.observe(*held);
  if (!obs.wants_events()) return;
  const std::string message = "lease lost: " + std::string{to_string(h.metric)} + " " + h.name +
                              " (" + std::string{to_string(cause)} + ")";
  event e{event_type::lease_lost, message};
  e.kind = h.metric;
  e.name = h.name;
  e.cause = cause;
  obs.emit(e);
}

void report_released(observer& obs, const hold_state& h) {
  if (h.lost) return;
  if (const auto held = held_for(h)) obs.of(h.metric).hold.observe(*held);
}

}  // namespace dlock::detail
