#include "topology/slot_map.hpp"

#include <algorithm>
#include <charconv>
#include <tuple>

namespace dlock::topology {
namespace {

// The value of `key` in a RESP2 map (a flat array of key, value, ...), or nullptr.
const reply* field(const reply& map, std::string_view key) {
  if (!map.is_array()) return nullptr;
  const auto& e = map.elements();
  for (std::size_t i = 0; i + 1 < e.size(); i += 2) {
    if (e[i].is_string() && e[i].str() == key) return &e[i + 1];
  }
  return nullptr;
}

std::string text_of(const reply* r) { return r != nullptr && r->is_string() ? r->str() : ""; }

bool parse_port(std::string_view s, std::uint16_t& out) {
  unsigned v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || p != s.data() + s.size() || v == 0 || v > 65535) return false;
  out = static_cast<std::uint16_t>(v);
  return true;
}

struct shard_node {
  endpoint at;
  bool master = false;  // its role
  bool serves = false;  // a master whose health is not `fail`: it serves the shard's slots
};

// One node of a shard; nullopt when it has no usable address or is failed.
std::optional<shard_node> read_node(const reply& n, const endpoint& asked, bool tls) {
  const auto* port = field(n, tls ? "tls-port" : "port");
  if (port == nullptr) return std::nullopt;
  const auto p = port->to_integer();
  if (!p || *p <= 0 || *p > 65535) return std::nullopt;
  std::string host = text_of(field(n, "endpoint"));
  if (host.empty()) host = text_of(field(n, "ip"));
  if (host.empty()) host = asked.host;
  if (host == "?") return std::nullopt;  // its preferred endpoint is unknown
  shard_node out{endpoint{std::move(host), static_cast<std::uint16_t>(*p)}, false};
  out.master = text_of(field(n, "role")) == "master";
  // The command's documentation says `failed`; Redis 7.0 sends `fail`.
  const auto health = text_of(field(n, "health"));
  out.serves = out.master && health != "fail" && health != "failed";
  return out;
}

}  // namespace

std::string to_string(const endpoint& e) {
  const bool v6 = e.host.find(':') != std::string::npos;
  return (v6 ? "[" + e.host + "]" : e.host) + ":" + std::to_string(e.port);
}

std::optional<slot_map> slot_map::from_shards(const reply& r, const endpoint& asked, bool tls,
                                              std::string& why) {
  if (!r.is_array()) {
    why = "CLUSTER SHARDS: not an array: " + to_string(r);
    return std::nullopt;
  }
  slot_map m;
  for (const auto& shard : r.elements()) {
    const auto* slots = field(shard, "slots");
    const auto* nodes = field(shard, "nodes");
    if (slots == nullptr || nodes == nullptr || !slots->is_array() || !nodes->is_array() ||
        slots->elements().size() % 2 != 0) {
      why = "CLUSTER SHARDS: a shard without slots or nodes: " + to_string(shard);
      return std::nullopt;
    }
    std::optional<endpoint> master;
    const auto shard_index = m.shards_++;
    for (const auto& n : nodes->elements()) {
      auto node = read_node(n, asked, tls);
      if (!node) continue;
      m.add_member(node->at, node->master, shard_index);
      if (node->serves) master = node->at;
    }
    const auto& s = slots->elements();
    for (std::size_t i = 0; i < s.size(); i += 2) {
      const auto lo = s[i].to_integer(), hi = s[i + 1].to_integer();
      if (!lo || !hi || *lo < 0 || *hi < *lo || *hi >= static_cast<std::int64_t>(slot_count)) {
        why = "CLUSTER SHARDS: a bad slot range: " + to_string(*slots);
        return std::nullopt;
      }
      if (!master) continue;
      const auto owner = m.index_of(*master);
      std::fill(m.owner_.begin() + *lo, m.owner_.begin() + *hi + 1, owner);
    }
  }
  return m;
}

std::uint16_t slot_map::index_of(const endpoint& e) {
  auto it = std::find(masters_.begin(), masters_.end(), e);
  if (it == masters_.end()) it = masters_.insert(masters_.end(), e);
  return static_cast<std::uint16_t>(it - masters_.begin() + 1);
}

const endpoint* slot_map::master(std::uint16_t slot) const noexcept {
  if (slot >= slot_count || owner_[slot] == 0) return nullptr;
  return &masters_[owner_[slot] - 1];
}

