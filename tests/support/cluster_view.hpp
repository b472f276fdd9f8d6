// One Redis Cluster node's picture of the cluster (its CLUSTER NODES reply), parsed, and the
// checks redis_cluster (redis_cluster.hpp) uses to decide that every node agrees.
//
//   auto view = dlock::test::parse_cluster_nodes(srv.command({"CLUSTER", "NODES"}));
//   auto owner = dlock::test::slot_owner(view, 1234);   // node ID, "" if nobody serves it
//
// CLUSTER NODES is used rather than CLUSTER SLOTS / SHARDS: it is a single bulk string (no
// nested arrays to take apart from send_command's rendering) and it carries the same table the
// other two are computed from, plus each node's flags (fail?, fail, handshake...).
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dlock::test {

inline constexpr int cluster_slot_count = 16384;

struct cluster_node_entry {
  std::string id;
  std::uint16_t port = 0;          // client port (from "ip:port@cport[,hostname]")
  std::vector<std::string> flags;  // myself, master, slave, fail?, fail, handshake, noaddr...
  std::string master_id;           // a replica's master; "-" for masters
  std::string link_state;          // connected / disconnected
  std::vector<std::pair<int, int>> slots;  // owned ranges, inclusive; the "[s->-id]" /
                                           // "[s-<-id]" migration markers are left out

  bool has(std::string_view flag) const;
  bool is_master() const { return has("master"); }
  bool is_replica() const { return has("slave"); }  // `slave`, the flag Redis 7.0 prints
  bool failing() const { return has("fail") || has("fail?"); }
  bool owns(int slot) const;
};

using cluster_view = std::vector<cluster_node_entry>;

// Parses a CLUSTER NODES reply (as send_command renders a bulk string: its raw text). Throws
// std::runtime_error on a line it cannot read (an error reply, for instance).
cluster_view parse_cluster_nodes(const std::string& text);

// The entry with this node ID, or nullptr.
const cluster_node_entry* find_node(const cluster_view& view, const std::string& id);

// The ID of the master that serves `slot` in this view, or "" if none does.
std::string slot_owner(const cluster_view& view, int slot);

// Checks that this view is healthy for the nodes whose IDs are in `live` (the ones running):
// each of them is listed, without fail?/fail/handshake/noaddr flags, and every slot is served by
// exactly one master among them. Returns a canonical text of what every node must agree on (the
// live nodes' roles, masters and slot ranges), or nullopt with the first problem in *why.
std::optional<std::string> healthy_summary(const cluster_view& view,
                                           const std::set<std::string>& live, std::string* why);

}  // namespace dlock::test
