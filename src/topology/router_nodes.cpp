// The router's view of every node, for diagnostics (client::ping_nodes): the nodes the slot map
// names, and a connection to each, kept or short-lived.
#include "topology/router.hpp"

namespace dlock::topology {

std::vector<node_status> router::map_nodes() const {
  if (cfg_.cluster()) return map_ ? map_->describe() : std::vector<node_status>{};
  node_status one;
  one.address = sentinels_ ? single_.conn->target() : fallback_;
  return {one};
}

// A replica, or a master no request went to yet, has no connection the router keeps; one made
// here does not join nodes_, so routing never sends a request to a node that is not a master.
std::shared_ptr<transport::connection> router::connection_to(const endpoint& e, bool& kept) const {
  kept = true;
  if (!cfg_.cluster()) return single_.conn;
  if (auto it = nodes_.find({e.host, e.port}); it != nodes_.end()) return it->second.conn;
  kept = false;
  auto c = cfg_;
  c.host = e.host;
  c.port = e.port;
  auto conn = std::make_shared<transport::connection>(strand_, std::move(c), tls_);
  conn->start();
  return conn;
}

}  // namespace dlock::topology
