// The acquire operation of dlock::mutex: try, and if held elsewhere wait for an unlock message
// or a re-check timer, until acquired or the deadline passes.
#include <algorithm>
#include <span>

#include <asio/post.hpp>
#include <asio/steady_timer.hpp>

#include "dlock/error.hpp"
#include "resp/encoder.hpp"
#include "runtime/client_impl.hpp"
#include "runtime/renewal_schedule.hpp"
#include "scripts/script.hpp"
#include "sync/mutex_ops.hpp"

namespace dlock::detail {
namespace {

// An attempt whose reply is lost is sent again (idempotent: see mutex_acquire.lua) this many
// times before the outcome is given up as unknown.
constexpr int max_resends = 3;
constexpr auto retry_pause = std::chrono::milliseconds{50};

// Server states that pass by themselves.
bool is_transient(std::error_code ec) {
  return ec == errc::loading || ec == errc::busy || ec == errc::master_down ||
         ec == errc::no_replicas || ec == errc::try_again || ec == errc::cluster_down ||
         ec == errc::max_clients;
}

class acquire_op final : public waiter,
                         public abortable,
                         public std::enable_shared_from_this<acquire_op> {
 public:
  acquire_op(client_impl& c, std::shared_ptr<hold_state> hold,
             std::optional<clock::time_point> deadline, completion<std::shared_ptr<hold_state>> done)
      : c_{c},
        hold_{std::move(hold)},
        deadline_{deadline},
        done_{std::move(done)},
        timer_{c.strand()},
        keys_{hold_->name},
        counters_{c.cfg(), hold_->name},
        lease_ms_{std::to_string(hold_->lease.count())} {
    // Only a caller that will wait takes a place in the lock's waiter queue.
    if (!deadline_ || *deadline_ > clock::now()) {
      ticket = c.waiters().make_ticket();
      ticket_ = waiter_registry::ticket_text(ticket);
    }
    // A client whose subscriptions are refused (no channel rights) cannot be woken by name:
    // queued, it would be named by an unlock that then keeps the lock for it while nobody
    // wakes — the other waiters would wait for their re-checks. It waits by re-checks alone.
    unqueued_ = c.waiters().refused() > 0;
  }

  // Strand only.
  void start() {
    if (hold_->lost) return finish(errc::lease_lost);
    cancel_undo_of_owner();
    c_.track(this);
    tracked_ = true;
    attempt();
  }

  // The calling thread of a blocking acquire (config::caller_io), before the op is shared: the
  // first attempt goes out on the caller's channel. A clean acquisition (first or re-entry)
  // completes here, on the caller's thread; anything else — held elsewhere, an error reply, no
  // reply — carries on on the strand exactly as if that attempt had been sent from there
  // (resume()). Without a turn on the channel the op starts on the strand.
  // True when the attempt went out on the channel and the op goes on on the strand.
  bool start_from_caller() {
    const auto now = clock::now();
    auto turn = hold_->lost ? transport::caller_channel::turn{} : c_.caller_turn(now + budget(now));
    if (!turn) {
      auto self = shared_from_this();
      c_.post_or_shutdown(std::move(done_), [self](auto done) {
        self->done_ = std::move(done);
        self->start();
      });
      return false;
    }
    const auto sent = clock::now();
    const auto request = next_attempt(sent);
    reply r;
    const auto ec = turn.eval(scripts::mutex_acquire, request, sent + budget(sent), r);
    if (!ec && !c_.stopping()) {
      if (auto token = clean_acquisition(r, sent)) {
        const bool first = hold_->count.fetch_add(1) == 0;
        if (first) {
          hold_->token = *token;
          hold_->trusted_until = renewal_schedule::trusted_until(sent, hold_->lease).time_since_epoch().count();
        }
        // The watchdog lives on the strand: it takes the note before it next looks at its
        // holds, and before any later operation of this thread on the strand.
        if (first) {
          c_.watchdog().note_added(hold_, sent);
        } else {
          c_.watchdog().note_refreshed(hold_, sent);  // the script reset the lease
        }
        finish_on_caller({});
        return false;
      }
    }
    // No reply: the request may still reach the server. Fence it before anything of this op
    // goes out on the command connection (see client_impl::fence_caller_channel).
    if (const auto doubtful = turn.take_doubtful()) c_.fence_caller_channel(doubtful);
    // Shutdown closes the channel (after this turn) before it stops the strand, so this post
    // is taken; resume() ends the op if shutdown has begun.
    auto self = shared_from_this();
    if (!c_.post_if_running([self, ec, r = std::move(r), sent] { self->resume(ec, r, sent); })) {
      finish_on_caller(errc::shutdown);
      return false;
    }
    return true;
  }

  void wake() override {
    if (finished_) return;
    woken_ = true;
    // While giving an acquisition back, the wake-up may be that release's own message: acting
    // on it now would take the lock again just before this op ends.
    if (attempting || giving_back_) {
      wake_pending = true;
      return;
    }
    ++sleep_gen_;
    timer_.cancel();
    attempt();
  }

  void abort(std::error_code ec) override { finish(ec); }

  // Next in line behind a hand-off: re-check once its window has passed (and a little more, so
  // that the reservation has expired), unless woken or re-checking sooner — in case the named
  // waiter never comes.
  void stand_by() override {
    if (finished_) return;
    const auto at = clock::now() + c_.cfg().handoff_window + std::chrono::milliseconds{5};
    if (attempting || giving_back_) {
      standby_at_ = at;  // applied when the attempt's reply sends it back to sleep
    } else if (timer_.expiry() > at) {
      sleep(at - clock::now());
    }
  }

  // An unlock granted this waiter the lock (config::grants). It holds it from the grant on: it
  // completes now, trusted for the grant's window from no later than the grant was made (its
  // attempt that wrote the record the unlock read was sent at g.sent, and the grant came
  // g.since after that record was written), and confirms in the background, which sets its
  // own lease. Not taken while an attempt is out (its reply comes first: an attempt that ran
  // after the grant took it as its own; one that got no answer is resent, and the resend takes
  // it), nor after this op left the queue (the leave releases the grant) or while it gives an
  // acquisition back (the attempt after the give-back takes it).
  void granted(const grant& g) override {
    if (finished_ || left_ || giving_back_ || g.ticket != ticket) return;
    if (attempting) {
      if (!pending_grant_) ++c_.grants_deferred();
      pending_grant_ = g;
      return;
    }
    take_grant(g);
  }

  // This lock's subscription was refused: leave the queue and stay out of it.
  void channel_refused() override {
    unqueued_ = true;
    if (queued_) leave_queue();
  }

 private:
  // Strand: the first attempt went out on the caller's channel (start_from_caller); its
  // outcome is handled as any attempt's.
  void resume(std::error_code ec, const reply& r, clock::time_point sent) {
    cancel_undo_of_owner();  // as start(): none was pending when the turn was taken
    c_.track(this);
    tracked_ = true;
    if (c_.stopping()) {
      // Shutdown began while the attempt was out: end as the shutdown sweep would end an op
      // in flight — give back exactly what it may have taken, and leave the queue.
      queued_ = sent_ticket_;
      return finish(errc::shutdown);
    }
    on_reply(ec, r, sent);
  }

  // A give-back still running for an earlier acquisition by this owner must stop before this
  // op's first attempt goes out: it would delete what this op acquires (same owner field, same
  // count). One connection keeps order, so what it already sent runs before our attempt.
  void cancel_undo_of_owner() {
    if (c_.undoing().empty()) return;  // (no key to build on the usual path)
    c_.undoing().erase(undo_key());
    c_.undos_changed();
  }

  // The token of an acquisition that on_reply() would take as it is (config::wait_replicas is
  // 0 wherever the caller's channel is used), and that is still trusted; nullopt otherwise.
  std::optional<std::uint64_t> clean_acquisition(const reply& r, clock::time_point sent) const {
    if (!r.is_array() || hold_->lost) return std::nullopt;
    const auto& e = r.elements();
    if (e.size() != 2 || !e[0].is_integer() || e[0].integer() != 0 || !e[1].is_integer()) return std::nullopt;
    if (clock::now() >= renewal_schedule::trusted_until(sent, hold_->lease)) return std::nullopt;
    return static_cast<std::uint64_t>(e[1].integer());
  }

  // Completes an op that never reached the strand (start_from_caller).
  void finish_on_caller(std::error_code ec) {
    finished_ = true;
    attempting = false;
    auto done = std::move(done_);
    done(ec, hold_);
  }

  bool time_left(clock::time_point now) const { return !deadline_ || now < *deadline_; }
  // A caller that waits (ticket_ set) must have its answer by its deadline, also when the
  // server is unreachable or slow: each attempt gets what is left of the wait (at least a short
  // grace, for the last check at the deadline), never more than a command timeout. lock()
  // without a deadline, and a one-shot try, get a whole command timeout.
  clock::duration budget(clock::time_point now) const {
    const clock::duration full = c_.cfg().command_timeout;
    if (!deadline_ || ticket_.empty()) return full;
    const clock::duration grace = std::min(full, clock::duration{std::chrono::milliseconds{50}});
    return std::clamp<clock::duration>(*deadline_ - now, grace, full);
  }
  bool waits() const { return deadline_ && !ticket_.empty(); }

  void attempt() {
    const auto sent = clock::now();
    c_.scripts().eval_encoded(scripts::mutex_acquire, next_attempt(sent), budget(sent),
                              [self = shared_from_this(), sent](std::error_code ec, reply r) {
                                self->on_reply(ec, r, sent);
                              });
  }

  // The request of the next attempt, sent at `sent`; the op counts it in flight from here.
  std::string next_attempt(clock::time_point sent) {
    attempting = true;
    wake_pending = false;
    last_sent_ = sent;
    sent_have_ = hold_->count.load();
    const auto have = std::to_string(sent_have_);
    // The queue entry outlives the longest sleep before this waiter's next attempt (the
    // re-check interval, or what is left of its deadline), with a second to spare.
    auto valid = c_.cfg().wait_recheck;
    if (deadline_) valid = std::min(valid, std::chrono::ceil<std::chrono::milliseconds>(*deadline_ - sent));
    const auto valid_ms = std::to_string(std::max<std::int64_t>(valid.count(), 0) + 1000);
    const std::string_view keys_all[] = {keys_.name, counters_.advanced, keys_.queue, keys_.expiry,
                                         counters_.other};
    const std::span<const std::string_view> keys{keys_all, counters_.other.empty() ? 4u : 5u};
    sent_ticket_ = !unqueued_ && !ticket_.empty();
    // The ticket's first attempt: it cannot be in the queue yet (tickets are never reused), so
    // the script skips taking it out when it acquires.
    const bool first_with_ticket = sent_ticket_ && !ticket_sent_ever_;
    ticket_sent_ever_ = ticket_sent_ever_ || sent_ticket_;
    if (first_sent_ == clock::time_point{}) first_sent_ = sent;
    // Queued, it takes grants (config::grants): the unlock needs its owner field, fencing mode
    // and this send time (echoed in the grant: the waiter trusts it from there).
    const auto mode = sent_ticket_ && c_.cfg().wait_replicas == 0 ? grant_mode(c_.cfg()) : std::string_view{};
    const auto sent_text = mode.empty() ? std::string{} : std::to_string(sent.time_since_epoch().count());
    std::string_view args[] = {lease_ms_, hold_->owner, have,
                               sent_ticket_ ? std::string_view{ticket_} : std::string_view{},
                               valid_ms, c_.cfg().fencing == config::fencing_mode::off ? "0" : "1",
                               named ? "1" : first_with_ticket ? "3" : "0",
                               // with the ticket: an unlock names us on keys::waiter_channel(id)
                               sent_ticket_ ? std::string_view{c_.id()} : std::string_view{},
                               mode, sent_text};
    named = false;
    return scripts::encode_evalsha(scripts::mutex_acquire, keys,
                                   std::span<const std::string_view>{args, mode.empty() ? 8u : 10u});
  }

  void on_reply(std::error_code ec, const reply& r, clock::time_point sent) {
    attempting = false;
    if (finished_) return;
    if (auto g = std::exchange(pending_grant_, std::nullopt)) {
      // A grant came while this attempt was out. It answered "held": it ran before the grant,
      // which stands. It acquired: it ran after and took the grant (handled below). Anything
      // else: handled below, and the resend or next attempt takes the grant.
      const auto& e = r.elements();
      if (!ec && r.is_array() && e.size() == 1 && e[0].is_integer()) return take_grant(*g);
    }
    if (ec == errc::timeout || ec == errc::connection_lost) {
      // Maybe applied, maybe not: ask again with the same expected count.
      if (!ambiguous_since_) ambiguous_since_ = sent;
      if (waits() && !time_left(clock::now())) {
        undo_in_background(sent_have_ + 1);
        return finish(errc::timeout);
      }
      if (++resends_ <= max_resends) return attempt();
      undo_in_background(sent_have_ + 1);
      return finish(ec);
    }
    if (ec) {
      // While this op goes on, its next attempt settles an ambiguous one (the script adopts an
      // acquisition that was applied); only an op that ends gives it back.
      const auto now = clock::now();
      if (!transient_since_) transient_since_ = now;
      // LOADING, BUSY, MASTERDOWN...: wait them out for up to one command timeout (and within
      // the caller's deadline), then report. READONLY, MOVED and ASK need a topology change that
      // a single-server client cannot make: reported at once.
      if (is_transient(ec) && time_left(now) &&
          now - *transient_since_ < c_.cfg().command_timeout) {
        return sleep(deadline_ ? std::min<clock::duration>(retry_pause, *deadline_ - now) : retry_pause);
      }
      if (ambiguous_since_) undo_in_background(sent_have_ + 1);
      return finish(ec);
    }
    transient_since_.reset();
    const auto& e = r.elements();
    if (!r.is_array() || e.empty() || !e[0].is_integer()) return finish(errc::protocol_error);
    if (e.size() == 2 && e[0].integer() == 0 && e[1].is_integer()) {
      return check_replicas(static_cast<std::uint64_t>(e[1].integer()), ambiguous_since_.value_or(sent));
    }
    if (e.size() == 2 && e[0].integer() == -1) {
      // Our field holds a count we did not expect: our own earlier hold is gone.
      return finish(hold_->count > 0 ? errc::lease_lost : errc::not_owner);
    }
    if (e.size() != 1) return finish(errc::protocol_error);
    ambiguous_since_.reset();  // "held by another" proves no earlier resend was applied
    resends_ = 0;
    if (!wake_pending) woken_ = false;  // a wake-up before this attempt found the lock held
    if (sent_ticket_) {
      queued_ = true;
      if (unqueued_) leave_queue();  // refused while this attempt was in flight
    }
    held_elsewhere(e[0].integer());
  }

  void take_grant(const grant& g) {
    if (finished_ || left_) return;  // (a leave sent while the grant waited releases it)
    const auto now = clock::now();
    // The grant's expiry is the releaser's window, which the message carries (ours may differ);
    // trusted no longer than this hold's own lease either, which the confirmation sets from its
    // run on (a lease shorter than the window would end before the trusted time otherwise).
    const auto window = std::min(std::chrono::duration_cast<clock::duration>(g.window),
                                 std::chrono::duration_cast<clock::duration>(hold_->lease));
    // The grant came `since` (server ms, whole: less one) after the record was written, which
    // was after its attempt was sent; less 1% of it for the clocks' rates (as the lease's drift
    // allowance), and never later than now (a server clock stepped forward inflates `since`).
    const auto since = std::max(clock::duration{g.since} - std::chrono::milliseconds{1}, clock::duration::zero());
    const auto start = std::min(now, g.sent + since - since / 100);
    const bool ours = g.sent >= first_sent_ && g.sent <= last_sent_;
    if (!ours || hold_->lost || hold_->count > 0 || window <= clock::duration::zero() ||
        now >= renewal_schedule::trusted_until(start, window)) {
      // Too late to trust (or not this op's attempt): the lock is ours on the server all the
      // same; the next attempt takes it with a lease of its own.
      ++c_.grants_untrusted();
      return wake();
    }
    ++c_.grants_taken();
    hold_->count.fetch_add(1);
    hold_->token = g.token;
    c_.watchdog().add_granted(hold_, start, window);
    // The caller goes on first: the confirmation's request is built after finish(), which
    // would let this op go but for `self`.
    auto self = shared_from_this();
    finish({});
    // Confirmed a fifth of the window after the grant (before the watchdog's fallback renewal
    // at half, well before the trusted time ends): a holder that releases sooner needs no
    // confirmation at all — its release ends the grant — so a short critical section costs the
    // unlock's script alone, and the confirmation never competes with the hand-off for the server.
    confirm_later(c_, hold_, encode_confirm(), std::max(start + window / 5 - clock::now(), clock::duration::zero()));
  }

  // Confirms after `delay` unless the hold was released (or lost) by then; while a release is
  // on its way, looks again later (a release that fails leaves the hold to confirm).
  static void confirm_later(client_impl& c, std::shared_ptr<hold_state> hold, std::string request,
                            clock::duration delay) {
    auto timer = std::make_shared<asio::steady_timer>(c.strand(), delay);
    timer->async_wait([&c, timer, hold = std::move(hold), request = std::move(request)](std::error_code ec) mutable {
      if (ec || c.stopped() || hold->lost || hold->count == 0) return;
      // A release on its way (it took the hold out of the watchdog): wait for its outcome.
      if (hold->releasing.load()) {
        return confirm_later(c, std::move(hold), std::move(request), std::chrono::milliseconds{5});
      }
      const auto until = c.watchdog().trusted_until(*hold);
      if (!until || clock::now() >= *until) return;  // past trusting: nothing to confirm
      confirm_grant(c, std::move(hold), std::move(request));
    });
  }

  // The confirmation of a grant taken: mutex_acquire.lua with ARGV[7] '2'.
  std::string encode_confirm() const {
    const std::string_view keys_all[] = {keys_.name, counters_.advanced, keys_.queue, keys_.expiry,
                                         counters_.other};
    const std::span<const std::string_view> keys{keys_all, counters_.other.empty() ? 4u : 5u};
    const std::string_view args[] = {lease_ms_, hold_->owner, "1", ticket_, "0",
                                     c_.cfg().fencing == config::fencing_mode::off ? "0" : "1", "2"};
    return scripts::encode_evalsha(scripts::mutex_acquire, keys, args);
  }

  // Sends the confirmation (again, after no answer, while the grant is trusted). A release on its
  // way goes after it (the hold is `renewing`, as for a watchdog renewal): a confirmation that ran
  // after the release could only find the lock gone, or extend this owner's next hold.
  static void confirm_grant(client_impl& c, std::shared_ptr<hold_state> hold, std::string request,
                            int tries = 0) {
    hold->renewing.fetch_add(1);
    if (hold->releasing.load()) {
      // A release is on its way: nothing to confirm if it succeeds; look again shortly, in
      // case it fails (confirm_later stops once the hold is released).
      hold->renewing.fetch_sub(1);
      return confirm_later(c, std::move(hold), std::move(request), std::chrono::milliseconds{5});
    }
    const auto sent = clock::now();
    auto copy = request;
    c.scripts().eval_encoded(
        scripts::mutex_acquire, std::move(copy), c.cfg().command_timeout,
        [&c, hold, request = std::move(request), sent, tries](std::error_code ec, reply r) mutable {
          // No answer: it may still run, so releases keep to the command connection.
          if (ec != errc::timeout && ec != errc::connection_lost) hold->renewing.fetch_sub(1);
          if (c.stopped() || hold->lost || hold->count == 0) return;
          const auto& e = r.elements();
          if (!ec && r.is_array() && e.size() == 2 && e[0].is_integer() && e[0].integer() == 0) {
            return c.watchdog().refreshed(*hold, sent);  // its own lease now, from this send
          }
          if (!ec && r.is_array()) {
            // Not held by us (the grant ran out before this came), or not our grant.
            if (!hold->releasing) c.watchdog().lose(*hold);
            return;
          }
          // No answer, or an error: try again while the grant is trusted (the watchdog renews a
          // watchdog hold meanwhile; an explicit lease is lost when its trusted time passes).
          const auto until = c.watchdog().trusted_until(*hold);
          if (tries < max_resends && until && clock::now() < *until && is_retryable_confirm(ec)) {
            confirm_grant(c, std::move(hold), std::move(request), tries + 1);
          }
        });
  }
  static bool is_retryable_confirm(std::error_code ec) {
    return ec == errc::timeout || ec == errc::connection_lost || is_transient(ec);
  }

  // config::wait_replicas: a first acquisition counts once that many replicas acknowledged it.
  // WAIT goes on the command connection, after the acquire script, because WAIT counts the
  // writes of the connection that sends it — and only on the connection whose reply this is
  // (we run inside its reply handler): after a reconnect WAIT would count nothing and answer
  // at once, so it fails with connection_lost instead. On a shortfall (or no answer) the policy decides:
  // fail gives back exactly this acquisition and reports errc::no_replicas (or the error);
  // accept keeps it and marks the lease unreplicated.
  void check_replicas(std::uint64_t token, clock::time_point sent) {
    const auto& cfg = c_.cfg();
    if (cfg.wait_replicas == 0 || hold_->count > 0) return acquired(token, sent);
    c_.connection().submit_on(
        c_.connection().generation(),
        resp::encode_command({"WAIT", std::to_string(cfg.wait_replicas),
                              std::to_string(cfg.wait_timeout.count())}),
        cfg.wait_timeout + cfg.command_timeout,
        [self = shared_from_this(), token, sent](std::error_code ec, reply r) {
          if (self->finished_) return;
          const auto& conf = self->c_.cfg();
          if (!ec && r.is_integer() && r.integer() >= static_cast<std::int64_t>(conf.wait_replicas)) {
            return self->acquired(token, sent);
          }
          if (conf.on_shortfall == config::shortfall_policy::accept) {
            self->hold_->replicated = false;
            return self->acquired(token, sent);
          }
          const std::error_code why = ec ? ec : make_error_code(errc::no_replicas);
          self->give_back([self, why] { self->finish(why); });
        });
  }

  void acquired(std::uint64_t token, clock::time_point sent) {
    const auto now = clock::now();
    if (hold_->lost) {
      // The hold was declared lost while this re-entry was in flight: do not build on it.
      return give_back([self = shared_from_this()] { self->finish(errc::lease_lost); });
    }
    if (now >= renewal_schedule::trusted_until(sent, hold_->lease)) {
      // The reply came after the lease could have run out: do not report a lock we cannot
      // trust. Give back exactly this acquisition, then try again or time out.
      return give_back([self = shared_from_this()] {
        if (self->finished_) return;
        if (self->time_left(clock::now())) return self->attempt();
        self->finish(errc::timeout);
      });
    }
    if (hold_->count.fetch_add(1) == 0) {
      hold_->token = token;
      c_.watchdog().add(hold_, sent);
    } else {
      c_.watchdog().refreshed(*hold_, sent);  // the script reset the lease
    }
    finish({});
  }

  void held_elsewhere(std::int64_t pttl) {
    const auto now = clock::now();
    if (!time_left(now)) return finish(errc::timeout);
    if (!registered_) {
      registered_ = true;
      // A new subscription's confirmation wakes us for one more check; on a channel still
      // subscribed (it lingers), an unlock message nobody heard since this attempt does.
      c_.waiters().add(keys_.channel, this, last_sent_);
      if (finished_) return;  // a grant that came before the registration was taken
    }
    if (wake_pending) return attempt();
    clock::duration d = c_.cfg().wait_recheck;
    // PTTL counts whole milliseconds left (rounded down), and a key is not expired until its
    // expiry millisecond has passed: 0 means "ends within the next millisecond", not "no lease".
    // Re-check one millisecond after the end, or a waiter that reaches the key in its last
    // millisecond would sleep a whole wait_recheck.
    if (pttl >= 0) d = std::min<clock::duration>(d, std::chrono::milliseconds{pttl + 1});
    if (standby_at_) {
      d = std::min<clock::duration>(d, std::max<clock::duration>(*standby_at_ - now, clock::duration::zero()));
      standby_at_.reset();
    }
    if (deadline_) d = std::min<clock::duration>(d, *deadline_ - now);
    sleep(d);
  }

  void sleep(clock::duration d) {
    const auto gen = ++sleep_gen_;
    timer_.expires_after(d);
    timer_.async_wait([self = shared_from_this(), gen](std::error_code ec) {
      if (ec || self->finished_ || gen != self->sleep_gen_ || self->attempting) return;
      self->attempt();
    });
  }

  // Releases the acquisition `count + 1` if (and only if) it was applied (the release script
  // is conditional on the count), then continues with `then`. If the give-back itself fails,
  // it keeps trying in the background.
  template <class Then>
  void give_back(Then then) {
    const auto have = hold_->count.load() + 1;
    giving_back_ = true;
    send_give_back(have, [self = shared_from_this(), have, then = std::move(then)](std::error_code ec) mutable {
      self->giving_back_ = false;
      // An op that goes on settles it with its next attempt; one that ended gives it back.
      // Announced before then() may complete the caller: a new acquire of this owner must
      // find it (it takes the strand's path, behind the give-back, and cancels it there).
      if (ec) self->announce_undo();
      then();
      if (ec && self->finished_) return self->undo_in_background(have);
      if (ec) self->end_undo();
    });
  }

  // Releases the acquisition that left the owner's count at `have` (conditional on it).
  template <class Done>
  void send_give_back(std::uint32_t have, Done done) {
    send_mutex_release(c_, keys_, lease_ms_, hold_->owner, have, {},
                       [done = std::move(done)](std::error_code ec, reply) mutable { done(ec); });
  }

  // The outcome stayed unknown: if the acquisition was applied, nobody would release it before
  // its lease ran out. Keep trying to give it back while the failure looks transient — through
  // a partition, with backoff — until the lease set by the last send has ended by itself.
  // A later acquire by the same owner cancels it (start()): from then on the acquisition it
  // would give back may be that op's.
  void undo_in_background(std::uint32_t have) {
    announce_undo();
    undo_until(have, last_sent_ + hold_->lease, std::chrono::milliseconds{50});
  }
  void announce_undo() {
    c_.undoing()[undo_key()] = undo_id();
    c_.undos_changed();
  }
  void undo_until(std::uint32_t have, clock::time_point until, clock::duration pause) {
    if (!undo_pending()) return;  // cancelled by a newer acquire of this owner
    if (c_.stopped() || clock::now() >= until) return end_undo();  // the key expires on its own
    send_give_back(have, [self = shared_from_this(), have, until, pause](std::error_code ec) {
      if (!ec || !is_retryable(ec) || self->c_.stopped()) return self->end_undo();
      auto timer = std::make_shared<asio::steady_timer>(self->c_.strand(), pause);
      timer->async_wait([self, timer, have, until, pause](std::error_code) {
        self->undo_until(have, until, std::min<clock::duration>(pause * 2, std::chrono::seconds{1}));
      });
    });
  }
  bool undo_pending() const {
    const auto it = c_.undoing().find(undo_key());
    return it != c_.undoing().end() && it->second == undo_id();
  }
  void end_undo() {
    if (undo_pending()) {
      c_.undoing().erase(undo_key());
      c_.undos_changed();
    }
  }
  std::string undo_key() const { return hold_->owner + ' ' + hold_->name; }  // owners have no spaces
  std::uintptr_t undo_id() const { return reinterpret_cast<std::uintptr_t>(this); }

  // Leaves the queue, so that no unlock names a waiter that is gone (or cannot be woken: its
  // entry would otherwise stay until it went stale), and if an unlock named it already, passes
  // the hand-off kept for it on to the next waiter. Fire and forget: if it is lost, the
  // hand-off ends by its expiry and the others re-check.
  void leave_queue() {
    queued_ = false;
    left_ = true;  // a grant made before the leave runs is the leave's to release
    pending_grant_.reset();
    send_mutex_release(c_, keys_, "0", "", 0, ticket_, [](std::error_code, reply) {});
  }

  void finish(std::error_code ec) {
    if (finished_) return;
    finished_ = true;
    ++sleep_gen_;
    timer_.cancel();
    if (registered_) {
      c_.waiters().remove(keys_.channel, this);
      // A wake-up meant for this waiter must not die with it: the lock may be free — one not
      // yet acted on, or one whose attempt ended without an answer (a transient error, then the
      // deadline). (A hand-off kept for its ticket is passed on by the leave below.)
      if ((wake_pending || woken_) && ec) c_.waiters().wake_one(keys_.channel);
    }
    // An attempt still out, or one whose answer never came, may have queued this waiter (and
    // a grant may follow): leave then too.
    if ((queued_ || (ticket_sent_ever_ && !left_)) && ec) leave_queue();
    // Ended (the client shuts down) with an attempt in flight: if it acquired, nobody would
    // release it before its lease ran out. Give back exactly that acquisition (a no-op if it
    // was not applied); the client waits for both to reach the server before it closes.
    if (attempting && ec) send_give_back(sent_have_ + 1, [](std::error_code) {});
    if (tracked_) c_.untrack(this);
    auto done = std::move(done_);
    done(ec, hold_);
  }

  client_impl& c_;
  std::shared_ptr<hold_state> hold_;
  std::optional<clock::time_point> deadline_;
  completion<std::shared_ptr<hold_state>> done_;
  asio::steady_timer timer_;
  const lock_keys keys_;
  const fencing_counters counters_;
  const std::string lease_ms_;
  std::string ticket_;  // empty: a try without waiting, not queued
  std::optional<clock::time_point> ambiguous_since_;
  clock::time_point last_sent_{};  // the latest attempt's send: its lease ends last
  std::uint32_t sent_have_ = 0;    // the count the latest attempt expected
  bool giving_back_ = false;       // a give-back is in flight
  std::optional<clock::time_point> transient_since_;
  int resends_ = 0;
  std::uint64_t sleep_gen_ = 0;
  bool registered_ = false, tracked_ = false, finished_ = false;
  bool queued_ = false;     // an attempt found the lock held and entered the waiter queue
  bool sent_ticket_ = false;  // the latest attempt carried the ticket (it may queue)
  bool unqueued_ = false;   // waits by re-checks only, out of the queue (channels refused)
  bool woken_ = false;      // woken, and no attempt since has found the lock held
  std::optional<clock::time_point> standby_at_;  // re-check by then (stood by while attempting)
  bool left_ = false;       // its leave was sent: it takes no grant
  bool ticket_sent_ever_ = false;  // an attempt carried the ticket (it may be queued)
  std::optional<grant> pending_grant_;  // granted while an attempt was out (taken on its reply)
  clock::time_point first_sent_{};      // its first attempt's send (a grant names one of its sends)
};

}  // namespace

bool start_acquire_from_caller(client_impl& c, std::shared_ptr<hold_state> hold,
                               std::optional<clock::time_point> deadline,
                               completion<std::shared_ptr<hold_state>> done) {
  return std::make_shared<acquire_op>(c, std::move(hold), deadline, std::move(done))->start_from_caller();
}

void start_acquire(client_impl& c, std::shared_ptr<hold_state> hold,
                   std::optional<clock::time_point> deadline,
                   completion<std::shared_ptr<hold_state>> done) {
  c.post_or_shutdown(std::move(done), [&c, hold = std::move(hold), deadline](auto complete) mutable {
    std::make_shared<acquire_op>(c, std::move(hold), deadline, std::move(complete))->start();
  });
}

}  // namespace dlock::detail
