#include "transport/subscriber.hpp"

#include <asio/post.hpp>

#include "dlock/error.hpp"

namespace dlock::transport {

subscriber::subscriber(executor_type strand, config cfg, std::shared_ptr<asio::ssl::context> tls)
    : link{std::move(strand), std::move(cfg), std::move(tls)}, overdue_timer_{get_executor()} {}

std::vector<listener_id> subscriber::listen(listeners channels) {
  return add(subscriptions::kind::channel, std::move(channels));
}

std::vector<listener_id> subscriber::listen_shard(listeners channels) {
  return add(subscriptions::kind::shard, std::move(channels));
}

listener_id subscriber::listen(std::string channel, pubsub_listener fn) {
  listeners one;
  one.emplace_back(std::move(channel), std::move(fn));
  return add(subscriptions::kind::channel, std::move(one)).front();
}

listener_id subscriber::listen_pattern(std::string pattern, pubsub_listener fn) {
  listeners one;
  one.emplace_back(std::move(pattern), std::move(fn));
  return add(subscriptions::kind::pattern, std::move(one)).front();
}

std::vector<listener_id> subscriber::add(subscriptions::kind k, listeners items) {
  std::vector<listener_id> ids;
  for (std::size_t i = 0; i < items.size(); ++i) ids.push_back(next_id_++);
  asio::post(get_executor(), [self = std::static_pointer_cast<subscriber>(shared_from_this()), ids,
                              k, items = std::move(items)]() mutable {
    if (self->stopped()) return;
    std::vector<std::string> fresh;
    for (std::size_t i = 0; i < items.size(); ++i) {
      auto& [name, fn] = items[i];
      if (self->subs_.add(ids[i], k, name, std::move(fn))) fresh.push_back(name);
    }
    if (fresh.empty() || !self->ready()) return;
    self->subs_.subscribe_command(self->out_, k, fresh, self->deadline());
    self->want_write();
  });
  return ids;
}

void subscriber::unlisten(std::vector<listener_id> ids) {
  asio::post(get_executor(), [self = std::static_pointer_cast<subscriber>(shared_from_this()),
                              ids = std::move(ids)] {
    // One command per kind: a batch may mix channels and patterns.
    std::vector<std::string> last[3];
    for (auto id : ids) {
      if (auto gone = self->subs_.remove(id)) {
        last[static_cast<int>(gone->first)].push_back(std::move(gone->second));
      }
    }
    if (!self->ready()) return;
    using kind = subscriptions::kind;
    for (auto k : {kind::channel, kind::pattern, kind::shard}) {
      if (last[static_cast<int>(k)].empty()) continue;
      self->subs_.unsubscribe_command(self->out_, k, last[static_cast<int>(k)], self->deadline());
      self->want_write();
    }
  });
}

void subscriber::fill_write(std::string& out) {
  out.swap(out_);
  out_.clear();
  if (out.empty()) return;
  if (!overdue_armed_) arm_overdue_check();
}

// Confirmations are owed: a command unconfirmed past its deadline means the link is stuck.
// Checked once per command timeout while anything is owed (found within two timeouts).
void subscriber::arm_overdue_check() {
  overdue_armed_ = true;
  overdue_timer_.expires_after(cfg().command_timeout);
  overdue_timer_.async_wait(
      [self = std::static_pointer_cast<subscriber>(shared_from_this())](std::error_code ec) {
        self->overdue_armed_ = false;
        if (ec || !self->ready()) return;
        if (self->subs_.overdue(clock::now())) return self->drop(errc::timeout);
        if (self->subs_.awaiting()) self->arm_overdue_check();
      });
}

void subscriber::on_ready() {
  out_.clear();
  subs_.resubscribe_all(out_, deadline());
}

void subscriber::on_reply(reply r) {
  if (!subs_.on_reply(r)) return drop(errc::protocol_error);
  if (subs_.split_refused(out_, deadline())) want_write();
}

void subscriber::on_down(std::error_code) {
  overdue_timer_.cancel();
  out_.clear();
  subs_.on_disconnect();
}

void subscriber::on_idle() {
  subs_.ping_command(out_, deadline());
  want_write();
}

void subscriber::on_stopped() {
  overdue_timer_.cancel();
  subs_.on_disconnect();
}

}  // namespace dlock::transport
