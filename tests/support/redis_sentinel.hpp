// A real Redis Sentinel deployment for dlock's integration and fault tests: one master, N
// replicas (default 2) and M sentinels (default 3), all real redis-server processes on loopback.
//
//   dlock::test::sentinel_group group;                 // ready: see wait_ready
//   auto cfg = dlock::config::from_uri(group.url());   // redis+sentinel://.../mymaster
//   const auto old = group.master_port();              // asked of the sentinels
//   group.node(old).command({"SET", "k", "v"});        // any data node, as a redis_server
//   group.wait_replicas_online(2, 5s);                 // INFO replication on the master
//   group.node(old).kill9();                           // or: group.failover();
//   const auto now = group.wait_new_master(old, 10s);  // a majority agrees, ROLE says master
//   group.sentinel_proxy(0).blackhole();               // sentinel 0 cut off (proxied)
//   group.replication_proxy().freeze(dlock::test::direction::server_to_client, "REPLCONF");
//                                                      // master -> replica streams held
//
// Data nodes are redis_server objects (redis_server.hpp: own temporary directory, killed with the
// test process, stopped by PID in their destructors) started with `--repl-diskless-sync-delay 0`;
// replicas with `--replicaof 127.0.0.1 <master>`. Sentinels are redis_server objects in sentinel
// mode (`redis-server <dir>/redis.conf --sentinel`), configured with `sentinel monitor <name>
// 127.0.0.1 <master> <M/2+1>`, `down-after-milliseconds` 1000, `failover-timeout` 3000,
// `parallel-syncs` 1 and `resolve-hostnames no`; the file is theirs to rewrite and survives
// their restarts. Sentinels start once the replicas are online, so they find everything in one
// round of hellos (~2.2 s).
//
// Proxies (tcp_proxy.hpp):
// - proxied_sentinels: sentinel i listens on a port chosen in advance behind a tcp_proxy and
//   announces the proxy's port (`sentinel announce-ip/announce-port`), so clients and the other
//   sentinels reach it through the proxy: blackhole it to partition that sentinel.
// - proxied_replication: one tcp_proxy in front of the initial master; the replicas replicate
//   through it and the sentinels monitor the master at the proxy's port. One proxy for all,
//   because a sentinel re-points ("+fix-slave-config", measured ~10 s after discovery) any
//   replica whose master address differs from the one it monitors. master_port() is then the
//   proxy's port until a failover, and clients given it pass through the proxy too; freeze the
//   server→client direction of the connections that said "REPLCONF" to hold only replication
//   streams. After a failover the sentinels point the replicas straight at the new master.
//
// Authentication (url() carries it): data_password alone sets requirepass/masterauth on the data
// nodes and `sentinel auth-pass`; with data_username the data nodes' `default` user is off and
// that ACL user (all permissions) is used, with `masteruser` and `sentinel auth-user`. Likewise
// sentinel_password (requirepass) and sentinel_username (ACL user, `default` off) protect the
// sentinels themselves, which then authenticate to each other with `sentinel sentinel-user/-pass`.
//
// Measured here (Redis 7.0, loopback, 2 cores): start-up with discovery 2.3-2.7 s; kill -9 of
// the master to a new master that answers ROLE as master 2.2-2.3 s; SENTINEL FAILOVER 1.1-1.2 s.
// After a graceful failover the old master stays a writable master, listed by the sentinels as
// a replica, until their +convert-to-slave ~11 s later. Sentinels ask replicas for INFO every
// 10 s outside failovers, so wait_ready after a topology change may take that long.
//
// Every wait is bounded and throws std::runtime_error with what the sentinels last said. The
// members are called from one thread at a time. A sentinel that led a failover waits 2 ×
// failover-timeout before leading another: space failovers in one group accordingly.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "support/redis_server.hpp"
#include "support/tcp_proxy.hpp"

namespace dlock::test {

struct sentinel_group_options {
  std::size_t replicas = 2;
  std::size_t sentinels = 3;  // quorum: sentinels / 2 + 1
  std::string master_name = "mymaster";
  std::chrono::milliseconds down_after{1000};        // sentinel down-after-milliseconds
  std::chrono::milliseconds failover_timeout{3000};  // sentinel failover-timeout
  bool proxied_replication = false;                  // see "Proxies" above
  std::vector<std::size_t> proxied_sentinels{};      // indexes of sentinels behind a proxy
  std::string data_username{};      // non-empty: ACL user on the data nodes (needs a password)
  std::string data_password{};      // non-empty: the data nodes require it
  std::string sentinel_username{};  // non-empty: ACL user on the sentinels (needs a password)
  std::string sentinel_password{};  // non-empty: the sentinels require it
  std::vector<std::string> data_extra_args{};        // appended to each data node's command line
  std::vector<std::string> sentinel_config_lines{};  // appended to each sentinel's file
  std::chrono::milliseconds ready_timeout{15000};    // start-up, including wait_ready
};

// One entry of a SENTINEL MASTER / REPLICAS / SENTINELS reply: field name -> value.
using sentinel_entry = std::map<std::string, std::string>;

class sentinel_group {
 public:
  // Starts the data nodes, waits until the replicas are online, starts the sentinels and waits
  // until they are ready (wait_ready). Throws std::runtime_error on failure.
  sentinel_group();
  explicit sentinel_group(sentinel_group_options opts);
  // Kills the sentinels first (so that they do not react), then the data nodes, by PID.
  ~sentinel_group();
  sentinel_group(const sentinel_group&) = delete;
  sentinel_group& operator=(const sentinel_group&) = delete;

