#include "runtime/watchdog.hpp"

#include <algorithm>
#include <map>
#include <vector>

#include "dlock/error.hpp"
#include "dlock/keys.hpp"
#include "runtime/observer.hpp"
#include "scripts/runner.hpp"

namespace dlock::detail {
namespace {
constexpr std::size_t max_batch = 100;
constexpr auto retry_soon = std::chrono::milliseconds{100};
}  // namespace

watchdog::watchdog(transport::link::executor_type strand, const scripts::runner& scripts,
                   std::chrono::milliseconds command_timeout,
                   std::chrono::milliseconds watchdog_lease, bool per_slot)
    : strand_{std::move(strand)},
      scripts_{scripts},
      command_timeout_{command_timeout},
      watchdog_lease_{watchdog_lease},
      per_slot_{per_slot},
      obs_{observer_of(strand_)},
      timer_{strand_} {}

void watchdog::replicate_with(confirmer confirm, bool accept,
                              std::chrono::milliseconds wait_timeout) {
  confirm_ = std::move(confirm);
  accept_shortfall_ = accept;
  // Sooner than the next period (the trust ends two thirds of a lease after the last renewal
  // that counted), but each attempt may hold the connection for wait_timeout.
  shortfall_retry_ = std::max(wait_timeout, watchdog_lease_ / 6);
}

void watchdog::add(const std::shared_ptr<hold_state>& h, clock::time_point sent) {
  if (stopped_) return;
  schedule_.add(h->id, sent, h->lease, h->watchdog);
  holds_[h->id] = h;
  index(*h);
  publish(*h);
  arm_by(*schedule_.due(h->id));
}

// A confirmation only moves the hold's times later, and a removal only takes one away: the timer
// may then fire for nothing, which is harmless (it re-scans), so neither re-scans now. Only
// add/restore bring the next due time forward, which keeps taking and releasing locks O(1)
// however many the client holds.
void watchdog::refreshed(hold_state& h, clock::time_point sent, std::chrono::milliseconds lease) {
  if (!schedule_.contains(h.id)) return;
  schedule_.confirmed(h.id, sent);
  schedule_.checked(h.id, sent, lease.count());
  publish(h);
}

void watchdog::publish(hold_state& h) const {
  if (auto t = schedule_.trusted_until(h.id)) h.trusted_until = t->time_since_epoch().count();
}

std::optional<renewal_schedule::entry> watchdog::remove(const hold_state& h) {
  auto saved = schedule_.snapshot(h.id);
  schedule_.remove(h.id);
  holds_.erase(h.id);
  at_risk_.erase(h.id);
  unindex(h);
  return saved;
}

void watchdog::restore(const std::shared_ptr<hold_state>& h, const renewal_schedule::entry& e) {
  if (stopped_ || h->lost) return;
  schedule_.restore(h->id, e);
  holds_[h->id] = h;
  index(*h);
  publish(*h);
  arm_by(*schedule_.due(h->id));
}

std::optional<watchdog::clock::time_point> watchdog::trusted_until(const hold_state& h) const {
  return schedule_.trusted_until(h.id);
}

void watchdog::stop() {
  stopped_ = true;
  *alive_ = false;
  timer_.cancel();
}

void watchdog::arm_by(clock::time_point t) {
  if (stopped_ || t >= armed_for_) return;
  arm(t);
}

void watchdog::rearm() {
  if (stopped_) return;
  auto next = schedule_.next_due();
  if (!next) {
    armed_for_ = clock::time_point::max();
    timer_.cancel();
    return;
  }
  if (*next != armed_for_) arm(*next);
}

void watchdog::arm(clock::time_point at) {
  armed_for_ = at;
  timer_.expires_at(at);
  timer_.async_wait([this, alive = alive_, at](std::error_code ec) {
    if (ec || !*alive || armed_for_ != at) return;
    armed_for_ = clock::time_point::max();
    on_timer();
  });
}

void watchdog::on_timer() {
  const auto now = clock::now();
  for (auto h : schedule_.take_expired(now)) lose(h, loss_cause::unconfirmed);
  send_due(now, true);
  send_due(now, false);
  rearm();
}

// Renews (or checks) a little early rather than in many small batches: anything due within
// lease/6 goes now (the period is lease/3, so the lease never runs below half). The last batch is
// topped up with the holds due next (up to a period ahead), so that holds taken at different
// times converge into full batches: about N/100 scripts per period for N holds.
void watchdog::send_due(clock::time_point now, bool renew) {
  for (;;) {
    auto batch = schedule_.take_renewals(now, watchdog_lease_ / 6, max_batch, renew);
    if (batch.empty()) break;
    const bool last = batch.size() < max_batch;
    if (last) {
      auto more =
          schedule_.take_renewals(now, watchdog_lease_ / 3, max_batch - batch.size(), renew, true);
      batch.insert(batch.end(), more.begin(), more.end());
    }
    send(batch, renew, now);
    if (last) break;
  }
}

void watchdog::check_all() {
  if (stopped_) return;
  std::vector<renewal_schedule::id> batch;
  for (const auto& [id, h] : holds_) {
    batch.push_back(id);
    if (batch.size() == max_batch) {
      send(batch, false);
      batch.clear();
    }
  }
  if (!batch.empty()) send(batch, false);
}

// In a cluster one script covers one slot: the batch goes as one script per slot in it, each
// topped up (when `top_up_at` is given) with the slot's other holds due within a period.
void watchdog::send(const std::vector<renewal_schedule::id>& batch, bool renew,
                    std::optional<clock::time_point> top_up_at) {
  if (!per_slot_) return send_group(batch, renew);
  std::map<std::uint16_t, std::vector<renewal_schedule::id>> by_slot;
  for (auto id : batch) by_slot[keys::slot(holds_.at(id)->name)].push_back(id);
  for (auto& [slot, group] : by_slot) {
    if (top_up_at && group.size() < max_batch) {
      auto more = schedule_.take_renewals_of(by_slot_.at(slot), *top_up_at, watchdog_lease_ / 3,
                                             max_batch - group.size(), renew);
      group.insert(group.end(), more.begin(), more.end());
    }
    send_group(group, renew);
  }
}

// The holds of each slot (cluster only), for send()'s top-ups.
void watchdog::index(const hold_state& h) {
  if (per_slot_) by_slot_[keys::slot(h.name)].push_back(h.id);
}

void watchdog::unindex(const hold_state& h) {
  if (!per_slot_) return;
  auto it = by_slot_.find(keys::slot(h.name));
  if (it == by_slot_.end()) return;
  std::erase(it->second, h.id);
  if (it->second.empty()) by_slot_.erase(it);
}

void watchdog::send_group(const std::vector<renewal_schedule::id>& batch, bool renew) {
  std::vector<std::string_view> keys, args;
  std::vector<std::string> holds;  // the holds' arguments (lock_renew.lua)
  holds.reserve(batch.size());
  // Only watchdog holds are renewed, and they all have the watchdog lease.
  const auto lease = renew ? std::to_string(watchdog_lease_.count()) : std::string{"0"};
  args.push_back(lease);
  auto& obs = obs_;
  for (auto id : batch) {
    const auto& h = holds_.at(id);
    auto& counts = obs.of(h->metric);
    counts.renewals_sent.fetch_add(1, std::memory_order_relaxed);
    if (batch.size() > 1) counts.renewals_batched.fetch_add(1, std::memory_order_relaxed);
    keys.push_back(h->name);
    holds.push_back(renew_arg(*h));
    args.push_back(holds.back());
  }
  const auto sent = clock::now();
  if (renew) ++renewals_sent_;
  scripts_.eval(scripts::lock_renew, keys, args, command_timeout_,
                [this, alive = alive_, batch, sent, renew](std::error_code ec, reply r) {
                  if (*alive) on_answer(batch, renew, sent, ec, r);
                });
}

void watchdog::on_answer(const std::vector<renewal_schedule::id>& batch, bool renew,
                         clock::time_point sent, std::error_code ec, const reply& r) {
  const bool answered = !ec && r.is_array() && r.elements().size() == batch.size();
  renewed to_replicate;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const auto id = batch[i];
    if (!schedule_.contains(id)) continue;  // released meanwhile
    if (!answered) {
      // Unknown: try again soon; the trusted time still bounds the hold.
      schedule_.failed(id, clock::now() + retry_soon);
      at_risk(id, ec ? ec : make_error_code(errc::protocol_error));
      continue;
    }
    const auto& e = r.elements()[i];
    const auto pttl = e.is_integer() ? e.integer() : -2;
    if (pttl == -2) {
      schedule_.remove(id);
      lose(id, loss_cause::not_held);
      continue;
    }
    if (renew && confirm_) {
      to_replicate.emplace_back(id, pttl);  // in flight until WAIT answers
      continue;
    }
    if (renew) schedule_.confirmed(id, sent);
    schedule_.checked(id, sent, pttl);
    at_risk_.erase(id);  // a renewal (or check) got through: the next failure is told again
    if (auto it = holds_.find(id); it != holds_.end()) publish(*it->second);
  }
  if (!to_replicate.empty()) {
    confirm_([this, alive = alive_, holds = std::move(to_replicate), sent](std::error_code,
                                                                           bool enough) {
      if (*alive) on_replicated(holds, sent, enough);
    });
  }
  rearm();
}

