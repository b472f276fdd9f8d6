#include "runtime/watchdog.hpp"

#include "dlock/error.hpp"
#include "scripts/runner.hpp"

namespace dlock::detail {

namespace {
constexpr std::size_t max_batch = 100;
}

watchdog::watchdog(transport::link::executor_type strand, const scripts::runner& scripts,
                   std::chrono::milliseconds command_timeout,
                   std::chrono::milliseconds watchdog_lease)
    : strand_{std::move(strand)},
      scripts_{scripts},
      command_timeout_{command_timeout},
      watchdog_lease_{watchdog_lease},
      timer_{strand_} {}

void watchdog::note_added(const std::shared_ptr<hold_state>& h, clock::time_point sent) {
  take_note({h, hold_note::added, sent}, renewal_schedule::first_due(sent, h->lease, h->watchdog));
}

void watchdog::note_refreshed(const std::shared_ptr<hold_state>& h, clock::time_point sent) {
  take_note({h, hold_note::refreshed, sent}, std::nullopt);
}

void watchdog::note_released(const std::shared_ptr<hold_state>& h) {
  take_note({h, hold_note::released, {}}, std::nullopt);
}

void watchdog::take_note(hold_note n, std::optional<clock::time_point> due) {
  constexpr std::size_t max_waiting = 4096;  // bounds the notes kept between timer firings
  bool wake = false;
  {
    std::lock_guard lock{notes_mu_};
    auto [it, fresh] = notes_.try_emplace(n.hold->id, n);
    if (!fresh) {
      // Coalesce per hold: added then refreshed is added later; added then released never
      // reaches the schedule.
      auto& old = it->second;
      if (n.what == hold_note::refreshed) {
        old.sent = std::max(old.sent, n.sent);
      } else if (n.what == hold_note::released && old.what == hold_note::added) {
        notes_.erase(it);
      } else {
        old = n;
      }
    }
    wake = (due && *due < notes_armed_) || notes_.size() > max_waiting;
    if (wake && drain_posted_) wake = false;
    if (wake) drain_posted_ = true;
  }
  if (wake) {
    post_drain();
  }
}

void watchdog::apply_notes() {
  std::unordered_map<renewal_schedule::id, hold_note> notes;
  {
    std::lock_guard lock{notes_mu_};
    if (notes_.empty()) {
      drain_posted_ = false;
      return;
    }
    notes.swap(notes_);
    drain_posted_ = false;
  }
  for (auto& [id, n] : notes) {
    auto& h = n.hold;
    switch (n.what) {
      case hold_note::added:
        if (!stopped_ && !h->lost) {
          schedule_.add(h->id, n.sent, h->lease, h->watchdog);
          holds_[h->id] = h;
          publish(*h);
        }
        break;
      case hold_note::refreshed:
        if (schedule_.contains(h->id)) {
          schedule_.confirmed(h->id, n.sent);
          publish(*h);
        }
        break;
      case hold_note::released:
        schedule_.remove(h->id);
        holds_.erase(h->id);
        break;
    }
  }
}

void watchdog::post_drain() {
  asio::post(strand_, [this, alive = alive_] {
    if (!*alive) return;
    apply_notes();
    rearm();
  });
}

void watchdog::publish_armed(clock::time_point at) {
  bool pending = false;
  {
    std::lock_guard lock{notes_mu_};
    notes_armed_ = at;
    // Notes that came after the last apply_notes() compared their due time with the old one.
    pending = !notes_.empty() && !drain_posted_;
    if (pending) drain_posted_ = true;
  }
  if (pending) {
    post_drain();
  }
}

void watchdog::add(const std::shared_ptr<hold_state>& h, clock::time_point sent) {
  apply_notes();
  if (stopped_) return;
  schedule_.add(h->id, sent, h->lease, h->watchdog);
  holds_[h->id] = h;
  publish(*h);
  arm_by(*schedule_.due(h->id));
}

void watchdog::add_granted(const std::shared_ptr<hold_state>& h, clock::time_point start,
                           clock::duration window) {
  apply_notes();
  if (stopped_) return;
  schedule_.add_granted(h->id, start, window, h->lease, h->watchdog);
  holds_[h->id] = h;
  publish(*h);
  arm_by(*schedule_.due(h->id));
}

void watchdog::lose(const hold_state& h) {
  apply_notes();
  if (!schedule_.contains(h.id)) return;
  schedule_.remove(h.id);
  lose(h.id);
}

// A confirmation only moves the hold's times later, and a removal only takes one away: the
// timer may then fire for nothing, which is harmless (it re-scans), so neither re-scans now.
// Only add/restore can bring the next due time forward. This keeps taking and releasing locks
// O(1) however many the client holds (a full scan per change made N locks cost O(N^2)).
void watchdog::refreshed(hold_state& h, clock::time_point sent) {
  apply_notes();
  if (!schedule_.contains(h.id)) {
    if (h.releasing.load() && h.count.load() > 0) {
      auto& at = refreshed_while_out_[h.id];
      at = std::max(at, sent);
    }
    return;
  }
  schedule_.confirmed(h.id, sent);
  publish(h);
}

void watchdog::publish(hold_state& h) const {
  if (auto t = schedule_.trusted_until(h.id)) h.trusted_until = t->time_since_epoch().count();
}

std::optional<renewal_schedule::entry> watchdog::remove(const hold_state& h) {
  apply_notes();
  auto saved = schedule_.snapshot(h.id);
  schedule_.remove(h.id);
  holds_.erase(h.id);
  refreshed_while_out_.erase(h.id);
  return saved;
}

void watchdog::restore(const std::shared_ptr<hold_state>& h, const renewal_schedule::entry& e) {
  apply_notes();
  const auto refreshed = refreshed_while_out_.find(h->id);
  std::optional<clock::time_point> sent;
  if (refreshed != refreshed_while_out_.end()) {
    sent = refreshed->second;
    refreshed_while_out_.erase(refreshed);
  }
  if (stopped_ || h->lost) return;
  schedule_.restore(h->id, e);
  if (sent) schedule_.confirmed(h->id, *sent);
  holds_[h->id] = h;
  publish(*h);
  arm_by(*schedule_.due(h->id));
}

void watchdog::arm_by(clock::time_point t) {
  if (stopped_ || t >= armed_for_) return;
  arm(t);
}

std::optional<watchdog::clock::time_point> watchdog::trusted_until(const hold_state& h) {
  apply_notes();
  return schedule_.trusted_until(h.id);
}

void watchdog::stop() {
  stopped_ = true;
  *alive_ = false;
  timer_.cancel();
}

void watchdog::rearm() {
  if (stopped_) return;
  auto next = schedule_.next_due();
  if (!next) {
    armed_for_ = clock::time_point::max();
    timer_.cancel();
    publish_armed(armed_for_);
    return;
  }
  if (*next != armed_for_) arm(*next);
}

void watchdog::arm(clock::time_point at) {
  armed_for_ = at;
  publish_armed(at);
  timer_.expires_at(at);
  timer_.async_wait([this, alive = alive_, at](std::error_code ec) {
    if (ec || !*alive || armed_for_ != at) return;
    armed_for_ = clock::time_point::max();
    on_timer();
  });
}

// Runs on the strand.
void watchdog::on_timer() {
  apply_notes();
  const auto now = clock::now();
  for (auto h : schedule_.take_expired(now)) lose(h);
  // Renew a little early rather than in many small batches: anything due within lease/6 goes
  // now (the period is lease/3, so the lease never runs below half).
  // The last batch is rarely full: top it up with the holds due next (up to a period ahead;
  // renewing early is harmless and aligns them with this firing), so that holds taken at
  // different times converge into full batches: about N/100 scripts per period for N holds.
  for (;;) {
    auto batch = schedule_.take_renewals(now, watchdog_lease_ / 6, max_batch);
    if (batch.empty()) break;
    const bool last = batch.size() < max_batch;
    if (last) {
      auto more = schedule_.take_renewals(now, watchdog_lease_ / 3, max_batch - batch.size(), true);
      batch.insert(batch.end(), more.begin(), more.end());
    }
    renew(batch);
    if (last) break;
  }
  rearm();
}

void watchdog::check_all() {
  if (stopped_) return;
  apply_notes();
  std::vector<renewal_schedule::id> batch;
  for (const auto& [id, h] : holds_) {
    batch.push_back(id);
    if (batch.size() == max_batch) {
      renew(batch, true);
      batch.clear();
    }
  }
  if (!batch.empty()) renew(batch, true);
}

void watchdog::renew(const std::vector<renewal_schedule::id>& ids, bool check_only) {
  std::vector<std::string_view> keys, args;
  // Only watchdog holds are renewed, and they all have the watchdog lease.
  auto lease = check_only ? std::string{"0"} : std::to_string(watchdog_lease_.count());
  args.push_back(lease);
  const auto now = clock::now();
  std::vector<renewal_schedule::id> batch;
  std::vector<std::shared_ptr<hold_state>> held;
  batch.reserve(ids.size());
  held.reserve(ids.size());
  for (auto id : ids) {
    const auto& h = holds_.at(id);
    // A release sent from its caller's thread (sync/release.cpp) may be on its way on the
    // caller's channel: a renewal arriving after it would find the hold gone and call it lost,
    // or extend the caller's next hold of the same name. Renewing and releasing each announce
    // themselves first and back off when the other is on (seq_cst: one of them sees the other).
    h->renewing.fetch_add(1);
    if (h->releasing.load()) {
      h->renewing.fetch_sub(1);
      if (!check_only) schedule_.failed(id, now + std::chrono::milliseconds{100});
      continue;
    }
    batch.push_back(id);
    held.push_back(h);
    keys.push_back(h->name);
    args.push_back(h->owner);
  }
  if (batch.empty()) return;
  const auto sent = clock::now();
  if (!check_only) ++renewals_sent_;
  scripts_.eval(scripts::mutex_renew, keys, args, command_timeout_,
                [this, alive = alive_, batch, held = std::move(held), sent, check_only](std::error_code ec, reply r) {
                  // A renewal with no reply may still run on the server: its holds stay
                  // `renewing` for good, so their releases keep to the command connection.
                  if (ec != errc::timeout && ec != errc::connection_lost) {
                    for (const auto& h : held) h->renewing.fetch_sub(1);
                  }
                  if (!*alive) return;
                  apply_notes();  // a release noted meanwhile takes its hold out first
                  const bool answered = !ec && r.is_array() && r.elements().size() == batch.size();
                  for (std::size_t i = 0; i < batch.size(); ++i) {
                    if (!schedule_.contains(batch[i])) continue;  // released meanwhile
                    if (check_only) {
                      // Held: nothing learned about the lease. Not held: lost. No answer: the
                      // renewals and the trusted time carry on as before.
                      if (answered && r.elements()[i].integer() == 0) {
                        schedule_.remove(batch[i]);
                        lose(batch[i]);
                      }
                    } else if (!answered) {
                      // Unknown: try again soon; the trusted time still bounds the hold.
                      schedule_.failed(batch[i], clock::now() + std::chrono::milliseconds{100});
                    } else if (r.elements()[i].integer() == 1) {
                      schedule_.confirmed(batch[i], sent);
                      if (auto it = holds_.find(batch[i]); it != holds_.end()) publish(*it->second);
                    } else {
                      schedule_.remove(batch[i]);
                      lose(batch[i]);
                    }
                  }
                  if (!check_only) rearm();
                });
}

void watchdog::lose(renewal_schedule::id id) {
  auto it = holds_.find(id);
  if (it == holds_.end()) return;
  auto h = std::move(it->second);
  holds_.erase(it);
  ++leases_lost_;
  mark_lost(*h);
}

}  // namespace dlock::detail