  const sentinel_group_options& options() const noexcept { return opts_; }
  const std::string& master_name() const noexcept { return opts_.master_name; }
  std::size_t quorum() const noexcept { return opts_.sentinels / 2 + 1; }

  // "redis+sentinel://[user:pass@]127.0.0.1:S1,.../<name>[?sentinel_user=..&sentinel_password=
  // ..&<params>]": the sentinels' client-facing ports (the proxy's where proxied) and the
  // configured credentials. `params` without a leading '?', e.g. "timeout=500ms".
  std::string url(const std::string& params = "") const;

  // --- Data nodes. Index 0 is the initial master; indexes are stable whatever the roles.
  std::size_t data_node_count() const noexcept { return data_.size(); }
  redis_server& data_node(std::size_t i) const { return *data_.at(i); }
  // The data node listening on `port`, or the one behind the replication proxy when `port` is
  // the proxy's. Throws std::runtime_error if no data node has that port.
  redis_server& node(std::uint16_t port) const;
  // The master address (port) the sentinels give out, as most live sentinels that answer
  // report it (SENTINEL get-master-addr-by-name). Throws if none answers.
  std::uint16_t master_port() const;
  redis_server& master() const { return node(master_port()); }
  // The replicas of the current master a live sentinel lists without s_down/o_down/
  // disconnected flags and whose reported role is slave (their data ports, sorted).
  std::vector<std::uint16_t> replicas() const;
  // Waits until the current master reports at least `n` replicas with state=online.
  void wait_replicas_online(std::size_t n, std::chrono::milliseconds limit) const;

  // --- Sentinels, by index.
  std::size_t sentinel_count() const noexcept { return sentinels_.size(); }
  // The redis_server running sentinel i (kill9, pause, restart...; command() authenticates).
  redis_server& sentinel(std::size_t i) const { return *sentinels_.at(i).server; }
  // The port clients and peers use for sentinel i: its proxy's, or its own.
  std::uint16_t sentinel_port(std::size_t i) const;
  // Sentinel i's proxy; throws std::runtime_error if it is not proxied.
  tcp_proxy& sentinel_proxy(std::size_t i) const;
  // The proxy in front of the initial master; throws if proxied_replication is off.
  tcp_proxy& replication_proxy() const;
  // SENTINEL MASTER / REPLICAS / SENTINELS <name> on sentinel i, parsed.
  sentinel_entry master_entry(std::size_t i) const;
  std::vector<sentinel_entry> replica_entries(std::size_t i) const;
  std::vector<sentinel_entry> sentinel_entries(std::size_t i) const;

  // --- Waits and failovers.
  // Waits until every live sentinel (running, not paused) reports the same master, healthy;
  // all other live data nodes as its healthy replicas; and every other live sentinel as a
  // healthy peer. A sentinel partitioned by its proxy counts as live: do not wait while one is.
  void wait_ready() const { wait_ready(opts_.ready_timeout); }
  void wait_ready(std::chrono::milliseconds limit) const;
  // SENTINEL FAILOVER <name> on the first live sentinel (no wait); returns the master port it
  // replaces. Throws with the sentinel's error (e.g. -INPROG, -NOGOODSLAVE).
  std::uint16_t failover() const;
  // Waits until a majority of all sentinels report a master other than `old_port` and that node
  // answers ROLE as a master; returns its port. Throws after `limit`.
  std::uint16_t wait_new_master(std::uint16_t old_port, std::chrono::milliseconds limit) const;

 private:
  struct sentinel_member {
    std::unique_ptr<tcp_proxy> proxy;  // before server: the proxy outlives the sentinel
    std::unique_ptr<redis_server> server;
  };

  redis_server_options data_options() const;
  redis_server_options sentinel_options(std::uint16_t own_port, std::uint16_t announced_port) const;
  void start_sentinel(std::size_t i);
  std::vector<std::size_t> live_sentinels() const;
  std::size_t live_data_nodes() const;
  std::vector<std::string> sentinel_cmd(const std::string& sub) const;
  // How many live sentinels report each master port (unanswered ones are skipped).
  std::map<std::uint16_t, std::size_t> master_votes() const;
  // One round of wait_ready's checks: true if they hold, else false with the problem in *why.
  bool ready(std::string* why) const;
  std::string diagnostics() const;

  sentinel_group_options opts_;
  std::vector<std::unique_ptr<redis_server>> data_;
  std::unique_ptr<tcp_proxy> replication_proxy_;
  std::vector<sentinel_member> sentinels_;
};

// Parses a rendered SENTINEL REPLICAS/SENTINELS reply ("[[k, v, ...], ...]", see send_command)
// or, with `flat`, a SENTINEL MASTER reply ("[k, v, ...]"). Throws on an error reply.
std::vector<sentinel_entry> parse_sentinel_entries(const std::string& reply, bool flat = false);
// Whether an entry's flags say it is down or unreachable (s_down, o_down, disconnected).
bool sentinel_entry_unhealthy(const sentinel_entry& e);

}  // namespace dlock::test
