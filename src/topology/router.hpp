// Where a client's commands and subscriptions go: the one server, or in a Redis Cluster the
// master of the slot they are about. Each node the client uses has one command connection and
// one subscriber connection, opened when first needed.
//
// Cluster mode (config::cluster()): the slot map is read with CLUSTER SHARDS from the seeds in
// turn at start, periodically, and (rate-limited) after a MOVED, a CLUSTERDOWN or a failed
// connection. A slot the map does not know goes to the node that answered last, whose MOVED
// then tells where it lives. Redirections are followed within the request's own timeout
// (redirects.hpp); requests are routed only to masters of the map (or where a MOVED or ASK
// sends them).
//
// Sentinel mode (config::sentinel()): one master, as the sentinels name it (sentinels.hpp). Its
// links ask the sentinels where to connect and check ROLE at every connect; when the sentinels
// name another master (+switch-master, or a poll), both links move there at once, which makes
// every hold be checked (on_reconnect) and every waiter re-check (resubscribed). A READONLY reply
// (the node was demoted under the client), or a request never written because no master answered
// (connection_refused, connect_timeout: the sentinels may still name a dead master), has the
// sentinels asked again and the request sent again, within its own timeout: it ran nowhere.
//
// Runs on the client's strand; submit() and listen() may be called from any thread.
#pragma once

#include <asio/steady_timer.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "dlock/config.hpp"
#include "topology/redirects.hpp"
#include "topology/sentinels.hpp"
#include "topology/slot_map.hpp"
#include "transport/connection.hpp"
#include "transport/subscriber.hpp"

namespace dlock::topology {

class router : public std::enable_shared_from_this<router> {
 public:
  using clock = std::chrono::steady_clock;
  static constexpr std::chrono::milliseconds min_refresh_gap{100};
  static constexpr std::chrono::seconds periodic_refresh{10};
  static constexpr std::chrono::seconds failed_round_pause{1};  // no candidate answered
  // While a master is down: a map read every outage_refresh for outage_fast (Redis' default
  // cluster-node-timeout is 15 s, and the election follows it), then doubling up to periodic.
  static constexpr std::chrono::milliseconds outage_refresh{250};
  static constexpr std::chrono::seconds outage_fast{30};

  router(transport::executor_type strand, config cfg, std::shared_ptr<asio::ssl::context> tls);

  // Hooks (set before start()): every hold needs a check — a node's command connection is up
  // again after its first connect, or the cluster's masters changed (a failover); the server
  // refused the fence of old connections for good.
  void on_reconnect(std::function<void()> fn);
  void when_unfenced(std::function<void(const std::string&)> fn);
  // A node refused cluster mode for good (errc::unsupported_server; the server's error text).
  void when_refused(std::function<void(const std::string&)> fn) { on_refused_ = std::move(fn); }

  bool cluster() const noexcept { return cfg_.cluster(); }
  void start();
  void stop();  // stops every link; pending requests complete with errc::shutdown

  // Sends one command about `slot` (ignored on a single server). Thread-safe; `handler` runs on
  // the strand.
  void submit(std::uint16_t slot, std::string payload, clock::duration timeout,
              transport::reply_handler handler);
  // Listens to channels that all hash to one slot: plain channels on a single server
  // (thread-safe), shard channels (SSUBSCRIBE) on the slot's master in a cluster (strand only).
  // In a cluster the subscriptions follow their slot when it moves or fails over: the listener
  // then gets `resubscribed` (messages may have been missed) once it is confirmed there.
  std::vector<transport::listener_id> listen(transport::subscriber::listeners channels);
  void unlisten(std::vector<transport::listener_id> ids);

  // Strand only, inside a reply handler of submit(): the connection that delivered the reply.
  transport::connection& replying() noexcept { return replying_ ? *replying_ : *single_.conn; }

  // The command connection of every node in use (ping, shutdown's drain). Strand only.
  std::vector<std::shared_ptr<transport::connection>> connections() const;
  // The single server's links (single mode; tests and the CLI's views of one server).
  transport::connection& connection() { return *first().conn; }
  transport::subscriber& subscriber() { return *first().sub; }

  // Strand only: the slot map's masters (empty on a single server).
  std::vector<endpoint> masters() const;
  // Strand only (router_nodes.cpp): every node as the slot map describes it (slot_map::describe),
  // empty before a map was read; on a single server the one node, as standalone.
  std::vector<node_status> map_nodes() const;
  // Strand only: the command connection kept to `e` (kept = true), else a new one with the
  // client's settings, started and not kept (kept = false: the caller stops it).
  std::shared_ptr<transport::connection> connection_to(const endpoint& e, bool& kept) const;

