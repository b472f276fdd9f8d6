#include "sync/round_machine.hpp"

#include <algorithm>
#include <asio/error.hpp>

#include "dlock/error.hpp"

namespace dlock::detail {

bool is_final(std::error_code ec) {
  return ec == errc::wrong_type || ec == errc::wrong_kind || ec == errc::invalid_argument ||
         ec == errc::no_permission || ec == errc::auth_failed || ec == errc::no_auth ||
         ec == errc::server_error || ec == errc::shutdown || ec == errc::would_deadlock ||
         ec == errc::unsupported_server;
}

round_machine::round_machine(params p)
    : p_{p}, outcomes_(p.members), answered_(p.members), final_(p.members), rng_{p.seed} {}

round_machine::actions round_machine::start(clock::time_point now) {
  if (p_.members == 0 || p_.needed == 0 || p_.needed > p_.members) {
    return finish(errc::invalid_argument);
  }
  phase_ = phase::attempting;
  std::fill(outcomes_.begin(), outcomes_.end(), outcome{});
  std::fill(answered_.begin(), answered_.end(), false);
  pending_ = p_.members;
  (void)now;
  actions a;
  a.attempt = true;
  return a;
}

std::size_t round_machine::acquired() const {
  return static_cast<std::size_t>(std::count_if(outcomes_.begin(), outcomes_.end(),
                                                [](const outcome& o) { return o.acquired; }));
}

std::uint64_t round_machine::token() const noexcept {
  std::uint64_t t = 0;
  for (const auto& o : outcomes_) {
    if (o.acquired) t = std::max(t, o.token);
  }
  return t;
}

std::optional<round_machine::clock::time_point> round_machine::valid_until() const {
  std::vector<clock::time_point> trust;
  for (const auto& o : outcomes_) {
    if (o.acquired) trust.push_back(o.trusted_until);
  }
  if (trust.size() < p_.needed) return std::nullopt;
  std::sort(trust.begin(), trust.end(), std::greater<>{});
  return trust[p_.needed - 1];
}

round_machine::actions round_machine::on_outcome(std::size_t member, const outcome& o,
                                                 clock::time_point now) {
  if (phase_ != phase::attempting || member >= p_.members || answered_[member]) return {};
  answered_[member] = true;
  outcomes_[member] = o;
  if (o.pttl) busy_seen_ = true;
  if (o.ec) {
    last_error_ = o.ec;
    if (is_final(o.ec)) final_[member] = true;
  }
  if (--pending_ > 0) return {};
  return settle(now);
}

round_machine::actions round_machine::settle(clock::time_point now) {
  const auto finals = static_cast<std::size_t>(std::count(final_.begin(), final_.end(), true));
  if (p_.members - finals < p_.needed) {
    auto a = finish(last_error_);
    a.release = true;
    return a;
  }
  const auto valid = valid_until();
  if (!valid || *valid <= now) return retry(now);
  if (!p_.floor) return finish({});
  phase_ = phase::flooring;
  pending_ = acquired();
  floors_ok_ = 0;
  std::fill(answered_.begin(), answered_.end(), false);
  actions a;
  a.floor = token();
  return a;
}

round_machine::actions round_machine::on_floor(std::size_t member, bool ok, clock::time_point now) {
  if (phase_ != phase::flooring || member >= p_.members || answered_[member] ||
      !outcomes_[member].acquired) {
    return {};
  }
  answered_[member] = true;
  if (ok) ++floors_ok_;
  if (--pending_ > 0) return {};
  const auto valid = valid_until();
  if (floors_ok_ >= p_.needed && valid && *valid > now) return finish({});
  return retry(now);
}

// The round failed: give back what it took, then pause (or end at the deadline).
round_machine::actions round_machine::retry(clock::time_point now) {
  const bool late = p_.deadline && now >= *p_.deadline;
  if (late) {
    auto a = finish(busy_seen_ || !last_error_ ? make_error_code(errc::timeout) : last_error_);
    a.release = true;
    return a;
  }
  phase_ = phase::pausing;
  std::uniform_int_distribution<std::int64_t> pick{p_.pause_min.count(), p_.pause_max.count()};
  auto pause = std::chrono::milliseconds{pick(rng_)};
  // A busy member whose lease ends sooner: try again just after it (a holder that died).
  for (const auto& o : outcomes_) {
    if (o.pttl && o.pttl->count() >= 0)
      pause = std::min(pause, *o.pttl + std::chrono::milliseconds{1});
  }
  auto at = now + pause;
  if (p_.deadline) at = std::min(at, *p_.deadline);
  actions a;
  a.release = true;
  a.timer = at;
  return a;
}

round_machine::actions round_machine::on_timer(clock::time_point now) {
  if (phase_ != phase::pausing) return {};
  // Errors of the last round are reported only if they are still what stops the next one.
  busy_seen_ = false;
  last_error_.clear();
  return start(now);
}

round_machine::actions round_machine::on_cancel(std::error_code ec, clock::time_point) {
  if (phase_ == phase::done) return {};
  const bool held = phase_ == phase::attempting || phase_ == phase::flooring;
  auto a = finish(ec);
  a.release = held;
  return a;
}

round_machine::actions round_machine::finish(std::error_code ec) {
  phase_ = phase::done;
  actions a;
  a.complete = ec;
  return a;
}

}  // namespace dlock::detail