void watchdog::on_replicated(const renewed& holds, clock::time_point sent, bool enough) {
  for (const auto& [id, pttl] : holds) {
    if (!schedule_.contains(id)) continue;
    auto it = holds_.find(id);
    if (!enough && it != holds_.end()) it->second->replicated = false;
    if (enough || accept_shortfall_) {
      schedule_.confirmed(id, sent);
      schedule_.checked(id, sent, pttl);
      at_risk_.erase(id);
    } else {
      schedule_.failed(id, clock::now() + shortfall_retry_);
      at_risk(id, errc::no_replicas);
    }
    if (it != holds_.end()) publish(*it->second);
  }
  rearm();
}

void watchdog::lose(renewal_schedule::id id, loss_cause cause) {
  auto it = holds_.find(id);
  if (it == holds_.end()) return;
  auto h = std::move(it->second);
  holds_.erase(it);
  at_risk_.erase(id);
  unindex(*h);
  ++leases_lost_;
  report_lost(obs_, *h, cause);
}

// A renewal (or check) of a hold still trusted failed: counted each time, and told as
// lease_at_risk once until one gets through again (retries come every 100 ms in an outage).
void watchdog::at_risk(renewal_schedule::id id, std::error_code why) {
  auto it = holds_.find(id);
  if (it == holds_.end()) return;
  const auto& h = *it->second;
  auto& obs = obs_;
  obs.of(h.metric).renewals_failed.fetch_add(1, std::memory_order_relaxed);
  if (!at_risk_.insert(id).second || !obs.wants_events()) return;
  const auto until = schedule_.trusted_until(id);
  const auto left = until ? std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::max(*until - clock::now(), clock::duration::zero()))
                          : std::chrono::milliseconds{0};
  const auto message = "lease at risk: " + std::string{to_string(h.metric)} + " " + h.name +
                       ": renewal failed (" + why.message() + "), trusted for " +
                       std::to_string(left.count()) + " ms more";
  event e{event_type::lease_at_risk, message};
  e.kind = h.metric;
  e.name = h.name;
  e.time_left = left;
  e.error = why;
  obs.emit(e);
}

}  // namespace dlock::detail
