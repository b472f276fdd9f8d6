#include "topology/router.hpp"

#include <algorithm>
#include <asio/post.hpp>
#include <tuple>
#include <utility>

#include "dlock/error.hpp"
#include "resp/encoder.hpp"

namespace dlock::topology {
namespace {

bool same_nodes(std::vector<endpoint> a, std::vector<endpoint> b) {
  auto key = [](const endpoint& e) { return std::tie(e.host, e.port); };
  auto less = [&](const endpoint& x, const endpoint& y) { return key(x) < key(y); };
  std::sort(a.begin(), a.end(), less);
  std::sort(b.begin(), b.end(), less);
  return a == b;
}

}  // namespace

router::router(transport::executor_type strand, config cfg, std::shared_ptr<asio::ssl::context> tls)
    : strand_{std::move(strand)},
      cfg_{std::move(cfg)},
      tls_{std::move(tls)},
      fallback_{cfg_.cluster() ? cfg_.cluster_nodes.front() : endpoint{cfg_.host, cfg_.port}},
      periodic_{strand_},
      outage_{strand_} {
  if (cfg_.sentinel()) sentinels_ = std::make_shared<sentinels>(strand_, cfg_, tls_);
  if (!cfg_.cluster()) single_ = make_node(fallback_);
  if (sentinels_) follow_sentinels();
}

void router::on_reconnect(std::function<void()> fn) {
  on_reconnect_ = std::move(fn);
  if (single_.conn) single_.conn->on_reconnect(on_reconnect_);
}

void router::when_unfenced(std::function<void(const std::string&)> fn) {
  on_unfenced_ = std::move(fn);
  if (single_.conn) single_.conn->when_unfenced(on_unfenced_);
}

router::node router::make_node(const endpoint& e) const {
  auto c = cfg_;
  c.host = e.host;
  c.port = e.port;
  auto sub_cfg = c;
  sub_cfg.client_name += sub_cfg.client_name.empty() ? "" : ":sub";
  node n{std::make_shared<transport::connection>(strand_, std::move(c), tls_),
         std::make_shared<transport::subscriber>(strand_, std::move(sub_cfg), tls_)};
  if (on_reconnect_) n.conn->on_reconnect(on_reconnect_);
  if (on_unfenced_) n.conn->when_unfenced(on_unfenced_);
  return n;
}

router::node& router::first() { return cfg_.cluster() ? node_at(fallback_) : single_; }

// Cluster mode, strand only. A node's subscriber connects with its first listener.
router::node& router::node_at(const endpoint& e) {
  auto [it, fresh] = nodes_.try_emplace({e.host, e.port});
  if (!fresh) return it->second;
  it->second = make_node(e);
  auto down = [weak = weak_from_this(), e](std::error_code) {
    if (auto self = weak.lock()) self->node_down(e);
  };
  it->second.conn->when_down(down);
  it->second.sub->when_down(down);
  if (stopped_) {
    it->second.conn->stop();
    it->second.sub->stop();
  } else {
    it->second.conn->start();
  }
  return it->second;
}

void router::start() {
  if (sentinels_) sentinels_->start();
  if (!cfg_.cluster()) {
    single_.conn->start();
    single_.sub->start();
    return;
  }
  asio::post(strand_, [self = shared_from_this()] {
    self->first();
    self->refresh();
    self->arm_periodic();
  });
}

void router::stop() {
  asio::post(strand_, [self = shared_from_this()] {
    self->stopped_ = true;
    self->periodic_.cancel();
    self->outage_.cancel();
    auto held = std::move(self->before_map_);
    for (auto& req : held) req->handler(errc::shutdown, {});
    for (auto& [key, n] : self->nodes_) {
      n.conn->stop();
      n.sub->stop();
    }
  });
  if (!cfg_.cluster()) {
    single_.conn->stop();
    single_.sub->stop();
  }
  if (sentinels_) sentinels_->stop();
}

std::vector<std::shared_ptr<transport::connection>> router::connections() const {
  if (!cfg_.cluster()) return {single_.conn};
  std::vector<std::shared_ptr<transport::connection>> out;
  for (const auto& [key, n] : nodes_) out.push_back(n.conn);
  return out;
}

std::vector<endpoint> router::masters() const {
  return map_ ? map_->masters() : std::vector<endpoint>{};
}

endpoint router::target(std::uint16_t slot) const {
  if (map_) {
    if (const auto* m = map_->master(slot)) return *m;
  }
  return fallback_;
}

void router::submit(std::uint16_t slot, std::string payload, clock::duration timeout,
                    transport::reply_handler handler) {
  if (!cfg_.cluster() && !sentinels_) {
    // One server: no redirections to follow, so nothing to keep; the connection is thread-safe.
    return single_.conn->submit(std::move(payload), timeout, std::move(handler));
  }
  const auto deadline = clock::now() + timeout;
  auto req = std::make_shared<request>(
      request{slot, std::move(payload), deadline, std::move(handler), redirects{deadline}});
  if (sentinels_) return submit_to_master(std::move(req));
  asio::post(strand_, [self = shared_from_this(), req] {
    if (self->refused_) return req->handler(self->refused_, {});
    // Nothing is sent before the first map read: a server that refuses cluster mode must not
    // run a script whose caller is then told it failed.
    if (!self->map_ && !self->first_round_done_) return self->before_map_.push_back(req);
    self->send(req, self->target(req->slot), false);
  });
}

void router::send(std::shared_ptr<request> req, const endpoint& to, bool asking) {
  auto& n = node_at(to);
  const auto left = req->deadline - clock::now();
  if (asking) {
    count_sent(to);
    n.conn->submit(resp::encode_command({"ASKING"}), left, [](std::error_code, reply) {});
  }
  count_sent(to);
  n.conn->submit(req->payload, left,
                 [self = shared_from_this(), req, to](std::error_code ec, reply r) {
                   self->on_reply(std::move(req), to, ec, std::move(r));
                 });
}

void router::on_reply(std::shared_ptr<request> req, const endpoint& from, std::error_code ec,
                      reply r) {
  using kind = redirects::action::kind;
  const bool redirected =
      ec == errc::moved || ec == errc::ask || ec == errc::try_again || ec == errc::cluster_down;
  if (redirected) {
    count_redirect(ec);
    const auto a = req->policy.on_error(r.str(), from, clock::now());
    if (a.moved && map_) map_->moved(a.slot, a.to);
    if (a.moved && !map_) fallback_ = a.to;
    if (a.refresh) refresh();
    if (a.what == kind::send_asking) return send(std::move(req), a.to, true);
    if (a.what == kind::send && a.delay == clock::duration::zero()) {
      return send(std::move(req), a.moved ? a.to : target(req->slot), false);
    }
    if (a.what == kind::send) {
      auto timer = std::make_shared<asio::steady_timer>(strand_, a.delay);
      return timer->async_wait([self = shared_from_this(), req, timer](std::error_code) {
        if (self->stopped_) return req->handler(errc::shutdown, {});
        self->send(req, self->target(req->slot), false);
      });
    }
  } else if (ec == errc::connection_refused || ec == errc::connect_timeout ||
             ec == errc::connection_lost || ec == errc::read_only) {
    refresh();  // the node may be gone or demoted
  }
  replying_ = node_at(from).conn;
  req->handler(ec, std::move(r));
  replying_.reset();
}

}  // namespace dlock::topology

