// dlock ping: whether Redis answers, its version and role, and whether its maxmemory-policy may
// evict lock keys; on a Redis Cluster, every node of it; on a Sentinel URL, the master the
// sentinels named first (docs/cli.md, "ping").
#include <algorithm>
#include <cstdio>
#include <utility>

#include "cli.hpp"

namespace dlock_cli {
namespace {

// The value of `field:` in an INFO section.
std::string info_field(const std::string& info, const std::string& field) {
  auto at = info.find(field + ":");
  if (at == std::string::npos) return "?";
  at += field.size() + 1;
  return info.substr(at, info.find_first_of("\r\n", at) - at);
}

// ping reports the policy itself (below), with its value on stdout: not twice.
void report_other_warnings(dlock::config& cfg) {
  cfg.on_warning = [](dlock::warning w, std::string_view message) {
    if (w != dlock::warning::evicting_policy) {
      std::fprintf(stderr, "dlock: warning: %.*s\n", static_cast<int>(message.size()),
                   message.data());
    }
  };
}

// CONFIG GET maxmemory-policy: the policy, or "" with `why` set.
std::string policy_of(dlock::client& c, std::string& why) {
  std::error_code ec;
  auto policy = c.execute({"CONFIG", "GET", "maxmemory-policy"}, ec);
  if (ec || policy.elements().size() != 2) {
    why = ec ? ec.message() : "no answer";
    return {};
  }
  return policy.elements()[1].str();
}

// `where`: "" on a single server, " on host:port" in a cluster.
void warn_if_evicting(const std::string& policy, const std::string& where) {
  if (policy.empty() || policy == "noeviction") return;
  std::fprintf(stderr,
               "dlock: warning: maxmemory-policy %s%s may evict lock keys (they have a TTL); a "
               "second holder could then acquire a held lock. Use noeviction.\n",
               policy.c_str(), where.c_str());
}

std::string address_text(const dlock::endpoint& e) {
  const bool v6 = e.host.find(':') != std::string::npos;
  return (v6 ? "[" + e.host + "]" : e.host) + ":" + std::to_string(e.port);
}

// On a Sentinel URL, the master the sentinels named: the node the client's connection went to
// (ping_nodes' one entry outside a cluster), asked after a PING that reached it.
void print_sentinel_master(dlock::client& client, const dlock::config& cfg) {
  std::error_code ec;
  const auto nodes = client.ping_nodes(ec);
  const auto where = ec || nodes.empty() ? "? (" + (ec ? ec.message() : "no node") + ")"
                                         : address_text(nodes.front().address);
  std::printf("sentinel master %s: %s\n", cfg.sentinel_master.c_str(), where.c_str());
}

int ping_server(dlock::client& client, const dlock::config& cfg) {
  std::error_code ec;
  const auto rtt = client.ping(ec);
  if (ec) {
    complain("ping", ec);
    return exit_code_for(ec);
  }
  if (cfg.sentinel()) print_sentinel_master(client, cfg);
  auto server = client.execute({"INFO", "server"}, ec).str();
  auto replication = client.execute({"INFO", "replication"}, ec).str();
  if (ec) {
    complain("ping: INFO", ec);
    return exit_code_for(ec);
  }
  std::printf("PONG in %lld us\nredis_version: %s\nrole: %s\n", static_cast<long long>(rtt.count()),
              info_field(server, "redis_version").c_str(), info_field(replication, "role").c_str());
  std::string why;
  const auto policy = policy_of(client, why);
  if (policy.empty()) {
    std::printf("maxmemory-policy: unknown (%s)\n", why.c_str());
    return 0;
  }
  std::printf("maxmemory-policy: %s\n", policy.c_str());
  warn_if_evicting(policy, "");
  return 0;
}

// "slots 0-5460,6000": what a master serves.
std::string slots_text(const std::vector<dlock::slot_range>& slots) {
  if (slots.empty()) return "no slots";
  std::string out = "slots ";
  for (std::size_t i = 0; i < slots.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(slots[i].first);
    if (slots[i].last != slots[i].first) out += '-' + std::to_string(slots[i].last);
  }
  return out;
}

const char* role_text(dlock::node_role r) {
  switch (r) {
    case dlock::node_role::master:
      return "master";
    case dlock::node_role::replica:
      return "replica";
    case dlock::node_role::standalone:
      break;
  }
  return "standalone";
}

// A node's line: address, role, what it serves (a master's slots, a replica's master), PING.
struct node_line {
  std::string address, role, serves, result;
};

node_line line_of(const dlock::node_status& n) {
  node_line l{address_text(n.address), role_text(n.role), {}, {}};
  if (n.role == dlock::node_role::master) l.serves = slots_text(n.slots);
  if (n.role == dlock::node_role::replica) {
    l.serves = n.replica_of ? "of " + address_text(*n.replica_of) : "of no master";
  }
  l.result = n.error ? "unreachable: " + n.error.message()
                     : "PONG in " + std::to_string(n.rtt.count()) + " us";
  return l;
}

// A header with the counts, then one aligned line per node.
void print_cluster_nodes(const std::vector<dlock::node_status>& nodes) {
  std::size_t masters = 0, served = 0, address_width = 0, serves_width = 0;
  std::vector<node_line> lines;
  for (const auto& n : nodes) {
    if (n.role == dlock::node_role::master) ++masters;
    for (const auto& r : n.slots) served += static_cast<std::size_t>(r.last - r.first) + 1;
    lines.push_back(line_of(n));
    address_width = std::max(address_width, lines.back().address.size());
    serves_width = std::max(serves_width, lines.back().serves.size());
  }
  std::printf("cluster: %zu nodes (%zu masters, %zu replicas), %zu of 16384 slots served\n",
              nodes.size(), masters, nodes.size() - masters, served);
  for (const auto& l : lines) {
    std::printf("  %-*s  %-7s  %-*s  %s\n", static_cast<int>(address_width), l.address.c_str(),
                l.role.c_str(), static_cast<int>(serves_width), l.serves.c_str(), l.result.c_str());
  }
}

// One master's version and policy, asked on a connection of its own (the cluster client routes
// by slot, so it cannot address a node).
void print_master_settings(const dlock::config& cluster_cfg, const dlock::node_status& n) {
  auto cfg = cluster_cfg;
  cfg.cluster_nodes.clear();
  cfg.host = n.address.host;
  cfg.port = n.address.port;
  dlock::client node{std::move(cfg)};
  std::error_code ec;
  const auto server = node.execute({"INFO", "server"}, ec);
  const auto version = ec ? "? (" + ec.message() + ")" : info_field(server.str(), "redis_version");
  std::string why;
  const auto policy = policy_of(node, why);
  const auto shown = policy.empty() ? "unknown (" + why + ")" : policy;
  std::printf("  %s  redis_version: %s  maxmemory-policy: %s\n", address_text(n.address).c_str(),
              version.c_str(), shown.c_str());
  warn_if_evicting(policy, " on " + address_text(n.address));
}

}  // namespace

int run_ping(const global_options& g) {
  auto cfg = make_config(g);
  report_other_warnings(cfg);
  dlock::client client{cfg};
  if (!cfg.cluster()) return ping_server(client, cfg);
  std::error_code ec;
  const auto nodes = client.ping_nodes(ec);
  if (ec) {
    complain("ping", ec);
    return exit_code_for(ec);
  }
  print_cluster_nodes(nodes);
  bool all_up = true, header = false;
  for (const auto& n : nodes) {
    if (n.error) {
      all_up = false;
      complain("ping", address_text(n.address) + " unreachable: " + n.error.message());
    } else if (n.role == dlock::node_role::master) {
      if (!std::exchange(header, true)) std::printf("masters:\n");
      print_master_settings(cfg, n);
    }
  }
  return all_up ? 0 : exit_unavailable;
}

}  // namespace dlock_cli
