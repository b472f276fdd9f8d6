// Which master serves each of Redis Cluster's 16,384 slots, with no sockets: built from a
// CLUSTER SHARDS reply, corrected by MOVED redirections between reads.
//
// Redis >= 7.0 only (CLUSTER SHARDS is new in 7.0; older servers answer it with an error, which
// the caller reports as errc::unsupported_server). A shard's master is its node with role
// `master` whose health is not `failed`; a shard without one leaves its slots unserved until the
// next read. An empty `endpoint` field means "the address you asked" (a node that never learned
// its own address, e.g. alone in its cluster).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/config.hpp"
#include "dlock/node_status.hpp"
#include "dlock/reply.hpp"

namespace dlock::topology {

inline constexpr std::size_t slot_count = 16384;

// "host:port" (IPv6 hosts in brackets), for messages.
std::string to_string(const endpoint& e);

class slot_map {
 public:
  // Reads a CLUSTER SHARDS reply that `asked` answered. `tls`: the nodes' tls-port is used.
  // nullopt with `why` set when the reply is not one.
  static std::optional<slot_map> from_shards(const reply& r, const endpoint& asked, bool tls,
                                             std::string& why);

  // The master of `slot`, or nullptr when no master serves it (as far as this map knows).
  const endpoint* master(std::uint16_t slot) const noexcept;
  // A MOVED redirection: `slot` is served by `to` from now on.
  void moved(std::uint16_t slot, const endpoint& to);
  // Every master serving at least one slot, and every node the reply named (replicas too).
  std::vector<endpoint> masters() const;
  std::vector<endpoint> nodes() const;
  // Every node named, shard by shard in the order of the slots they serve, each shard's master
  // first: a node is a master if the reply named it one or this map has it serve slots (a MOVED
  // to a former replica), with the slots it serves here. rtt and error are left empty.
  std::vector<node_status> describe() const;
  // Slots no master serves.
  std::size_t unserved() const noexcept;

 private:
  // A node the reply named, or a MOVED did (in a shard of its own).
  struct member {
    endpoint at;
    bool master = false;  // the reply's role, whatever its health
    std::size_t shard = 0;
  };

  std::uint16_t index_of(const endpoint& e);  // adds e to masters_ if new; 1-based
  bool add_member(const endpoint& e, bool master, std::size_t shard);  // false: known already
  std::vector<slot_range> ranges_of(const endpoint& e) const;

  std::vector<endpoint> masters_;
  std::vector<member> members_;
  std::size_t shards_ = 0;
  std::array<std::uint16_t, slot_count> owner_{};  // 1-based index into masters_; 0 = none
};

// A MOVED or ASK error reply: `-MOVED 3999 127.0.0.1:6381`, `-ASK 3999 [::1]:6381` (an empty
// host means the node that answered, which the caller knows).
struct redirect {
  bool ask = false;
  std::uint16_t slot = 0;
  endpoint to;
};
std::optional<redirect> parse_redirect(std::string_view error_text);

}  // namespace dlock::topology
