#include "sync/multi_op.hpp"

#include <asio/error.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <asio/system_executor.hpp>
#include <map>
#include <mutex>
#include <random>

#include "dlock/keys.hpp"
#include "runtime/client_impl.hpp"
#include "runtime/observer.hpp"
#include "runtime/owner.hpp"
#include "runtime/waiters.hpp"
#include "sync/group_attempt.hpp"
#include "sync/round_machine.hpp"

namespace dlock::detail {

std::chrono::milliseconds attempt_budget(std::chrono::milliseconds lease,
                                         std::chrono::milliseconds command_timeout) {
  return std::clamp(lease / 10, std::chrono::milliseconds{1}, command_timeout);
}

namespace {

// Members that share a client and (in a cluster) a slot: one script each.
std::vector<std::vector<std::size_t>> group(const std::vector<group_member>& members) {
  std::map<std::pair<const client_impl*, std::uint16_t>, std::vector<std::size_t>> by;
  for (std::size_t i = 0; i < members.size(); ++i) {
    const auto& m = members[i];
    const std::uint16_t slot = m.client->cfg().cluster() ? keys::slot(m.name) : 0;
    by[{m.client.get(), slot}].push_back(i);
  }
  std::vector<std::vector<std::size_t>> out;
  for (auto& [key, list] : by) out.push_back(std::move(list));
  return out;
}

std::uint64_t seed() {
  static std::atomic<std::uint64_t> n{std::random_device{}()};
  return n.fetch_add(0x9e3779b97f4a7c15ULL);
}

// Listens, on one member's client, for that member's unlock (Redisson's channel of the name and
// dlock's, as a mutex waiter does) and tells the operation. Registered and removed on that
// client's I/O thread; alive while registered.
class round_waiter final : public waiter {
 public:
  round_waiter(std::function<void()> woken, client_impl& c, std::string name)
      : woken_{std::move(woken)}, c_{c}, topic_{lock_kind::mutex, std::move(name), {}} {}

  static void listen(const std::shared_ptr<round_waiter>& w, std::uint64_t since) {
    w->c_.post_if_running([w, since] {
      w->self_ = w;
      if (w->c_.waiters().add(w->topic_, w.get(), since)) w->wake(false);
    });
  }
  static void stop(const std::shared_ptr<round_waiter>& w) {
    w->c_.post_if_running([w] {
      if (!w->self_) return;
      w->c_.waiters().remove(w->topic_, w.get());
      w->self_.reset();
    });
  }
  void wake(bool foreign) override {
    if (passing_) return;
    // A `0` wakes one waiter of this process: this operation may not take the lock (another
    // member may be held), so a waiter of the name beside it hears it too.
    if (foreign && c_.waiters().waiters(topic_.key()) > 1) {
      passing_ = true;
      c_.waiters().pass_on(topic_.key());
      passing_ = false;
    }
    woken_();
  }
  void wake_by(clock::time_point) override {}  // the round's own pause is shorter than a yield

 private:
  std::function<void()> woken_;
  client_impl& c_;
  const wait_topic topic_;
  std::shared_ptr<round_waiter> self_;
  bool passing_ = false;
};

class group_op final : public abortable, public std::enable_shared_from_this<group_op> {
 public:
  using lock_t = std::unique_lock<std::mutex>;

  group_op(const std::vector<group_member>& members, group_request req,
           completion<std::vector<lease>> done)
      : members_{members},
        groups_{group(members)},
        req_{req},
        m_{round_machine::params{.members = members.size(),
                                 .needed = req.needed,
                                 .floor = req.floor,
                                 .deadline = req.deadline,
                                 .seed = seed()}},
        leases_(members.size()),
        timer_{members.front().client->strand()},
        done_{std::move(done)} {}

  void start() {
    // Tracked by the first member's client, which runs the timer: its shutdown ends the wait.
    auto& first = *members_.front().client;
    const bool running = first.post_if_running([self = shared_from_this()] {
      lock_t lk{self->mu_};
      if (self->m_.done()) return;  // cancelled before it started
      // Kept alive while tracked: the client's shutdown sweep calls abort() through a raw
      // pointer.
      self->self_ = self;
      self->members_.front().client->track(self.get());
      self->step(self->m_.start(clock::now()), lk);
    });
    if (!running) {
      auto done = std::move(done_);
      asio::post(asio::system_executor{},
                 [done = std::move(done)]() mutable { done(errc::shutdown, {}); });
    }
  }
  void cancel(std::error_code ec) {
    lock_t lk{mu_};
    step(m_.on_cancel(ec, clock::now()), lk);
  }
  // The first member's client shuts down (on its I/O thread).
  void abort(std::error_code ec) override {
    auto keep = self_;
    cancel(ec);
    untrack();
  }

