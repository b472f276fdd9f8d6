// The router in sentinel mode (router.hpp): links that follow the master the sentinels name, and
// requests sent again after a READONLY or while no master answers.
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>

#include "dlock/error.hpp"
#include "topology/router.hpp"

namespace dlock::topology {

// A request that ran nowhere waits this long (doubling) for the links to move before it goes
// again: the sentinels answer in about a millisecond on a LAN.
static constexpr std::chrono::milliseconds resend_pause{20};

void router::follow_sentinels() {
  std::weak_ptr<sentinels> weak = sentinels_;
  auto locate = [weak](transport::link::located fn) {
    if (auto s = weak.lock()) return s->locate(std::move(fn));
    fn(errc::shutdown, {});
  };
  auto not_master = [weak] {
    if (auto s = weak.lock()) s->rediscover();
  };
  single_.conn->follow(locate, not_master);
  single_.sub->follow(locate, not_master);
  // Constructed before any shared_ptr owns the router: the hook holds the links, not the router.
  sentinels_->on_switch([conn = single_.conn, sub = single_.sub](const endpoint& master) {
    conn->leave_unless(master);
    sub->leave_unless(master);
  });
}

// Never run: refused by a demoted node (READONLY), or never written while no master answered
// (the sentinels may still name a dead one: a failover takes them seconds). Sent again within the
// request's own timeout, once the sentinels were asked again.
static bool ran_nowhere(std::error_code ec) {
  return ec == errc::read_only || ec == errc::connection_refused || ec == errc::connect_timeout;
}

void router::submit_to_master(std::shared_ptr<request> req) {
  const auto left = req->deadline - clock::now();
  auto on_reply = [self = shared_from_this(), req](std::error_code ec, reply r) {
    if (!ran_nowhere(ec) || self->stopped_) return req->handler(ec, std::move(r));
    self->sentinels_->rediscover();
    const auto pause = resend_pause * (1 << std::min(req->resends++, 6));
    if (clock::now() + pause >= req->deadline) return req->handler(ec, std::move(r));
    auto timer = std::make_shared<asio::steady_timer>(self->strand_, pause);
    timer->async_wait([self, req, timer](std::error_code) {
      if (self->stopped_) return req->handler(errc::shutdown, {});
      self->submit_to_master(req);
    });
  };
  single_.conn->submit(req->payload, left, std::move(on_reply));
}

std::vector<router::node_traffic> router::sentinel_traffic() const {
  std::vector<node_traffic> out;
  auto at = [&](const endpoint& e) -> node_traffic& {
    for (auto& t : out) {
      if (t.node == e) return t;
    }
    out.push_back({.node = e});
    return out.back();
  };
  for (const auto* l : {static_cast<const transport::link*>(single_.conn.get()),
                        static_cast<const transport::link*>(single_.sub.get())}) {
    for (const auto& [e, when] : l->last_writes()) {
      auto& t = at(e);
      t.last_sent = std::max(t.last_sent, when);
      if (l == single_.conn.get()) t.commands = single_.conn->writes();
    }
  }
  for (const auto& d : sentinels_->demotions()) at(d.node).demoted = d.at;
  return out;
}

}  // namespace dlock::topology
