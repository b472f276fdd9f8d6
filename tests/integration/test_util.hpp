// Helpers shared by the integration tests: thread-safe event recording with bounded waits.
#pragma once

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <iostream>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "dlock/config.hpp"
#include "support/redis_server.hpp"

namespace dlock::test {

// Milliseconds since `t`, and a "[ timing ]" line with such a figure (fixture tests).
inline std::chrono::milliseconds since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               t);
}
inline void report_timing(const std::string& what, std::chrono::milliseconds took) {
  std::cout << "[ timing   ] " << what << ": " << took.count() << " ms" << std::endl;
}

// Collects values from any thread; tests wait (bounded) for a condition over them.
template <class T>
class recorder {
 public:
  void push(T v) {
    std::lock_guard lock{mu_};
    items_.push_back(std::move(v));
    cv_.notify_all();
  }
  // Waits until pred(items) holds or `limit` passes; returns whether it held.
  bool wait_for(std::chrono::milliseconds limit,
                const std::function<bool(const std::vector<T>&)>& pred) {
    std::unique_lock lock{mu_};
    return cv_.wait_for(lock, limit, [&] { return pred(items_); });
  }
  std::vector<T> items() const {
    std::lock_guard lock{mu_};
    return items_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<T> items_;
};

// A name unique to this process and call, so runs never collide on a shared server.
inline std::string unique_name(const std::string& prefix) {
  static std::atomic<unsigned> n{0};
  return prefix + ":" + std::to_string(::getpid()) + ":" + std::to_string(++n);
}

// A config for `srv` (URI query `extra`, e.g. "watchdog=600ms") that reconnects within 10-100 ms,
// so tests that break connections do not wait on the default backoff.
inline dlock::config config_for(const redis_server& srv, const std::string& extra = "") {
  auto cfg = dlock::config::from_uri(srv.url() + (extra.empty() ? "" : "?" + extra));
  cfg.reconnect_min = std::chrono::milliseconds{10};
  cfg.reconnect_max = std::chrono::milliseconds{100};
  return cfg;
}

// How many clients the server counts as subscribed to `channel` (PUBSUB NUMSUB).
inline long numsub(const redis_server& srv, const std::string& channel) {
  // The fixture renders the reply as "[<channel>, :<n>]": take the last integer.
  auto text = srv.command({"PUBSUB", "NUMSUB", channel});
  auto colon = text.rfind(':');
  return colon == std::string::npos ? -1 : std::stol(text.substr(colon + 1));
}

// A command's counter in INFO commandstats — "calls" (run), "rejected_calls" (refused before
// running: ACL, BUSY, ...) or "failed_calls" — for `command` as Redis names it there ("evalsha",
// "client|kill"); 0 before the command was first seen.
inline long long command_stat(const redis_server& srv, const std::string& command,
                              const std::string& field = "calls") {
  const auto stats = srv.command({"INFO", "commandstats"});
  const auto line = stats.find("cmdstat_" + command + ":");
  if (line == std::string::npos) return 0;
  const auto end = stats.find('\n', line);
  const auto at = stats.find(field + "=", line);
  if (at == std::string::npos || at > end) return 0;
  return std::stoll(stats.substr(at + field.size() + 1));
}

// A single-node Redis Cluster serving every slot, ready (cluster_state:ok). Its bus port is
// picked free apart from the main port, so a start may lose that port to another test's server:
// it is tried again with another.
inline std::unique_ptr<redis_server> start_cluster_node() {
  for (int attempt = 0;; ++attempt) {
    try {
      auto srv = std::make_unique<redis_server>(redis_server_options{
          .extra_args = {"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                         "--cluster-port", std::to_string(free_port())}});
      if (srv->command({"CLUSTER", "ADDSLOTSRANGE", "0", "16383"}) != "+OK") {
        throw std::runtime_error{"CLUSTER ADDSLOTSRANGE refused"};
      }
      if (!wait_until(
              [&] {
                return srv->command({"CLUSTER", "INFO"}).find("cluster_state:ok") !=
                       std::string::npos;
              },
              std::chrono::seconds{10})) {
        throw std::runtime_error{"the cluster node never reached cluster_state:ok"};
      }
      return srv;
    } catch (const std::exception&) {
      if (attempt == 2) throw;
    }
  }
}

}  // namespace dlock::test