 private:
  void step(round_machine::actions a, lock_t& lk) {
    if (a.release) leases_ = std::vector<lease>(members_.size());  // released in the background
    if (a.complete) return complete(*a.complete, lk);
    if (a.attempt) attempt();
    if (a.floor) floor(*a.floor);
    if (a.timer) arm(*a.timer);
    if (a.listen && !listening_) listen(*a.listen);
  }

  // Listens for member i's unlock until the operation completes.
  void listen(std::size_t i) {
    auto& c = *members_[i].client;
    std::weak_ptr<group_op> weak = shared_from_this();
    listening_ = std::make_shared<round_waiter>(
        [weak] {
          if (auto self = weak.lock()) {
            lock_t lk{self->mu_};
            self->step(self->m_.on_wake(clock::now()), lk);
          }
        },
        c, members_[i].name);
    round_waiter::listen(listening_, marks_[i]);
  }

  // On the first member's I/O thread.
  void untrack() {
    if (!self_) return;
    timer_.cancel();
    members_.front().client->untrack(this);
    self_.reset();  // may destroy this: last
  }

  void attempt() {
    const auto round = ++round_;
    for (std::size_t g = 0; g < groups_.size(); ++g) {
      auto& c = *members_[groups_[g].front()].client;
      const auto lease = req_.lease.value_or(c.cfg().watchdog_lease);
      std::vector<std::shared_ptr<hold_state>> holds;
      for (auto i : groups_[g]) {
        holds.push_back(std::make_shared<hold_state>(
            members_[i].name, owner_field(c.id(), next_lease_number()), lease,
            !req_.lease.has_value(), next_lease_number(), lock_kind::mutex));
        holds.back()->metric = req_.kind;
      }
      const auto budget = attempt_budget(lease, c.cfg().command_timeout);
      auto self = shared_from_this();
      const bool running = c.post_if_running([self, round, g, holds, budget, &c]() mutable {
        {
          // What the waiters heard before this attempt: a listener registered after its reply
          // is woken by anything heard since (the unlock may come in between).
          std::lock_guard lk{self->mu_};
          for (auto i : self->groups_[g]) self->marks_[i] = c.waiters().mark();
        }
        send_group_attempt(c, holds, budget, [self, round, g, holds](group_result r) {
          self->on_group(round, g, r, holds);
        });
      });
      if (!running) {
        asio::post(asio::system_executor{}, [self, round, g] {
          group_result shut;
          shut.ec = errc::shutdown;
          self->on_group(round, g, shut, {});
        });
      }
    }
  }

  void on_group(std::uint64_t round, std::size_t g, const group_result& r,
                const std::vector<std::shared_ptr<hold_state>>& holds) {
    lock_t lk{mu_};
    const bool counts = round == round_ && m_.accepts(groups_[g].front());
    // Taken but not kept: a late reply (an earlier round's, or one its round was decided
    // without), or the replicas fell short: what it took goes back at once.
    std::vector<lease> taken;
    if (r.held) {
      for (std::size_t k = 0; k < holds.size(); ++k) {
        taken.push_back(lease_access::make(members_[groups_[g][k]].client, holds[k]));
      }
    }
    if (!counts || r.ec) taken.clear();
    round_machine::actions a;
    for (std::size_t k = 0; k < groups_[g].size(); ++k) {
      const auto i = groups_[g][k];
      round_machine::outcome o;
      o.ec = r.ec;
      o.pttl = r.pttl;
      o.acquired = r.held && !r.ec;
      if (!counts) {
        m_.on_late(i, o);
        continue;
      }
      if (o.acquired) {
        o.token = taken[k].fencing_token();
        o.trusted_until = clock::time_point{clock::duration{holds[k]->trusted_until.load()}};
        leases_[i] = std::move(taken[k]);
      }
      a = merge(a, m_.on_outcome(i, o, clock::now()));
    }
    step(a, lk);
  }

