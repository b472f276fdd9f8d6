// dlock/node_status.hpp — one Redis node as client::ping_nodes() found it: where it is, what it
// is in its deployment, and whether it answered.
//
//   for (const auto& n : client.ping_nodes()) {
//     if (n.error) std::cerr << n.address.host << ':' << n.address.port << ' ' << n.error;
//   }
//
// The role and slots are what the cluster said when the client last read its slot map
// (CLUSTER SHARDS), not what the node says of itself: a node that cannot be reached is still
// listed, with the role the cluster gave it.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <system_error>
#include <vector>

#include "dlock/config.hpp"

namespace dlock {

enum class node_role {
  standalone,  // a single server (not a cluster); dlock does not ask it its replication role
  master,      // a cluster master (one whose health the cluster gave as failed serves no slots)
  replica,     // a cluster replica
};

// Slots first..last, both included.
struct slot_range {
  std::uint16_t first = 0, last = 0;
  friend bool operator==(const slot_range&, const slot_range&) = default;
};

struct node_status {
  endpoint address;
  node_role role = node_role::standalone;
  std::vector<slot_range> slots;       // a master's slots, in order; empty for other roles
  std::optional<endpoint> replica_of;  // a replica's master, if its shard has one
  std::chrono::microseconds rtt{};     // PING's round trip, once connected; 0 on error
  std::error_code error;               // why PING failed (errc::connection_refused, ...), or none
};

}  // namespace dlock
