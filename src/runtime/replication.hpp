// The replica policy (config::wait_replicas, wait_timeout, on_shortfall) for every write of a
// lock: acquisitions, re-entries, renewals, releases.
//
// WAIT cannot run inside a script, blocks the connection it runs on, and counts only that
// connection's writes. So confirm() is called in the reply handler of the write (the router's
// replying() connection), and sends WAIT on that same connection, on the same connection
// generation (after a reconnect it would count nothing: it fails with connection_lost). One WAIT
// covers every write whose reply arrives while it is unanswered: pipelining answers in order,
// so such a write was sent before the WAIT. A batch of writes thus costs one WAIT.
//
// While replicas fall short, each WAIT holds the connection for up to wait_timeout: every other
// command of the client queues behind it (config::validate keeps wait_timeout under a third of
// the watchdog lease, so renewals still make it in time).
//
// `auto` (config::online_replicas) asks for the replicas `online` in INFO replication on that
// node: read before the first WAIT on a node, then again in the background when older than
// online_max_age. Redisson counts every connected replica, including ones still syncing, which
// never acknowledge.
// Strand only.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "dlock/config.hpp"
#include "transport/connection.hpp"

namespace dlock::detail {

// The replicas with `state=online` in an INFO replication text.
unsigned count_online_replicas(std::string_view info);

class replication {
 public:
  using clock = std::chrono::steady_clock;
  using confirmed = std::function<void(std::error_code, bool enough)>;
  static constexpr std::chrono::seconds online_max_age{1};

  explicit replication(const config& cfg) : cfg_{cfg} {}
  // A replica policy is set.
  bool wanted() const noexcept { return cfg_.wait_replicas > 0; }
  // Inside the reply handler of a write that came on `conn`: `done` runs once WAIT answers,
  // with `enough` when the replicas asked for acknowledged (an error: ec). Without a policy, at
  // once with enough = true.
  void confirm(transport::connection& conn, confirmed done);

  // WAITs sent, and those that came back short or failed (metrics, tests).
  std::uint64_t waits() const noexcept { return waits_; }
  std::uint64_t shortfalls() const noexcept { return shortfalls_; }

 private:
  struct pending {
    transport::connection* conn;
    std::uint64_t generation;
    std::vector<confirmed> waiting;
  };
  struct online {
    unsigned count = 0;
    clock::time_point read_at{};
    bool reading = false;
  };
  void read_online(transport::connection& conn, std::function<void(unsigned)> then);
  void send_wait(transport::connection& conn, unsigned need, std::shared_ptr<pending> p);

  const config& cfg_;
  std::vector<std::shared_ptr<pending>> pending_;  // WAITs unanswered, at most one per connection
  std::map<std::pair<std::string, std::uint16_t>, online> online_;  // auto: per node
  std::uint64_t waits_ = 0, shortfalls_ = 0;
};

}  // namespace dlock::detail
