#include "sync/round_machine.hpp"

#include <algorithm>
#include <asio/error.hpp>

#include "dlock/error.hpp"
#include "sync/acquire_machine.hpp"

namespace dlock::detail {

bool is_retryable_outcome(std::error_code ec) { return is_lost_reply(ec) || is_transient(ec); }

round_machine::round_machine(params p)
    : p_{p}, outcomes_(p.members), answered_(p.members), suspect_(p.members), rng_{p.seed} {}

round_machine::actions round_machine::start(clock::time_point now) {
  if (phase_ == phase::done) return {};
  if (p_.members == 0 || p_.needed == 0 || p_.needed > p_.members) {
    return finish(errc::invalid_argument);
  }
  phase_ = phase::attempting;
  std::fill(outcomes_.begin(), outcomes_.end(), outcome{});
  std::fill(answered_.begin(), answered_.end(), false);
  pending_ = p_.members;
  round_start_ = now;
  wake_pending_ = false;
  stragglers_by_.reset();
  actions a;
  a.attempt = true;
  // A wait's round still out at the deadline gets `grace` more, then ends as a failed round (a
  // try's round is bounded by its attempts' timeouts alone).
  a.timer = round_timer();
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
  on_late(member, o);
  if (o.pttl) busy_seen_ = true;
  if (o.ec) last_error_ = o.ec;
  if (--pending_ == 0) return settle(now);
  // Decided before every member answered: too many failed for a quorum, or a quorum is held and
  // the others had as long again as it took (at least `straggler_min`). A dead or stopped
  // server's attempt (up to its timeout) thus does not hold the round up; what a straggler takes
  // later is released by the shell (accepts() is false by then).
  std::size_t failed = 0;
  for (std::size_t i = 0; i < p_.members; ++i) {
    if (answered_[i] ? !outcomes_[i].acquired : suspect_[i]) ++failed;
  }
  if (failed > p_.members - p_.needed) return settle(now);
  if (acquired() < p_.needed || stragglers_by_) return {};
  stragglers_by_ = now + std::max<clock::duration>(now - round_start_, straggler_min);
  actions a;
  a.timer = round_timer();
  return a;
}

// The timer of a round out: the stragglers' time, or the deadline plus grace of a wait.
std::optional<round_machine::clock::time_point> round_machine::round_timer() const {
  std::optional<clock::time_point> at = stragglers_by_;
  if (p_.deadline && *p_.deadline > round_start_) {
    at = std::min(at.value_or(clock::time_point::max()), *p_.deadline + grace);
  }
  return at;
}

// A member whose last answer (in its round or late) was an error is suspect: while its answer
// is out, it is not counted on to make a quorum, so a dead or stopped server's attempt does not
// hold every round up to its timeout. Any other answer, even late, clears it.
void round_machine::on_late(std::size_t member, const outcome& o) noexcept {
  if (member < p_.members) suspect_[member] = o.ec && !o.acquired;
}

bool round_machine::accepts(std::size_t member) const noexcept {
  return phase_ == phase::attempting && member < p_.members && !answered_[member];
}

round_machine::actions round_machine::settle(clock::time_point now) {
  last_round_ = now - round_start_;
  // Members that answered with an error no retry changes soon (a refused connection, a key of
  // another type): with too many of them the acquisition ends now, with that error, as a
  // mutex's does.
  std::size_t unreachable = 0;
  std::error_code cause;
  for (std::size_t i = 0; i < p_.members; ++i) {
    const auto& ec = outcomes_[i].ec;
    if (answered_[i] && ec && !is_retryable_outcome(ec)) {
      ++unreachable;
      cause = ec;
    }
  }
  if (p_.members - unreachable < p_.needed) {
    auto a = finish(cause);
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
  if (p_.deadline && *p_.deadline > round_start_) a.timer = *p_.deadline + grace;
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
  std::optional<std::size_t> first_busy;
  for (std::size_t i = 0; i < outcomes_.size(); ++i) {
    const auto& o = outcomes_[i];
    if (!o.pttl) continue;
    if (!first_busy) first_busy = i;
    if (o.pttl->count() >= 0) pause = std::min(pause, *o.pttl + std::chrono::milliseconds{1});
  }
  // Woken while the round was out: the lock it found held may be free already.
  if (wake_pending_) pause = std::min(pause, p_.pause_min);
  auto at = now + pause;
  if (p_.deadline) at = std::min(at, *p_.deadline);
  actions a;
  a.release = true;
  a.timer = at;
  a.listen = first_busy;
  return a;
}

round_machine::actions round_machine::on_timer(clock::time_point now) {
  if (phase_ == phase::attempting && stragglers_by_ && now >= *stragglers_by_) return settle(now);
  if (phase_ == phase::attempting || phase_ == phase::flooring) {
    if (!p_.deadline || now < *p_.deadline + grace) return {};
    return retry(now);  // late: ends it, giving back what the round took
  }
  if (phase_ != phase::pausing) return {};
  return start(now);
}

round_machine::actions round_machine::on_wake(clock::time_point now) {
  if (phase_ == phase::pausing) {
    // Every waiting process hears the same unlock: starting after a random part of a round's
    // time lets one of them take every member before the others start, rather than all of them
    // splitting the members and failing together.
    if (last_round_ <= clock::duration::zero()) return start(now);
    std::uniform_int_distribution<clock::rep> pick{0, last_round_.count()};
    actions a;
    a.timer = now + clock::duration{pick(rng_)};
    if (p_.deadline) a.timer = std::min(*a.timer, *p_.deadline);
    return a;
  }
  if (phase_ == phase::attempting || phase_ == phase::flooring) wake_pending_ = true;
  return {};
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