  // A group's outcomes settle the round only at its last member: one of them carries actions.
  static round_machine::actions merge(round_machine::actions a, round_machine::actions b) {
    const bool empty = !b.attempt && !b.floor && !b.release && !b.timer && !b.complete;
    return empty ? a : b;
  }

  void floor(std::uint64_t token) {
    const auto round = round_;
    for (std::size_t i = 0; i < members_.size(); ++i) {
      if (!leases_[i].owns()) continue;
      auto& c = *members_[i].client;
      auto self = shared_from_this();
      const bool running = c.post_if_running([self, round, i, token, &c] {
        send_fencing_floor(c, self->members_[i].name, token,
                           [self, round, i](bool ok) { self->on_floor(round, i, ok); });
      });
      if (!running) {
        asio::post(asio::system_executor{}, [self, round, i] { self->on_floor(round, i, false); });
      }
    }
  }

  void on_floor(std::uint64_t round, std::size_t i, bool ok) {
    lock_t lk{mu_};
    if (round != round_) return;
    step(m_.on_floor(i, ok, clock::now()), lk);
  }

  void arm(clock::time_point at) {
    const auto gen = ++timer_gen_;
    auto self = shared_from_this();
    const bool running = members_.front().client->post_if_running([self, gen, at] {
      // Posts from other threads may overtake one made on this thread: a newer arm() may have
      // run already, and must not be undone.
      {
        lock_t lk{self->mu_};
        if (gen != self->timer_gen_) return;
      }
      self->timer_.expires_at(at);
      self->timer_.async_wait([self, gen](std::error_code ec) {
        if (ec) return;
        lock_t lk{self->mu_};
        if (gen != self->timer_gen_) return;
        self->step(self->m_.on_timer(clock::now()), lk);
      });
    });
    if (!running) {
      asio::post(asio::system_executor{}, [self] { self->cancel(errc::shutdown); });
    }
  }

  void complete(std::error_code ec, lock_t& lk) {
    auto keep = shared_from_this();  // untrack() may drop the last other reference
    ++timer_gen_;
    auto done = std::move(done_);
    std::vector<lease> out;
    if (!ec) out = std::move(leases_);
    const auto handed = clock::now().time_since_epoch().count();
    for (const auto& l : out) {
      if (const auto& h = lease_access::hold(l)) h->acquired_at = handed;
    }
    leases_ = std::vector<lease>(members_.size());
    if (listening_) round_waiter::stop(std::exchange(listening_, nullptr));
    auto& first = *members_.front().client;
    if (first.on_io_thread()) {
      untrack();
    } else {
      // If the client is stopping, its sweep aborts the op, which untracks it.
      first.post_if_running([self = shared_from_this()] { self->untrack(); });
    }
    lk.unlock();
    // The round machine ends with timeout only at its deadline (an error a retry would meet
    // again is the answer otherwise).
    if (done) first.observer().acquisition(req_.kind, started_, ec, ec == errc::timeout);
    if (done) done(ec, std::move(out));
  }

  std::vector<group_member> members_;
  std::vector<std::vector<std::size_t>> groups_;
  group_request req_;
  std::mutex mu_;
  round_machine m_;
  std::uint64_t round_ = 0, timer_gen_ = 0;
  const clock::time_point started_ = clock::now();  // the call (wait time)
  std::vector<lease> leases_;                       // this round's acquisitions, by member
  std::vector<std::uint64_t> marks_ = std::vector<std::uint64_t>(members_.size());
  std::shared_ptr<round_waiter> listening_;
  asio::steady_timer timer_;  // the first member's I/O thread only
  completion<std::vector<lease>> done_;
  std::shared_ptr<group_op> self_;  // while tracked by the first member's client
};

}  // namespace

canceller start_group_acquire(const std::vector<group_member>& members, group_request req,
                              completion<std::vector<lease>> done) {
  auto op = std::make_shared<group_op>(members, req, std::move(done));
  op->start();
  std::weak_ptr<group_op> weak = op;
  return [weak] {
    if (auto live = weak.lock()) live->cancel(asio::error::operation_aborted);
  };
}

}  // namespace dlock::detail
