// A real Redis Cluster for dlock's integration and fault tests: 3 masters with one replica each
// (by default), six redis_server processes on loopback, no mocks.
//
//   dlock::test::redis_cluster cluster;                    // ready: every node agrees, all slots
//   auto cfg = dlock::config::from_uri(cluster.url());     // redis+cluster://127.0.0.1:P1,P2,P3
//   const int slot = cluster.slot_of("{orders}");          // CLUSTER KEYSLOT
//   const auto m = cluster.master_of(slot);                // node index, asked of the cluster
//   cluster.command_on_slot(slot, {"GET", "{orders}"});    // admin command on the slot's master
//   cluster.node(m).command({"CLUSTER", "INFO"});          // any node, as a redis_server
//
//   cluster.failover(cluster.replicas_of(m).at(0));        // graceful CLUSTER FAILOVER
//   cluster.kill(m);                                       // kill -9
//   auto r = cluster.wait_for_promotion_of_replica_of(m);  // its replica serves the slots
//   cluster.restart_node(m);                               // rejoins as r's replica
//   cluster.restart_all();                                 // every node, same cluster
//
//   cluster.migrate_slot_begin(slot, m, other);            // SETSLOT IMPORTING / MIGRATING
//   cluster.migrate_keys(slot, m, other, {"{orders}"});    // MIGRATE: -ASK / -TRYAGAIN now
//   cluster.migrate_slot_end(slot, other);                 // SETSLOT NODE on every master
//
// Each node is a redis_server (redis_server.hpp: its own temporary directory, killed with the
// test process, torn down by PID in its destructor) started with `--cluster-enabled yes`,
// `--cluster-node-timeout <node_timeout>`, `--cluster-port <a free port>` (so the data port may
// be any port) and `--repl-diskless-sync-delay 0`; then `redis-cli --cluster create ...
// --cluster-replicas N --cluster-yes` joins them. A node whose start loses a port race (its
// data or bus port taken meanwhile) is started again on other ports.
//
// The cluster configuration survives restarts: each node's `--cluster-config-file` is
// <cluster dir>/nodes-<index>.conf, outside its redis_server directory, which redis_server::start
// empties. So a restarted node keeps its node ID, its ports and its place in the cluster, but
// not its data (the servers run with `--save '' --appendonly no` anyway): after restart_all the
// same masters serve the same slots, empty, and the replicas resync from them.
//
// Every operation that changes the topology waits, bounded, until the cluster agrees again (see
// wait_ok); failures throw std::runtime_error with what the nodes last reported. Node indexes
// are stable: node(i) stays node i across kills and restarts, whatever its role. The members
// are called from one thread at a time. Needs redis-cli ($DLOCK_REDIS_CLI, else from PATH).
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "support/cluster_view.hpp"
#include "support/redis_server.hpp"

namespace dlock::test {

struct redis_cluster_options {
  std::size_t masters = 3;  // at least 3 (redis-cli --cluster create refuses fewer)
  std::size_t replicas_per_master = 1;
  std::chrono::milliseconds node_timeout{1000};    // --cluster-node-timeout
  std::vector<std::string> extra_args{};           // appended to every node's command line
  std::chrono::milliseconds ready_timeout{20000};  // creation and each wait for agreement
};

class redis_cluster {
 public:
  // Starts the nodes, creates the cluster and waits until it is ready (wait_ok).
  redis_cluster();
  explicit redis_cluster(redis_cluster_options opts);
  // Every node is killed (SIGKILL by PID) and its directory removed, then the cluster's.
  ~redis_cluster();
  redis_cluster(const redis_cluster&) = delete;
  redis_cluster& operator=(const redis_cluster&) = delete;

  const redis_cluster_options& options() const noexcept { return opts_; }
  std::size_t size() const noexcept { return nodes_.size(); }
  const std::vector<std::unique_ptr<redis_server>>& nodes() const noexcept { return nodes_; }
  redis_server& node(std::size_t i) const { return *nodes_.at(i); }
  // Node i's cluster node ID (stable across restarts) and the index of a node ID (throws if
  // unknown).
  const std::string& id(std::size_t i) const { return ids_.at(i); }
  std::size_t index_of_id(const std::string& id) const;
  // "redis+cluster://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3": the nodes that were masters
  // when the cluster was created (any node serves as a seed, so it stays valid after failovers).
  std::string url() const;