void slot_map::moved(std::uint16_t slot, const endpoint& to) {
  if (slot >= slot_count) return;
  owner_[slot] = index_of(to);
  if (add_member(to, true, shards_)) ++shards_;
}

bool slot_map::add_member(const endpoint& e, bool master, std::size_t shard) {
  const auto it =
      std::find_if(members_.begin(), members_.end(), [&](const member& m) { return m.at == e; });
  if (it != members_.end()) return false;
  members_.push_back(member{e, master, shard});
  return true;
}

std::vector<endpoint> slot_map::nodes() const {
  std::vector<endpoint> out;
  for (const auto& m : members_) out.push_back(m.at);
  return out;
}

std::vector<endpoint> slot_map::masters() const {
  std::vector<bool> used(masters_.size());
  for (auto o : owner_) {
    if (o != 0) used[o - 1] = true;
  }
  std::vector<endpoint> out;
  for (std::size_t i = 0; i < masters_.size(); ++i) {
    if (used[i]) out.push_back(masters_[i]);
  }
  return out;
}

std::vector<slot_range> slot_map::ranges_of(const endpoint& e) const {
  std::vector<slot_range> out;
  const auto it = std::find(masters_.begin(), masters_.end(), e);
  if (it == masters_.end()) return out;
  const auto index = static_cast<std::uint16_t>(it - masters_.begin() + 1);
  for (std::size_t s = 0; s < slot_count; ++s) {
    if (owner_[s] != index) continue;
    const auto slot = static_cast<std::uint16_t>(s);
    if (!out.empty() && out.back().last + 1 == slot) {
      out.back().last = slot;
    } else {
      out.push_back(slot_range{slot, slot});
    }
  }
  return out;
}

std::vector<node_status> slot_map::describe() const {
  std::vector<node_status> out(members_.size());
  // Each shard sorts by the first slot its members serve (slot_count: none), then its master.
  std::vector<std::size_t> shard_first(shards_, slot_count);
  for (std::size_t i = 0; i < members_.size(); ++i) {
    out[i].address = members_[i].at;
    out[i].slots = ranges_of(members_[i].at);
    const bool master = members_[i].master || !out[i].slots.empty();
    out[i].role = master ? node_role::master : node_role::replica;
    auto& first = shard_first[members_[i].shard];
    if (!out[i].slots.empty()) first = std::min<std::size_t>(first, out[i].slots.front().first);
  }
  for (std::size_t i = 0; i < members_.size(); ++i) {
    if (out[i].role == node_role::master) continue;
    for (std::size_t j = 0; j < members_.size(); ++j) {
      // A shard may list a failed old master beside the promoted one: the one serving wins.
      if (members_[j].shard == members_[i].shard && out[j].role == node_role::master &&
          (!out[i].replica_of || !out[j].slots.empty())) {
        out[i].replica_of = out[j].address;
      }
    }
  }
  std::vector<std::size_t> order(members_.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto key = [&](std::size_t i) {
    return std::tuple{shard_first[members_[i].shard], members_[i].shard,
                      out[i].role != node_role::master};
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return key(a) < key(b); });
  std::vector<node_status> sorted;
  for (auto i : order) sorted.push_back(std::move(out[i]));
  return sorted;
}

std::size_t slot_map::unserved() const noexcept {
  return static_cast<std::size_t>(std::count(owner_.begin(), owner_.end(), std::uint16_t{0}));
}

std::optional<redirect> parse_redirect(std::string_view text) {
  redirect out;
  if (text.starts_with("MOVED ")) {
    text.remove_prefix(6);
  } else if (text.starts_with("ASK ")) {
    out.ask = true;
    text.remove_prefix(4);
  } else {
    return std::nullopt;
  }
  const auto space = text.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  unsigned slot = 0;
  const auto s = text.substr(0, space);
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), slot);
  if (ec != std::errc{} || p != s.data() + s.size() || slot >= slot_count) return std::nullopt;
  out.slot = static_cast<std::uint16_t>(slot);
  auto addr = text.substr(space + 1);
  const auto colon = addr.rfind(':');
  if (colon == std::string_view::npos || !parse_port(addr.substr(colon + 1), out.to.port)) {
    return std::nullopt;
  }
  auto host = addr.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  out.to.host = std::string{host};
  return out;
}

}  // namespace dlock::topology
