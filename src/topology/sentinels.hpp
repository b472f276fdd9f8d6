// Sentinel mode's link to the sentinels (the Asio shell of sentinel_view): finds the master,
// and follows it when it moves.
//
// - locate() gives the links to the master the address to connect to: the master last found,
//   or after rediscover() (a node said it is not a master, or answered READONLY) the result of a
//   new round of SENTINEL MASTER over the sentinels in turn (sentinel_view: epochs keep a
//   sentinel that has not heard of a failover from sending the client back).
// - Each sentinel has a subscriber listening to `+switch-master`, and every poll_interval a
//   round asks the sentinels again, in case a message was missed (a sentinel partitioned, a
//   subscriber reconnecting).
// - When a round or a message names another master, on_switch runs: the router moves its links.
// The sentinels get the client's settings, with sentinel_user / sentinel_password for AUTH.
// Strand only, except start() and stop().
#pragma once

#include <asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "topology/sentinel_view.hpp"
#include "transport/connection.hpp"
#include "transport/subscriber.hpp"

namespace dlock::topology {

class sentinels : public std::enable_shared_from_this<sentinels> {
 public:
  using clock = std::chrono::steady_clock;
  using located = transport::link::located;
  static constexpr std::chrono::seconds poll_interval{1};

  sentinels(transport::executor_type strand, const config& cfg,
            std::shared_ptr<asio::ssl::context> tls);

  void on_switch(std::function<void(const endpoint&)> fn) { on_switch_ = std::move(fn); }
  void start();
  void stop();

  void locate(located fn);
  void rediscover();
  // Where a node was last named master and when this client learnt it no longer was.
  struct demotion {
    endpoint node;
    clock::time_point at;
  };
  const std::vector<demotion>& demotions() const noexcept { return demotions_; }
  std::optional<endpoint> master() const { return view_.master(); }

 private:
  config sentinel_config(const endpoint& e) const;
  transport::connection& conn(std::size_t i);
  void run_round();
  void ask(std::size_t i);
  void finish(const sentinel_view::step& s);
  void learn_switch(const endpoint& e);
  void moved_from(const endpoint& before);
  void arm_poll();

  transport::executor_type strand_;
  config cfg_;
  std::shared_ptr<asio::ssl::context> tls_;
  sentinel_view view_;
  std::vector<std::shared_ptr<transport::connection>> conns_;
  std::vector<std::shared_ptr<transport::subscriber>> subs_;
  std::vector<located> waiting_;
  std::function<void(const endpoint&)> on_switch_;
  std::vector<demotion> demotions_;
  asio::steady_timer poll_;
  bool running_ = false, stale_ = false, again_ = false, stopped_ = false;
};

}  // namespace dlock::topology