  // What a cluster or sentinel client sent where (strand only), so that a test can show that a
  // node the client learnt was demoted got nothing more, and count the redirections a
  // resharding caused.
  struct node_traffic {
    endpoint node;
    std::uint64_t commands = 0;     // commands sent (ASKING included; slot map reads not); in
                                    // sentinel mode socket writes of the command connection
    clock::time_point last_sent{};  // of the last of them (sentinel mode: by either link)
    clock::time_point demoted{};    // when a map read stopped naming it a master (else epoch)
  };
  struct redirect_counts {
    std::uint64_t moved = 0, ask = 0, try_again = 0, cluster_down = 0;
  };
  std::vector<node_traffic> traffic() const;
  redirect_counts redirected() const noexcept { return redirected_; }

 private:
  struct node {
    std::shared_ptr<transport::connection> conn;
    std::shared_ptr<transport::subscriber> sub;
    bool sub_started = false;
  };
  // One request on its way through redirections (or READONLY replies). The payload is kept for
  // a resend.
  struct request {
    std::uint16_t slot;
    std::string payload;
    clock::time_point deadline;
    transport::reply_handler handler;
    redirects policy;
    int resends = 0;  // sent again because it ran nowhere (sentinel mode)
  };
  // A cluster listener: where it listens now, under which id of that node's subscriber.
  struct listening {
    std::uint16_t slot;
    std::string channel;
    transport::pubsub_listener fn;
    endpoint at;
    transport::listener_id inner = 0;
    bool homeless = false;   // dropped by its node: listen again after the next map read
    bool relocated = false;  // its next confirmation is a resubscription
  };

  node make_node(const endpoint& e) const;
  node& first();
  node& node_at(const endpoint& e);
  endpoint target(std::uint16_t slot) const;
  void send(std::shared_ptr<request> req, const endpoint& to, bool asking);
  void on_reply(std::shared_ptr<request> req, const endpoint& from, std::error_code ec, reply r);
  void refresh();
  void read_map(std::shared_ptr<std::vector<endpoint>> candidates, std::size_t at);
  void adopt(slot_map m);
  void arm_periodic();
  void refuse(const std::string& text);
  void release_waiting();
  transport::subscriber& sub_at(const endpoint& e);
  void listen_at(transport::listener_id id, listening& l);
  void on_event(transport::listener_id id, const transport::pubsub_event& ev);
  void relocate();
  void count_sent(const endpoint& to);
  void count_redirect(std::error_code ec);
  void note_demotions(const std::vector<endpoint>& before);
  // Sentinel mode (router_sentinel.cpp).
  void follow_sentinels();
  void submit_to_master(std::shared_ptr<request> req);
  std::vector<node_traffic> sentinel_traffic() const;
  void node_down(const endpoint& e);
  void arm_outage();

  transport::executor_type strand_;
  config cfg_;
  std::shared_ptr<asio::ssl::context> tls_;
  node single_;                                                  // single mode
  std::map<std::pair<std::string, std::uint16_t>, node> nodes_;  // cluster mode
  std::optional<slot_map> map_;
  endpoint fallback_;  // where a slot the map does not know goes
  std::shared_ptr<transport::connection> replying_;
  std::function<void()> on_reconnect_;
  std::function<void(const std::string&)> on_unfenced_;
  std::function<void(const std::string&)> on_refused_;
  std::error_code refused_;
  std::vector<std::shared_ptr<request>> before_map_;  // submitted before the first map read
  bool first_round_done_ = false;
  std::map<transport::listener_id, listening> listeners_;  // cluster mode
  transport::listener_id next_listener_ = 1;
  asio::steady_timer periodic_;
  bool refreshing_ = false, refresh_again_ = false, stopped_ = false;
  clock::time_point last_refresh_{};
  std::map<std::pair<std::string, std::uint16_t>, node_traffic> traffic_;
  redirect_counts redirected_;
  std::set<std::pair<std::string, std::uint16_t>> down_;  // masters whose links are down
  bool outage_armed_ = false;
  asio::steady_timer outage_;
  std::chrono::milliseconds outage_delay_{outage_refresh};
  clock::time_point outage_since_{};
  std::vector<endpoint> adopted_masters_;  // as the last map read gave them
  std::shared_ptr<sentinels> sentinels_;   // sentinel mode
};

}  // namespace dlock::topology
