#include "topology/sentinels.hpp"

#include <asio/post.hpp>
#include <utility>

#include "dlock/error.hpp"
#include "resp/encoder.hpp"
#include "runtime/observer.hpp"

namespace dlock::topology {

sentinels::sentinels(transport::executor_type strand, const config& cfg,
                     std::shared_ptr<asio::ssl::context> tls)
    : strand_{std::move(strand)},
      cfg_{cfg},
      tls_{std::move(tls)},
      view_{cfg.sentinel_nodes, cfg.sentinel_master},
      conns_(cfg.sentinel_nodes.size()),
      poll_{strand_} {}

config sentinels::sentinel_config(const endpoint& e) const {
  auto c = cfg_;
  c.host = e.host;
  c.port = e.port;
  c.username = cfg_.sentinel_user;
  c.password = cfg_.sentinel_password;
  c.database = 0;  // sentinels have no SELECT
  c.sentinel_nodes.clear();
  c.client_name += c.client_name.empty() ? "" : ":sentinel";
  return c;
}

void sentinels::start() {
  asio::post(strand_, [self = shared_from_this()] {
    if (self->stopped_) return;
    for (const auto& e : self->view_.sentinels()) {
      auto sub = std::make_shared<transport::subscriber>(self->strand_, self->sentinel_config(e),
                                                         self->tls_);
      std::weak_ptr<sentinels> weak = self;
      sub->listen("+switch-master", [weak](const transport::pubsub_event& ev) {
        auto me = weak.lock();
        if (!me || me->stopped_ || ev.what != transport::pubsub_event::type::message) return;
        if (auto to = me->view_.switched(ev.payload)) me->learn_switch(*to);
      });
      sub->start();
      self->subs_.push_back(std::move(sub));
    }
    self->arm_poll();
  });
}

void sentinels::stop() {
  asio::post(strand_, [self = shared_from_this()] {
    self->stopped_ = true;
    self->poll_.cancel();
    for (auto& s : self->subs_) s->stop();
    for (auto& c : self->conns_) {
      if (c) c->stop();
    }
    auto waiting = std::move(self->waiting_);
    for (auto& fn : waiting) fn(errc::shutdown, {});
  });
}

transport::connection& sentinels::conn(std::size_t i) {
  if (!conns_[i]) {
    conns_[i] = std::make_shared<transport::connection>(
        strand_, sentinel_config(view_.sentinels()[i]), tls_);
    conns_[i]->start();
  }
  return *conns_[i];
}

void sentinels::locate(located fn) {
  if (stopped_) return fn(errc::shutdown, {});
  if (view_.master() && !stale_) return fn({}, *view_.master());
  waiting_.push_back(std::move(fn));
  run_round();
}

void sentinels::rediscover() {
  stale_ = true;
  run_round();
}

void sentinels::run_round() {
  if (stopped_) return;
  if (running_) {
    again_ = stale_;  // asked again during a round: the answer may predate the reason
    return;
  }
  running_ = true;
  ask(view_.begin_round(stale_));
}

void sentinels::ask(std::size_t i) {
  conn(i).submit(resp::encode_command({"SENTINEL", "MASTER", view_.master_name()}),
                 cfg_.connect_timeout, [self = shared_from_this(), i](std::error_code ec, reply r) {
                   if (self->stopped_) return;
                   const auto s = self->view_.on_reply(i, ec, r);
                   if (s.ask) return self->ask(*s.ask);
                   self->finish(s);
                 });
}

void sentinels::finish(const sentinel_view::step& s) {
  running_ = false;
  if (s.found) {
    stale_ = false;
    const auto before = view_.master();
    if (view_.adopt(*s.found)) moved_from(*before);
  }
  // No newer word from the sentinels: the master followed stands.
  const auto master = view_.master();
  auto waiting = std::move(waiting_);
  waiting_.clear();
  for (auto& fn : waiting) {
    if (master && (s.found || !s.failed)) {
      fn({}, *master);
    } else {
      fn(s.failed ? s.failed : make_error_code(errc::connection_refused), {});
    }
  }
  if (std::exchange(again_, false)) rediscover();
}

void sentinels::learn_switch(const endpoint& e) {
  const auto before = view_.master();
  if (view_.adopt_switch(e) && before) moved_from(*before);
}

// The master moved (from `before`, now demoted) to view_.master(): a failover.
void sentinels::moved_from(const endpoint& before) {
  const auto now = *view_.master();
  demotions_.push_back({before, clock::now()});
  std::erase_if(demotions_, [&](const demotion& d) { return d.node == now; });
  auto& obs = detail::observer_of(strand_);
  obs.failovers.fetch_add(1, std::memory_order_relaxed);
  if (obs.wants_events()) {
    const auto node = now.host + ":" + std::to_string(now.port);
    const auto message = "failover followed: master " + before.host + ":" +
                         std::to_string(before.port) + " -> " + node;
    event e{event_type::failover, message};
    e.node = node;
    obs.emit(e);
  }
  if (on_switch_) on_switch_(now);
}

void sentinels::arm_poll() {
  poll_.expires_after(poll_interval);
  poll_.async_wait([self = shared_from_this()](std::error_code ec) {
    if (ec || self->stopped_) return;
    self->run_round();
    self->arm_poll();
  });
}

}  // namespace dlock::topology
