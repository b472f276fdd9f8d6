// What the router watches besides requests (router.hpp): what it sent to which node, the
// redirections it followed, which masters it learnt were demoted, and masters that are down.
#include <algorithm>
#include <asio/steady_timer.hpp>
#include <memory>

#include "dlock/error.hpp"
#include "runtime/observer.hpp"
#include "topology/router.hpp"

namespace dlock::topology {

std::vector<router::node_traffic> router::traffic() const {
  if (sentinels_) return sentinel_traffic();
  std::vector<node_traffic> out;
  for (const auto& [key, t] : traffic_) out.push_back(t);
  return out;
}

void router::count_sent(const endpoint& to) {
  auto& t = traffic_[{to.host, to.port}];
  t.node = to;
  ++t.commands;
  t.last_sent = clock::now();
}

void router::count_redirect(std::error_code ec) {
  if (ec == errc::moved || ec == errc::ask) {
    detail::observer_of(strand_).redirects.fetch_add(1, std::memory_order_relaxed);
  }
  if (ec == errc::moved) ++redirected_.moved;
  if (ec == errc::ask) ++redirected_.ask;
  if (ec == errc::try_again) ++redirected_.try_again;
  if (ec == errc::cluster_down) ++redirected_.cluster_down;
}

// A node that was a master before the map read and is not one after it was demoted (or is gone);
// one that is a master again is no longer.
void router::note_demotions(const std::vector<endpoint>& before) {
  const auto now_masters = masters();
  auto is_master = [&](const endpoint& e) {
    return std::find(now_masters.begin(), now_masters.end(), e) != now_masters.end();
  };
  for (const auto& e : before) {
    if (!is_master(e)) {
      auto& t = traffic_[{e.host, e.port}];
      t.node = e;
      t.demoted = clock::now();
    }
  }
  for (const auto& e : now_masters) {
    if (auto it = traffic_.find({e.host, e.port}); it != traffic_.end()) it->second.demoted = {};
  }
}

// A master the map routes to is unreachable: read the map every outage_refresh for outage_fast,
// then at doubling intervals up to periodic_refresh, until the map no longer names it (failed
// over) or it answers again, so that the client follows a failover within outage_refresh of the
// cluster making it rather than at its next periodic read, without reading the map every 250 ms
// for good when a master stays unreachable from here only.
void router::node_down(const endpoint& e) {
  if (stopped_ || !map_) return;
  const auto masters = map_->masters();
  if (std::find(masters.begin(), masters.end(), e) == masters.end()) return;
  down_.insert({e.host, e.port});
  refresh();
  if (std::exchange(outage_armed_, true)) return;
  outage_delay_ = outage_refresh;
  outage_since_ = clock::now();
  arm_outage();
}

void router::arm_outage() {
  outage_.expires_after(outage_delay_);
  outage_.async_wait([self = shared_from_this()](std::error_code ec) {
    if (ec || self->stopped_) {
      self->outage_armed_ = false;
      return;
    }
    const auto masters = self->masters();
    std::erase_if(self->down_, [&](const auto& key) {
      const endpoint e{key.first, key.second};
      auto n = self->nodes_.find(key);
      return std::find(masters.begin(), masters.end(), e) == masters.end() ||
             n == self->nodes_.end() || n->second.conn->connected();
    });
    if (self->down_.empty()) {
      self->outage_armed_ = false;
      return;
    }
    self->refresh();
    if (clock::now() - self->outage_since_ >= outage_fast) {
      self->outage_delay_ =
          std::min<std::chrono::milliseconds>(2 * self->outage_delay_, periodic_refresh);
    }
    self->arm_outage();
  });
}

}  // namespace dlock::topology
