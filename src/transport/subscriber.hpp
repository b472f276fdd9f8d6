// The subscriber connection: one connection in pub/sub mode carrying every channel and pattern
// this client listens to. Listeners are added and removed from any thread; they run on the
// subscriber's strand. After each reconnect all channels are subscribed again and every listener
// gets `resubscribed` ("you may have missed messages") once its channel is confirmed.
#pragma once

#include <atomic>
#include <string>
#include <utility>
#include <vector>

#include "transport/link.hpp"
#include "transport/subscriptions.hpp"

namespace dlock::transport {

class subscriber final : public link {
 public:
  subscriber(executor_type strand, config cfg, std::shared_ptr<asio::ssl::context> tls);

  using listeners = std::vector<std::pair<std::string, pubsub_listener>>;

  // Listens to channels (one SUBSCRIBE for those new to this connection) or to a pattern
  // (PSUBSCRIBE). Thread-safe; returns the ids for unlisten(), in order. A listener runs on
  // the strand and must not block.
  std::vector<listener_id> listen(listeners channels);
  // The same for Redis Cluster shard channels (SSUBSCRIBE, Redis >= 7.0).
  std::vector<listener_id> listen_shard(listeners channels);
  listener_id listen(std::string channel, pubsub_listener fn);
  listener_id listen_pattern(std::string pattern, pubsub_listener fn);
  // Stops listeners; the channels that lost their last one are unsubscribed in one command.
  // Thread-safe. A listener may still run once if a message is being dispatched.
  void unlisten(std::vector<listener_id> ids);
  void unlisten(listener_id id) { unlisten(std::vector<listener_id>{id}); }
  // Whether any listener is registered (strand only).
  bool listening() const noexcept { return subs_.listeners() > 0; }

 private:
  std::vector<listener_id> add(subscriptions::kind k, listeners items);
  void on_ready() override;
  void on_reply(reply r) override;
  void on_down(std::error_code why) override;
  void fill_write(std::string& out) override;
  void on_idle() override;
  void on_stopped() override;
  void arm_overdue_check();
  clock::time_point deadline() const { return clock::now() + cfg().command_timeout; }

  subscriptions subs_;
  std::string out_;  // commands decided but not yet written
  std::atomic<listener_id> next_id_{1};
  asio::steady_timer overdue_timer_;
  bool overdue_armed_ = false;
};

}  // namespace dlock::transport
