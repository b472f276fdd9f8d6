#include "runtime/renewal_schedule.hpp"

#include <algorithm>

namespace dlock::detail {

void renewal_schedule::add(id h, clock::time_point sent, clock::duration lease, bool renew) {
  holds_[h] = entry{lease, trusted_until(sent, lease), sent + lease / 3, renew, false, sent};
}

bool renewal_schedule::renews(id h) const {
  auto it = holds_.find(h);
  return it != holds_.end() && it->second.renew;
}

void renewal_schedule::remove(id h) { holds_.erase(h); }

std::optional<renewal_schedule::clock::time_point> renewal_schedule::trusted_until(id h) const {
  auto it = holds_.find(h);
  if (it == holds_.end()) return std::nullopt;
  return it->second.trusted_until;
}

std::optional<renewal_schedule::clock::time_point> renewal_schedule::due(id h) const {
  auto it = holds_.find(h);
  if (it == holds_.end()) return std::nullopt;
  return std::min(it->second.trusted_until, it->second.renew_at);
}

namespace {

using due_list = std::vector<std::pair<renewal_schedule::clock::time_point, renewal_schedule::id>>;

bool eligible(const renewal_schedule::entry& e, renewal_schedule::clock::time_point now,
              renewal_schedule::clock::duration slack, bool renew) {
  return !e.in_flight && e.renew == renew &&
         e.renew_at != renewal_schedule::clock::time_point::max() && e.renew_at <= now + slack;
}

}  // namespace

// The earliest `max_batch` of `due`, marked in flight.
std::vector<renewal_schedule::id> renewal_schedule::claim(due_list& due, std::size_t max_batch) {
  if (due.size() > max_batch) {
    std::partial_sort(due.begin(), due.begin() + static_cast<std::ptrdiff_t>(max_batch), due.end());
    due.resize(max_batch);
  } else {
    std::sort(due.begin(), due.end());
  }
  std::vector<id> out;
  out.reserve(due.size());
  for (auto& [t, h] : due) {
    holds_[h].in_flight = true;
    out.push_back(h);
  }
  return out;
}

std::vector<renewal_schedule::id> renewal_schedule::take_renewals(clock::time_point now,
                                                                  clock::duration slack,
                                                                  std::size_t max_batch, bool renew,
                                                                  bool top_up) {
  due_list due;
  for (auto& [h, e] : holds_) {
    if (eligible(e, now, slack, renew)) due.emplace_back(e.renew_at, h);
  }
  // Any of them is due within `slack`, but the first batch should not wait for the later ones.
  if (due.empty() || (!top_up && std::min_element(due.begin(), due.end())->first > now)) return {};
  return claim(due, max_batch);
}

std::vector<renewal_schedule::id> renewal_schedule::take_renewals_of(
    const std::vector<id>& candidates, clock::time_point now, clock::duration slack,
    std::size_t max_batch, bool renew) {
  due_list due;
  for (auto h : candidates) {
    auto it = holds_.find(h);
    if (it != holds_.end() && eligible(it->second, now, slack, renew)) {
      due.emplace_back(it->second.renew_at, h);
    }
  }
  return claim(due, max_batch);
}

void renewal_schedule::confirmed(id h, clock::time_point sent) {
  auto it = holds_.find(h);
  if (it == holds_.end()) return;
  auto& e = it->second;
  e.in_flight = false;
  e.trusted_until = std::max(e.trusted_until, trusted_until(sent, e.lease));
  e.renew_at = sent + e.lease / 3;
  e.set_at = std::max(e.set_at, sent);
}

void renewal_schedule::checked(id h, clock::time_point sent, std::int64_t pttl) {
  auto it = holds_.find(h);
  if (it == holds_.end()) return;
  auto& e = it->second;
  e.in_flight = false;
  // A check sent before the latest request that set the lease read the TTL that request
  // replaced: it says nothing about the lease now.
  if (pttl >= 0 && sent >= e.set_at) {
    const clock::duration left = std::chrono::milliseconds{pttl};
    e.trusted_until = std::min(e.trusted_until, sent + left - drift(e.lease));
  }
  e.renew_at = std::max(e.renew_at, sent + e.lease / 3);
  // A watchdog hold whose key ends sooner than believed is renewed now rather than lost.
  if (e.renew && e.renew_at >= e.trusted_until) e.renew_at = sent;
}

void renewal_schedule::failed(id h, clock::time_point retry_at) {
  auto it = holds_.find(h);
  if (it == holds_.end()) return;
  it->second.in_flight = false;
  it->second.renew_at = retry_at;
}

std::optional<renewal_schedule::entry> renewal_schedule::snapshot(id h) const {
  auto it = holds_.find(h);
  if (it == holds_.end()) return std::nullopt;
  return it->second;
}

void renewal_schedule::restore(id h, const entry& e) {
  auto& back = holds_[h] = e;
  back.in_flight = false;
}

std::vector<renewal_schedule::id> renewal_schedule::take_expired(clock::time_point now) {
  std::vector<id> out;
  for (auto it = holds_.begin(); it != holds_.end();) {
    if (it->second.trusted_until <= now) {
      out.push_back(it->first);
      it = holds_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

std::optional<renewal_schedule::clock::time_point> renewal_schedule::next_due() const {
  std::optional<clock::time_point> best;
  for (auto& [h, e] : holds_) {
    auto t = e.trusted_until;
    if (!e.in_flight) t = std::min(t, e.renew_at);
    if (!best || t < *best) best = t;
  }
  return best;
}

}  // namespace dlock::detail
