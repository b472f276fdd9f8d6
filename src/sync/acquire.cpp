// The Asio shell of the acquire operation: carries out what acquire_machine decides (attempts,
// WAIT, the timer, the waiter registration, give-backs) and feeds it what happens.
#include <asio/error.hpp>
#include <asio/steady_timer.hpp>

#include "dlock/error.hpp"
#include "resp/encoder.hpp"
#include "runtime/client_impl.hpp"
#include "runtime/observer.hpp"
#include "scripts/script.hpp"
#include "sync/acquire_machine.hpp"
#include "sync/kinds.hpp"
#include "sync/mutex_ops.hpp"

namespace dlock::detail {
namespace {

acquire_machine::params machine_params(const config& cfg, const hold_state& hold,
                                       std::optional<clock::time_point> deadline) {
  acquire_machine::params p;
  p.deadline = deadline;
  p.have = hold.count.load();
  p.lease = hold.lease;
  p.recheck = cfg.wait_recheck;
  p.command_timeout = cfg.command_timeout;
  p.replicate = cfg.wait_replicas > 0 && hold.kind != lock_kind::latch;
  p.accept_shortfall = cfg.on_shortfall == config::shortfall_policy::accept;
  return p;
}

class acquire_op final : public waiter,
                         public abortable,
                         public std::enable_shared_from_this<acquire_op> {
 public:
  acquire_op(client_impl& c, std::shared_ptr<hold_state> hold,
             std::optional<clock::time_point> deadline)
      : c_{c},
        hold_{std::move(hold)},
        timer_{c.strand()},
        keys_{c.cfg(), hold_->name, hold_->kind, hold_->owner},
        topic_{hold_->kind, hold_->name, hold_->owner},
        m_{machine_params(c.cfg(), *hold_, deadline)} {
    ticket = c.waiters().make_ticket();
    ticket_ = std::to_string(ticket);
  }

  void set_done(completion<std::shared_ptr<hold_state>> done) { done_ = std::move(done); }
  // Any thread.
  void cancel() {
    c_.post_if_running(
        [self = shared_from_this()] { self->abort(asio::error::operation_aborted); });
  }

  // Runs on the I/O thread.
  void start() {
    if (hold_->lost) return complete(errc::lease_lost);
    c_.undoing().erase(hold_key(*hold_));  // this attempt settles the count
    c_.track(this);
    step(m_.start(clock::now()));
  }
  void wake(bool foreign) override { step(m_.on_wake(foreign, clock::now())); }
  void wake_by(clock::time_point at) override { step(m_.on_wake(false, clock::now(), at)); }
  void abort(std::error_code ec) override { step(m_.on_cancel(ec, clock::now())); }

 private:
  void step(acquire_machine::actions a) {
    if (a.give_back) {
      // Sent before the completion: a new acquire of the same owner goes out behind it.
      give_back(c_, hold_, a.give_back_have, ticket_, last_sent_ + hold_->lease);
    }
    if (a.complete) return complete(*a.complete);
    if (a.attempt) send_attempt(*a.attempt);
    if (a.send_wait) send_wait();
    if (a.timer) arm(*a.timer);
    if (a.subscribe && !registered_) {
      registered_ = true;
      // Named, or a message came, before it registered.
      if (c_.waiters().add(topic_, this, mark_)) wake(false);
    }
  }

  void send_attempt(const acquire_machine::attempt_args& args) {
    const auto sent = clock::now();
    last_sent_ = sent;
    mark_ = c_.waiters().mark();
    const attempt_request req{args.have, args.queue, args.foreign, ticket_, args.budget};
    detail::send_attempt(c_, keys_, *hold_, req,
                         [self = shared_from_this(), sent](std::error_code ec, reply r) {
                           self->step(self->m_.on_reply(ec, r, sent, clock::now()));
                         });
  }

  // In the attempt's reply handler: WAIT goes on the connection that replied (replication.hpp).
  void send_wait() {
    c_.replication().confirm(c_.router().replying(),
                             [self = shared_from_this()](std::error_code ec, bool enough) {
                               self->step(self->m_.on_replicas(ec, enough, clock::now()));
                             });
  }

  void arm(clock::time_point at) {
    const auto gen = ++timer_gen_;
    timer_.expires_at(at);
    timer_.async_wait([self = shared_from_this(), gen](std::error_code ec) {
      if (ec || gen != self->timer_gen_) return;
      self->step(self->m_.on_timer(clock::now()));
    });
  }

  void complete(std::error_code ec) {
    if (finished_) return;
    finished_ = true;
    ++timer_gen_;
    timer_.cancel();
    if (registered_) {
      c_.waiters().remove(topic_, this);
      // Woken by a `0` it could not answer (a timeout, a cancellation, an error): the lock may
      // be free, and the other waiters of this process were not woken.
      if (ec && m_.owes_wake()) c_.waiters().pass_on(topic_.key());
    }
    c_.untrack(this);
    c_.observer().acquisition(hold_->metric, started_, ec, m_.ended_busy(), released_at);
    if (!ec && !leased(hold_->kind)) {
      if (hold_->count.fetch_add(1) == 0)
        hold_->acquired_at = clock::now().time_since_epoch().count();
    } else if (!ec) {
      if (hold_->count.fetch_add(1) == 0) {
        hold_->acquired_at = clock::now().time_since_epoch().count();
        hold_->replicated = m_.replicated();
        hold_->token = m_.token();
        c_.watchdog().add(hold_, m_.trusted_from());
      } else {
        c_.watchdog().refreshed(*hold_, m_.trusted_from(),
                                hold_->lease);  // the script reset the lease
        if (!m_.replicated()) hold_->replicated = false;
      }
    }
    auto done = std::move(done_);
    done(ec, hold_);
  }

  client_impl& c_;
  std::shared_ptr<hold_state> hold_;
  completion<std::shared_ptr<hold_state>> done_;
  asio::steady_timer timer_;
  const lock_keys keys_;
  const wait_topic topic_;
  acquire_machine m_;
  std::string ticket_;
  clock::time_point last_sent_{};
  const clock::time_point started_ = clock::now();  // the call (wait time)
  std::uint64_t timer_gen_ = 0;
  std::uint64_t mark_ = 0;  // the waiter registry's mark when the last attempt was sent
  bool registered_ = false, finished_ = false;
};

}  // namespace

canceller start_acquire(client_impl& c, std::shared_ptr<hold_state> hold,
                        std::optional<clock::time_point> deadline,
                        completion<std::shared_ptr<hold_state>> done) {
  auto op = std::make_shared<acquire_op>(c, std::move(hold), deadline);
  c.post_or_shutdown(std::move(done), [op](auto complete) mutable {
    op->set_done(std::move(complete));
    op->start();
  });
  std::weak_ptr<acquire_op> weak = op;
  return [weak] {
    if (auto live = weak.lock()) live->cancel();
  };
}

}  // namespace dlock::detail
