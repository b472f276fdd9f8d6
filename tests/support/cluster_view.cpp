#include "support/cluster_view.hpp"

#include <algorithm>
#include <map>
#include <sstream>
#include <stdexcept>

namespace dlock::test {
namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream in{s};
  while (std::getline(in, item, sep)) out.push_back(item);
  return out;
}

// "127.0.0.1:7000@17000,host" -> 7000.
std::uint16_t port_of_address(const std::string& address) {
  const auto colon = address.rfind(':', address.find('@'));
  const auto at = address.find('@');
  if (colon == std::string::npos || at == std::string::npos || at <= colon + 1) {
    throw std::runtime_error("CLUSTER NODES: cannot read the address `" + address + "`");
  }
  return static_cast<std::uint16_t>(std::stoul(address.substr(colon + 1, at - colon - 1)));
}

// "0-5460" or "5461" -> the inclusive range.
std::pair<int, int> slot_range(const std::string& token) {
  const auto dash = token.find('-');
  if (dash == std::string::npos) return {std::stoi(token), std::stoi(token)};
  return {std::stoi(token.substr(0, dash)), std::stoi(token.substr(dash + 1))};
}

cluster_node_entry parse_line(const std::string& line) {
  std::istringstream in{line};
  std::vector<std::string> f;
  for (std::string w; in >> w;) f.push_back(w);
  // <id> <addr> <flags> <master> <ping-sent> <pong-recv> <config-epoch> <link-state> <slot>...
  if (f.size() < 8) throw std::runtime_error("CLUSTER NODES: cannot read the line `" + line + "`");
  cluster_node_entry e;
  e.id = f[0];
  e.port = port_of_address(f[1]);
  e.flags = split(f[2], ',');
  e.master_id = f[3];
  e.link_state = f[7];
  for (std::size_t i = 8; i < f.size(); ++i) {
    if (!f[i].empty() && f[i][0] != '[') e.slots.push_back(slot_range(f[i]));
  }
  return e;
}

bool unhealthy(const cluster_node_entry& e) {
  return e.failing() || e.has("handshake") || e.has("noaddr");
}

}  // namespace

bool cluster_node_entry::has(std::string_view flag) const {
  return std::find(flags.begin(), flags.end(), flag) != flags.end();
}

bool cluster_node_entry::owns(int slot) const {
  return std::any_of(slots.begin(), slots.end(),
                     [&](const auto& r) { return r.first <= slot && slot <= r.second; });
}

cluster_view parse_cluster_nodes(const std::string& text) {
  if (text.empty() || text[0] == '-') {
    throw std::runtime_error("CLUSTER NODES failed: " + text);
  }
  cluster_view view;
  for (const auto& line : split(text, '\n')) {
    if (line.find_first_not_of(" \r") != std::string::npos) view.push_back(parse_line(line));
  }
  return view;
}

const cluster_node_entry* find_node(const cluster_view& view, const std::string& id) {
  for (const auto& e : view) {
    if (e.id == id) return &e;
  }
  return nullptr;
}

std::string slot_owner(const cluster_view& view, int slot) {
  for (const auto& e : view) {
    if (e.is_master() && e.owns(slot)) return e.id;
  }
  return {};
}

std::optional<std::string> healthy_summary(const cluster_view& view,
                                           const std::set<std::string>& live, std::string* why) {
  std::map<std::string, std::string> roles;  // id -> "master <ranges>" / "replica of <id>"
  std::vector<int> owners(cluster_slot_count, 0);
  for (const auto& id : live) {
    const auto* e = find_node(view, id);
    if (e == nullptr || unhealthy(*e)) {
      std::string flags;
      for (const auto& f : e == nullptr ? std::vector<std::string>{} : e->flags) flags += " " + f;
      *why = "node " + id + (e == nullptr ? " is not listed" : " is flagged" + flags);
      return std::nullopt;
    }
    if (!e->is_master()) {
      roles[id] = "replica of " + e->master_id;
      continue;
    }
    std::string ranges;
    for (const auto& [lo, hi] : e->slots) {
      for (int s = lo; s <= hi && s < cluster_slot_count; ++s)
        ++owners[static_cast<std::size_t>(s)];
      ranges += " " + std::to_string(lo) + "-" + std::to_string(hi);
    }
    roles[id] = "master" + ranges;
  }
  for (int s = 0; s < cluster_slot_count; ++s) {
    if (owners[static_cast<std::size_t>(s)] != 1) {
      *why = "slot " + std::to_string(s) + " is served by " +
             std::to_string(owners[static_cast<std::size_t>(s)]) + " live masters";
      return std::nullopt;
    }
  }
  std::string summary;
  for (const auto& [id, role] : roles) summary += id + " " + role + "\n";
  return summary;
}

}  // namespace dlock::test