namespace dlock::topology {

// Reads the map from the masters known, then the seeds, then every node named: the first
// answer wins. At most one read at a time, and not within min_refresh_gap of the last.
void router::refresh() {
  if (!cfg_.cluster() || stopped_ || refused_) return;
  if (refreshing_) {
    refresh_again_ = true;
    return;
  }
  const auto now = clock::now();
  if (now - last_refresh_ < min_refresh_gap) {
    refreshing_ = true;  // one deferred read covers every request until then
    auto timer = std::make_shared<asio::steady_timer>(strand_, last_refresh_ + min_refresh_gap);
    timer->async_wait([self = shared_from_this(), timer](std::error_code) {
      self->refreshing_ = false;
      self->refresh();
    });
    return;
  }
  refreshing_ = true;
  last_refresh_ = now;
  auto candidates = std::make_shared<std::vector<endpoint>>(masters());
  auto add = [&](const endpoint& e) {
    if (std::find(candidates->begin(), candidates->end(), e) == candidates->end()) {
      candidates->push_back(e);
    }
  };
  for (const auto& e : cfg_.cluster_nodes) add(e);
  if (map_) {
    for (const auto& e : map_->nodes()) add(e);
  }
  // Masters known to be down are asked last: a read queued on a dead link waits its connect
  // timeout before the next node is asked.
  std::stable_partition(candidates->begin(), candidates->end(), [&](const endpoint& e) {
    return !down_.contains({e.host, e.port});
  });
  read_map(std::move(candidates), 0);
}

void router::read_map(std::shared_ptr<std::vector<endpoint>> candidates, std::size_t at) {
  if (stopped_) return;
  if (at == candidates->size()) {  // nobody answered: try again later
    release_waiting();
    auto timer = std::make_shared<asio::steady_timer>(strand_, failed_round_pause);
    return timer->async_wait([self = shared_from_this(), timer](std::error_code) {
      self->refreshing_ = false;
      self->refresh_again_ = false;
      self->refresh();
    });
  }
  const auto asked = (*candidates)[at];
  node_at(asked).conn->submit(
      resp::encode_command({"CLUSTER", "SHARDS"}), cfg_.command_timeout,
      [self = shared_from_this(), candidates, at, asked](std::error_code ec, reply r) {
        std::string why;
        if (ec == errc::server_error) self->refuse(r.str());
        if (self->refused_) {
          self->refreshing_ = false;
          return self->release_waiting();
        }
        auto m = ec ? std::nullopt : slot_map::from_shards(r, asked, self->cfg_.tls.enabled, why);
        if (!m || m->unserved() == slot_count) return self->read_map(candidates, at + 1);
        self->adopt(std::move(*m));
        self->release_waiting();
        self->refreshing_ = false;
        if (std::exchange(self->refresh_again_, false)) self->refresh();
      });
}

// A node the new map does not name as a master gets no new request; its links close once
// nothing waits on them.
void router::adopt(slot_map m) {
  // Compared with the last map read, not with map_, which MOVED replies may have changed since.
  const auto before = std::exchange(adopted_masters_, m.masters());
  map_ = std::move(m);
  note_demotions(before);
  const auto masters = map_->masters();
  // A master gone or new is a failover: a hold written just before it may be missing on the new
  // master, so every hold is checked now rather than at its next renewal.
  if (!before.empty() && !same_nodes(before, masters) && on_reconnect_) on_reconnect_();
  if (!masters.empty()) fallback_ = masters.front();
  relocate();
  for (auto it = nodes_.begin(); it != nodes_.end();) {
    const endpoint e{it->first.first, it->first.second};
    const bool named = std::find(masters.begin(), masters.end(), e) != masters.end();
    if (named || it->second.conn->unanswered() > 0 || it->second.sub->listening()) {
      ++it;
      continue;
    }
    it->second.conn->stop();
    it->second.sub->stop();
    it = nodes_.erase(it);
  }
}

// A server that does not know CLUSTER SHARDS (before 7.0) or has cluster support disabled
// cannot serve cluster mode: every request fails with the reason from now on.
void router::refuse(const std::string& text) {
  if (text.find("unknown subcommand") == std::string::npos &&
      text.find("cluster support disabled") == std::string::npos) {
    return;
  }
  refused_ = errc::unsupported_server;
  if (on_refused_) on_refused_(text);
}

// After the first map read (or a round in which no seed answered, so that requests fail as
// their connections do rather than wait), requests held back go out, or fail if refused.
void router::release_waiting() {
  first_round_done_ = true;
  auto held = std::move(before_map_);
  before_map_.clear();
  for (auto& req : held) {
    if (refused_) {
      req->handler(refused_, {});
    } else {
      send(req, target(req->slot), false);
    }
  }
}

void router::arm_periodic() {
  periodic_.expires_after(periodic_refresh);
  periodic_.async_wait([self = shared_from_this()](std::error_code ec) {
    if (ec || self->stopped_) return;
    self->refresh();
    self->arm_periodic();
  });
}

}  // namespace dlock::topology
