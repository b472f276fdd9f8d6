#include "sync/acquire_machine.hpp"

#include <algorithm>
#include <utility>

#include "dlock/error.hpp"
#include "runtime/renewal_schedule.hpp"

namespace dlock::detail {

bool is_transient(std::error_code ec) {
  return ec == errc::loading || ec == errc::busy || ec == errc::master_down ||
         ec == errc::no_replicas || ec == errc::try_again || ec == errc::cluster_down ||
         ec == errc::max_clients;
}

bool is_lost_reply(std::error_code ec) {
  return ec == errc::timeout || ec == errc::connection_lost;
}

acquire_machine::actions acquire_machine::start(clock::time_point now) {
  waits_ = p_.have == 0 && (!p_.deadline || *p_.deadline > now);
  return attempt(now);
}

acquire_machine::actions acquire_machine::attempt(clock::time_point now) {
  phase_ = phase::attempting;
  wake_pending_ = false;
  in_flight_ = true;
  actions a;
  // A wait's attempt has what is left of the wait (at least the grace), a single try and
  // lock() without a deadline a whole command timeout.
  clock::duration budget = p_.command_timeout;
  if (waits_ && p_.deadline) {
    budget = std::min<clock::duration>(std::max<clock::duration>(*p_.deadline - now, grace),
                                       p_.command_timeout);
  }
  a.attempt = attempt_args{p_.have, waits_, foreign_, budget};
  sent_foreign_ = foreign_;
  foreign_ = false;
  // A wait ends by its deadline (and the grace) even with an attempt out; a single try ends
  // with its reply, and lock() without a deadline has no timer while attempting.
  if (waits_ && p_.deadline) a.timer = *p_.deadline + grace;
  return a;
}

acquire_machine::actions acquire_machine::sleep(clock::time_point until, clock::time_point now) {
  (void)now;
  phase_ = phase::sleeping;
  wake_at_ = until;
  actions a;
  a.timer = p_.deadline ? std::min(until, *p_.deadline) : until;
  return a;
}

acquire_machine::actions acquire_machine::finish(std::error_code ec, clock::time_point now) {
  (void)now;
  actions a;
  if (phase_ == phase::done) return a;
  // An attempt in flight, one whose reply was lost, a queue place or an acquisition not kept:
  // the give-back releases exactly the acquisition it may have made, and leaves the queue.
  if (ec && (may_hold_ || in_flight_ || phase_ == phase::replicating)) {
    a.give_back = true;
    a.give_back_have = p_.have + 1;
  }
  phase_ = phase::done;
  a.complete = ec;
  return a;
}

// The lock was found held with no time left to wait (or no wait asked): a "busy" outcome, unless
// a transient error is the answer (timed_out()).
acquire_machine::actions acquire_machine::ran_out(std::error_code ec, clock::time_point now) {
  busy_ = ec == errc::timeout;
  return finish(ec, now);
}

acquire_machine::actions acquire_machine::on_reply(std::error_code ec, const reply& r,
                                                   clock::time_point sent, clock::time_point now) {
  if (phase_ != phase::attempting) return {};
  in_flight_ = false;
  if (is_lost_reply(ec)) {
    // Maybe applied, maybe not: ask again with the same expected count (and the same reason).
    may_hold_ = true;
    foreign_ = foreign_ || sent_foreign_;
    if (waits_ && !time_left(now)) return ran_out(errc::timeout, now);
    if (++resends_ <= max_resends) return attempt(now);
    return finish(ec, now);
  }
  if (ec) return on_error(ec, sent, now);
  resends_ = 0;
  transient_since_.reset();
  transient_.clear();
  const auto& e = r.elements();
  if (!r.is_array() || e.size() != 2 || !e[0].is_integer() || !e[1].is_integer()) {
    may_hold_ = true;  // nothing certain about what the script did
    return finish(errc::protocol_error, now);
  }
  switch (e[0].integer()) {
    case 0:
      return acquired(static_cast<std::uint64_t>(e[1].integer()), sent, now);
    case 1:
    case 2:
      return held(e[1].integer(), now);
    case 3:
      may_hold_ = false;
      return finish(errc::lease_lost, now);
    case 4:
      return finish(errc::upgrade_refused, now);
    case 5:
      return finish(errc::wrong_kind, now);
    default:
      may_hold_ = true;
      return finish(errc::protocol_error, now);
  }
}

acquire_machine::actions acquire_machine::on_error(std::error_code ec, clock::time_point sent,
                                                   clock::time_point now) {
  (void)sent;
  // LOADING, BUSY, MASTERDOWN...: waited out for up to one command timeout within the
  // deadline, then reported. Anything else is reported at once.
  if (!transient_since_) transient_since_ = now;
  if (is_transient(ec) && time_left(now) && now - *transient_since_ < p_.command_timeout) {
    transient_ = ec;
    return sleep(now + retry_pause, now);
  }
  return finish(ec, now);
}

acquire_machine::actions acquire_machine::acquired(std::uint64_t token, clock::time_point sent,
                                                   clock::time_point now) {
  if (now >= renewal_schedule::trusted_until(sent, p_.lease)) {
    // The reply came after the lease could have run out: never report a lock it cannot
    // trust. Give exactly this acquisition back, then try again or time out.
    actions back;
    back.give_back = true;
    back.give_back_have = p_.have + 1;
    may_hold_ = false;
    auto next = time_left(now) ? attempt(now) : ran_out(errc::timeout, now);
    next.give_back = true;
    next.give_back_have = back.give_back_have;
    return next;
  }
  token_ = token;
  acquired_sent_ = sent;
  if (p_.replicate) {
    phase_ = phase::replicating;
    actions a;
    a.send_wait = true;
    a.timer = p_.deadline;
    return a;
  }
  return finish({}, now);
}

acquire_machine::actions acquire_machine::on_replicas(std::error_code ec, bool enough,
                                                      clock::time_point now) {
  if (phase_ != phase::replicating) return {};
  if (!ec && enough) return finish({}, now);
  if (p_.accept_shortfall) {
    replicated_ = false;
    return finish({}, now);
  }
  may_hold_ = true;
  return finish(ec ? ec : make_error_code(errc::no_replicas), now);
}

acquire_machine::actions acquire_machine::held(std::int64_t pttl, clock::time_point now) {
  if (!waits_) return ran_out(errc::timeout, now);
  may_hold_ = true;    // queued: a hand-off may name it from now on
  owes_wake_ = false;  // the `0` that woke it, if any, was answered: the lock is held
  if (!time_left(now)) return ran_out(errc::timeout, now);
  const bool subscribe = !subscribed_;
  subscribed_ = true;
  const auto yield_by = std::exchange(yield_by_, std::nullopt);
  actions a;
  if (wake_pending_) {
    a = attempt(now);
  } else {
    // PTTL counts whole milliseconds left, rounded down: re-check one after the end.
    auto until = now + p_.recheck;
    if (pttl >= 0) until = std::min(until, now + std::chrono::milliseconds{pttl + 1});
    if (yield_by) until = std::min(until, std::max(*yield_by, now));
    a = sleep(until, now);
  }
  a.subscribe = subscribe;
  return a;
}

acquire_machine::actions acquire_machine::on_wake(bool foreign, clock::time_point now,
                                                  std::optional<clock::time_point> after) {
  if (phase_ == phase::done || phase_ == phase::idle) return {};
  if (after) {
    if (phase_ == phase::attempting) yield_by_ = std::min(yield_by_.value_or(*after), *after);
    if (phase_ != phase::sleeping || *after >= wake_at_) return {};
    return sleep(*after, now);
  }
  if (!time_left(now) && phase_ == phase::sleeping) return ran_out(timed_out(), now);
  foreign_ = foreign_ || foreign;
  owes_wake_ = owes_wake_ || foreign;
  if (phase_ == phase::sleeping) return attempt(now);
  if (phase_ == phase::attempting) wake_pending_ = true;
  return {};
}

acquire_machine::actions acquire_machine::on_timer(clock::time_point now) {
  if (phase_ == phase::done || phase_ == phase::idle) return {};
  const bool over =
      phase_ == phase::attempting ? p_.deadline && now >= *p_.deadline + grace : !time_left(now);
  if (over && (waits_ || phase_ != phase::attempting)) return ran_out(timed_out(), now);
  if (phase_ == phase::sleeping) {
    if (now >= wake_at_) return attempt(now);
    return sleep(wake_at_, now);
  }
  return {};
}

// The deadline passed while a transient error (BUSY, LOADING...) was being waited out: that
// error is the answer, not a bare timeout.
std::error_code acquire_machine::timed_out() const {
  return transient_ ? transient_ : make_error_code(errc::timeout);
}

acquire_machine::actions acquire_machine::on_cancel(std::error_code ec, clock::time_point now) {
  return finish(ec, now);
}

}  // namespace dlock::detail