  // Node i's CLUSTER NODES, parsed.
  cluster_view view(std::size_t i) const;
  // Asked of the first live node (running, not paused): the indexes of the masters serving
  // slots, in index order; the master serving `slot` (throws if none); the nodes listed as
  // replicas of node `master` (a killed replica stays listed).
  std::vector<std::size_t> masters() const;
  std::size_t master_of(int slot) const;
  std::vector<std::size_t> replicas_of(std::size_t master) const;
  // CLUSTER KEYSLOT on a live node.
  int slot_of(const std::string& key) const;
  // An admin command (redis_server::command) on the master now serving `slot`.
  std::string command_on_slot(int slot, const std::vector<std::string>& args) const;
  // How many `error` replies (INFO errorstats, e.g. "CROSSSLOT") the running nodes have given.
  long long error_count(const std::string& error) const;

  // Waits until every live node (running, not paused) reports cluster_state:ok, lists every
  // other live node as healthy, sees every slot served by a live master, and all of them agree
  // on the roles and slots; and every live replica's link to its master is up. Throws
  // std::runtime_error after `limit` (default: options().ready_timeout).
  void wait_ok() const { wait_ok(opts_.ready_timeout); }
  void wait_ok(std::chrono::milliseconds limit) const;

  // CLUSTER FAILOVER (graceful) on the replica `replica`; waits until every live node lists it
  // as a master, then wait_ok.
  void failover(std::size_t replica);
  // kill -9 of node i (no wait). Its slots and replicas, as the cluster saw them just before,
  // are remembered for wait_for_promotion_of_replica_of.
  void kill(std::size_t i);
  // Waits until one of the killed master's replicas serves its slots in every live node's view
  // and wait_ok holds; returns that replica's index. Throws after `limit` (default:
  // node_timeout + ready_timeout).
  std::size_t wait_for_promotion_of_replica_of(std::size_t killed_master);
  std::size_t wait_for_promotion_of_replica_of(std::size_t killed_master,
                                               std::chrono::milliseconds limit);
  // Starts a killed or stopped node again (same ports, same nodes.conf, no data) and waits
  // until it has rejoined (wait_ok). A master whose slots went to a replica comes back as that
  // replica's replica.
  void restart_node(std::size_t i);
  // Stops every node (SIGTERM; replicas first, so that no replica sees its master go and
  // starts an election), starts them again (masters first) and waits until wait_ok.
  void restart_all();

  // By-hand resharding of one slot: CLUSTER SETSLOT <slot> IMPORTING <from> on `to`, then
  // MIGRATING <to> on `from`.
  void migrate_slot_begin(int slot, std::size_t from, std::size_t to);
  // MIGRATE 127.0.0.1 <to's port> "" 0 5000 KEYS <keys...> on `from` (each key must be in
  // `slot`). Afterwards the source answers -ASK for a moved key and -TRYAGAIN for a multi-key
  // command whose keys are split between the two.
  void migrate_keys(int slot, std::size_t from, std::size_t to,
                    const std::vector<std::string>& keys);
  // CLUSTER SETSLOT <slot> NODE <to> on `to`, then on every other live master; waits until
  // every live node sees `to` serving the slot, then wait_ok.
  void migrate_slot_end(int slot, std::size_t to);

 private:
  struct kill_record {
    std::vector<std::pair<int, int>> slots;
    std::vector<std::size_t> replicas;
  };

  std::unique_ptr<redis_server> start_node(std::size_t i) const;
  void create();
  std::vector<std::size_t> live() const;
  std::size_t first_live() const;
  // One round of wait_ok's checks: true if they all hold, else false with the problem in *why.
  bool agreed(std::string* why) const;
  // Waits until pred holds for every live node's view, then wait_ok; `what` names the wait in
  // the error.
  void wait_views(const std::function<bool(std::size_t, const cluster_view&)>& pred,
                  std::chrono::milliseconds limit, const std::string& what) const;
  std::string diagnostics() const;

  redis_cluster_options opts_;
  temp_dir dir_{"dlock-cluster-"};
  std::vector<std::unique_ptr<redis_server>> nodes_;  // after dir_: they stop before it goes
  std::vector<std::string> ids_;
  std::vector<std::size_t> initial_masters_;
  std::map<std::size_t, kill_record> killed_;
};

}  // namespace dlock::test
