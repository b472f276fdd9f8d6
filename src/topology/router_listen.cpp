// The router's pub/sub side (router.hpp): shard channels that follow their slot.
#include <asio/post.hpp>

#include "dlock/error.hpp"
#include "dlock/keys.hpp"
#include "topology/router.hpp"

namespace dlock::topology {

transport::subscriber& router::sub_at(const endpoint& e) {
  auto& n = node_at(e);
  if (!std::exchange(n.sub_started, true) && !stopped_) n.sub->start();
  return *n.sub;
}

std::vector<transport::listener_id> router::listen(transport::subscriber::listeners channels) {
  if (!cfg_.cluster()) return single_.sub->listen(std::move(channels));
  std::vector<transport::listener_id> ids;
  if (channels.empty()) return ids;
  const auto slot = keys::slot(channels.front().first);
  const auto at = target(slot);
  transport::subscriber::listeners inner;
  for (auto& [channel, fn] : channels) {
    const auto id = next_listener_++;
    ids.push_back(id);
    listeners_.emplace(id, listening{slot, channel, std::move(fn), at});
    inner.emplace_back(channel,
                       [self = shared_from_this(), id](const auto& ev) { self->on_event(id, ev); });
  }
  const auto inner_ids = sub_at(at).listen_shard(std::move(inner));
  for (std::size_t i = 0; i < ids.size(); ++i) listeners_.at(ids[i]).inner = inner_ids[i];
  return ids;
}

void router::unlisten(std::vector<transport::listener_id> ids) {
  if (!cfg_.cluster()) return single_.sub->unlisten(std::move(ids));
  std::map<std::pair<std::string, std::uint16_t>, std::vector<transport::listener_id>> by_node;
  for (auto id : ids) {
    auto it = listeners_.find(id);
    if (it == listeners_.end()) continue;
    by_node[{it->second.at.host, it->second.at.port}].push_back(it->second.inner);
    listeners_.erase(it);
  }
  for (auto& [key, inner] : by_node) {
    if (auto n = nodes_.find(key); n != nodes_.end()) n->second.sub->unlisten(std::move(inner));
  }
}

void router::listen_at(transport::listener_id id, listening& l) {
  l.at = target(l.slot);
  l.homeless = false;
  l.relocated = true;
  transport::subscriber::listeners one;
  one.emplace_back(l.channel,
                   [self = shared_from_this(), id](const auto& ev) { self->on_event(id, ev); });
  l.inner = sub_at(l.at).listen_shard(std::move(one)).front();
}

// A node that stops serving the slot drops the subscription (`moved`) or refuses it when it is
// made again after a reconnect (MOVED): the listener waits for the next map, then moves.
void router::on_event(transport::listener_id id, const transport::pubsub_event& ev) {
  using type = transport::pubsub_event::type;
  auto it = listeners_.find(id);
  if (it == listeners_.end()) return;
  auto& l = it->second;
  const bool lost = ev.what == type::moved ||
                    (ev.what == type::failed &&
                     (ev.ec == errc::moved || ev.ec == errc::ask || ev.ec == errc::cluster_down));
  if (lost) {
    l.homeless = true;
    return refresh();
  }
  auto fn = l.fn;  // the listener may unlisten itself
  if (ev.what == type::subscribed && std::exchange(l.relocated, false)) {
    auto again = ev;
    again.what = type::resubscribed;
    return fn(again);
  }
  fn(ev);
}

// After a map read: every listener whose slot lives elsewhere now listens there.
void router::relocate() {
  for (auto& [id, l] : listeners_) {
    if (!l.homeless && l.at == target(l.slot)) continue;
    if (auto n = nodes_.find({l.at.host, l.at.port}); n != nodes_.end()) {
      n->second.sub->unlisten(l.inner);  // nothing if the node dropped it already
    }
    listen_at(id, l);
  }
}

}  // namespace dlock::topology
