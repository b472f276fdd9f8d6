// redis_cluster's operations for fault tests: failover, kill and promotion, restarts, and the
// by-hand resharding of one slot (the rest of the class is in redis_cluster.cpp).
#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/redis_cluster.hpp"

namespace dlock::test {
namespace {

void expect_ok(const std::string& reply, const std::string& what) {
  if (reply != "+OK") throw std::runtime_error("redis_cluster: " + what + " answered " + reply);
}

}  // namespace

void redis_cluster::failover(std::size_t replica) {
  expect_ok(node(replica).command({"CLUSTER", "FAILOVER"}),
            "CLUSTER FAILOVER on node " + std::to_string(replica));
  wait_views(
      [&](std::size_t, const cluster_view& v) {
        const auto* e = find_node(v, id(replica));
        return e != nullptr && e->is_master() && !e->slots.empty();
      },
      opts_.ready_timeout, "node " + std::to_string(replica) + " as a master");
}

void redis_cluster::kill(std::size_t i) {
  if (node(i).running() && !node(i).paused()) {
    kill_record k;
    const auto v = view(i);
    if (const auto* e = find_node(v, id(i)); e != nullptr && e->is_master()) {
      k.slots = e->slots;
      for (const auto& r : v) {
        if (r.master_id == id(i)) k.replicas.push_back(index_of_id(r.id));
      }
    }
    killed_[i] = std::move(k);
  }
  node(i).kill9();
}

std::size_t redis_cluster::wait_for_promotion_of_replica_of(std::size_t killed_master) {
  return wait_for_promotion_of_replica_of(killed_master, opts_.node_timeout + opts_.ready_timeout);
}

std::size_t redis_cluster::wait_for_promotion_of_replica_of(std::size_t m,
                                                            std::chrono::milliseconds limit) {
  kill_record k;
  if (const auto it = killed_.find(m); it != killed_.end()) {
    k = it->second;
  } else {  // killed some other way: the cluster's picture still has them until the promotion
    const auto v = view(first_live());
    if (const auto* e = find_node(v, id(m)); e != nullptr) k.slots = e->slots;
    k.replicas = replicas_of(m);
  }
  if (k.slots.empty() || k.replicas.empty()) {
    throw std::runtime_error("redis_cluster: node " + std::to_string(m) +
                             " served no slots or had no replica to promote");
  }
  const int slot = k.slots.front().first;
  const auto promoted_in = [&](const cluster_view& v) -> std::optional<std::size_t> {
    for (const auto r : k.replicas) {
      const auto* e = find_node(v, id(r));
      if (e != nullptr && e->is_master() && e->owns(slot)) return r;
    }
    return std::nullopt;
  };
  wait_views([&](std::size_t, const cluster_view& v) { return promoted_in(v).has_value(); }, limit,
             "a promoted replica of node " + std::to_string(m));
  const auto r = promoted_in(view(first_live()));
  if (!r) throw std::runtime_error("redis_cluster: the promotion was undone");
  return *r;
}

void redis_cluster::restart_node(std::size_t i) {
  node(i).start();
  killed_.erase(i);
  wait_ok();
}

void redis_cluster::restart_all() {
  std::vector<std::size_t> replica_nodes, master_nodes;
  std::optional<cluster_view> v;
  try {
    v = view(first_live());
  } catch (const std::exception&) {  // no node answers: any order will do
  }
  for (std::size_t i = 0; i < size(); ++i) {
    const auto* e = v ? find_node(*v, id(i)) : nullptr;
    (e != nullptr && e->is_replica() ? replica_nodes : master_nodes).push_back(i);
  }
  for (const auto i : replica_nodes) node(i).stop();
  for (const auto i : master_nodes) node(i).stop();
  for (const auto i : master_nodes) node(i).start();
  for (const auto i : replica_nodes) node(i).start();
  killed_.clear();
  wait_ok();
}

void redis_cluster::migrate_slot_begin(int slot, std::size_t from, std::size_t to) {
  const auto s = std::to_string(slot);
  expect_ok(node(to).command({"CLUSTER", "SETSLOT", s, "IMPORTING", id(from)}),
            "CLUSTER SETSLOT " + s + " IMPORTING on node " + std::to_string(to));
  expect_ok(node(from).command({"CLUSTER", "SETSLOT", s, "MIGRATING", id(to)}),
            "CLUSTER SETSLOT " + s + " MIGRATING on node " + std::to_string(from));
}

void redis_cluster::migrate_keys(int slot, std::size_t from, std::size_t to,
                                 const std::vector<std::string>& keys) {
  std::vector<std::string> args{"MIGRATE", "127.0.0.1", std::to_string(node(to).port()), "", "0",
                                "5000",    "KEYS"};
  for (const auto& key : keys) {
    if (slot_of(key) != slot) {
      throw std::runtime_error("redis_cluster::migrate_keys: " + key + " is not in slot " +
                               std::to_string(slot));
    }
    args.push_back(key);
  }
  const auto reply = node(from).command(args, {.timeout = std::chrono::milliseconds{10000}});
  if (reply != "+OK" && reply != "+NOKEY") {
    throw std::runtime_error("redis_cluster: MIGRATE on node " + std::to_string(from) +
                             " answered " + reply);
  }
}

void redis_cluster::migrate_slot_end(int slot, std::size_t to) {
  const auto s = std::to_string(slot);
  auto others = masters();  // before the first SETSLOT NODE changes the picture
  others.erase(std::remove(others.begin(), others.end(), to), others.end());
  expect_ok(node(to).command({"CLUSTER", "SETSLOT", s, "NODE", id(to)}),
            "CLUSTER SETSLOT " + s + " NODE on node " + std::to_string(to));
  for (const auto m : others) {
    if (!node(m).running() || node(m).paused()) continue;
    expect_ok(node(m).command({"CLUSTER", "SETSLOT", s, "NODE", id(to)}),
              "CLUSTER SETSLOT " + s + " NODE on node " + std::to_string(m));
  }
  wait_views([&](std::size_t, const cluster_view& v) { return slot_owner(v, slot) == id(to); },
             opts_.ready_timeout, "node " + std::to_string(to) + " serving slot " + s);
}

}  // namespace dlock::test
