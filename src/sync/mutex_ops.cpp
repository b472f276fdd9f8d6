// Argument checks, deadlines, keys and the release script shared by dlock::mutex's forms.
#include "sync/mutex_ops.hpp"

#include <asio/steady_timer.hpp>

#include "dlock/error.hpp"
#include "dlock/keys.hpp"
#include "runtime/client_impl.hpp"
#include "scripts/script.hpp"
#include "sync/kinds.hpp"

namespace dlock::detail {

std::error_code validate_name(const config& cfg, const std::string& name) {
  if (name.empty() || name.size() > cfg.max_name_length || !keys::same_slot(name)) {
    return errc::invalid_argument;
  }
  return {};
}

std::error_code validate_lease(std::chrono::milliseconds lease) {
  if (lease.count() <= 0 || lease > max_lease) return errc::invalid_argument;
  return {};
}

std::optional<clock::time_point> deadline_after(std::optional<std::chrono::milliseconds> wait) {
  if (!wait) return std::nullopt;
  if (*wait >= forever) return std::nullopt;
  return clock::now() + std::max(*wait, std::chrono::milliseconds{0});
}

lock_keys::lock_keys(const config& cfg, const std::string& lock_name, lock_kind kind,
                     const std::string& owner)
    : name{lock_name} {
  switch (kind) {
    case lock_kind::mutex:
      queue = keys::waiter_queue(lock_name);
      records = keys::waiter_records(lock_name);
      yield = keys::yield_marker(lock_name);
      dlock_channel = keys::dlock_channel(lock_name);
      channel = keys::lock_channel(lock_name);
      break;
    case lock_kind::fair:
      queue = keys::fair_queue(lock_name);
      records = keys::fair_timeouts(lock_name);
      channel = keys::lock_channel(lock_name);
      break;
    case lock_kind::read:
    case lock_kind::write:
      queue = keys::waiting_writers(lock_name);
      channel = keys::rwlock_channel(lock_name);
      hold_prefix = keys::read_hold_key(lock_name, owner, 0);
      hold_prefix.pop_back();  // ...:rwlock_timeout: and the hold's number
      tag = keys::suffixed(lock_name, "");
      tag.pop_back();
      break;
    case lock_kind::permits:
      queue = keys::permit_timeouts(lock_name);
      channel = keys::semaphore_channel(lock_name);
      return;  // no fencing
    case lock_kind::counting:
      records = keys::counting_marker(lock_name, owner);
      channel = keys::semaphore_channel(lock_name);
      return;
    case lock_kind::latch:
      channel = keys::latch_channel(lock_name);
      return;
  }
  if (cfg.fencing == config::fencing_mode::on) {
    slot_counter = keys::slot_fencing_counter_of(lock_name);
    lock_counter = keys::fencing_counter(lock_name);
  }
}

namespace {

struct give_back_op : std::enable_shared_from_this<give_back_op> {
  client_impl& c;
  std::shared_ptr<hold_state> hold;
  lock_keys keys;
  std::uint32_t have;
  std::string ticket;
  clock::time_point until;
  std::uint64_t id;
  clock::duration pause{std::chrono::milliseconds{50}};

  give_back_op(client_impl& cl, std::shared_ptr<hold_state> h, std::uint32_t hv, std::string t,
               clock::time_point u, std::uint64_t i)
      : c{cl},
        hold{std::move(h)},
        keys{cl.cfg(), hold->name, hold->kind, hold->owner},
        have{hv},
        ticket{std::move(t)},
        until{u},
        id{i} {}

  std::string key() const { return hold_key(*hold); }
  bool pending() const {
    auto it = c.undoing().find(key());
    return it != c.undoing().end() && it->second == id;
  }
  void end() {
    if (pending()) c.undoing().erase(key());
  }
  void send() {
    if (!pending()) return;  // a newer acquisition of this owner took over
    // (Sent during shutdown too: its sweep aborts waiters, and drains what they send.)
    if (clock::now() >= until) return end();  // expired by itself
    send_release(c, keys, *hold, have, ticket,
                 [self = shared_from_this()](std::error_code ec, reply) {
                   if (!ec || !is_retryable(ec) || self->c.stopped()) {
                     return self->end();
                   }
                   self->retry_later();
                 });
  }
  void retry_later() {
    auto timer = std::make_shared<asio::steady_timer>(c.strand(), pause);
    pause = std::min<clock::duration>(pause * 2, std::chrono::seconds{1});
    timer->async_wait([self = shared_from_this(), timer](std::error_code) { self->send(); });
  }
};

std::uint64_t next_give_back_id() {
  static std::atomic<std::uint64_t> n{0};
  return ++n;
}

}  // namespace

void give_back(client_impl& c, std::shared_ptr<hold_state> hold, std::uint32_t have,
               std::string ticket, clock::time_point until) {
  auto op = std::make_shared<give_back_op>(c, std::move(hold), have, std::move(ticket), until,
                                           next_give_back_id());
  c.undoing()[op->key()] = op->id;
  op->send();
}

}  // namespace dlock::detail
