#include "transport/subscriber.hpp"

#include <asio/post.hpp>

#include "dlock/error.hpp"

namespace dlock::transport {

subscriber::subscriber(executor_type strand, config cfg, std::shared_ptr<asio::ssl::context> tls)
    : link{std::move(strand), std::move(cfg), std::move(tls)}, overdue_timer_{get_executor()} {}

listener_id subscriber::listen(std::string channel, pubsub_listener fn) {
  return add(subscriptions::kind::channel, std::move(channel), std::move(fn));
}

listener_id subscriber::listen_pattern(std::string pattern, pubsub_listener fn) {
  return add(subscriptions::kind::pattern, std::move(pattern), std::move(fn));
}

listener_id subscriber::add(subscriptions::kind k, std::string name, pubsub_listener fn) {
  const auto id = next_id_++;
  asio::post(get_executor(), [self = std::static_pointer_cast<subscriber>(shared_from_this()), id,
                              k, name = std::move(name), fn = std::move(fn)]() mutable {
    if (self->stopped()) return;
    if (self->subs_.add(id, k, name, std::move(fn)) && self->ready()) {
      self->subs_.subscribe_command(self->out_, k, {name}, self->deadline());
      self->want_write();
    }
  });
  return id;
}

void subscriber::unlisten(listener_id id) {
  asio::post(get_executor(), [self = std::static_pointer_cast<subscriber>(shared_from_this()), id] {
    auto last = self->subs_.remove(id);
    if (!last || !self->ready()) return;
    self->subs_.unsubscribe_command(self->out_, last->first, {last->second}, self->deadline());
    self->want_write();
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
  if (!subs_.on_reply(r)) drop(errc::protocol_error);
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
