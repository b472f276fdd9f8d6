// Helpers shared by the integration tests: thread-safe event recording with bounded waits.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <vector>
#include <atomic>
#include <unistd.h>

#include "dlock/config.hpp"
#include "support/redis_server.hpp"

namespace dlock::test {

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
  bool wait_for(std::chrono::milliseconds limit, const std::function<bool(const std::vector<T>&)>& pred) {
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

}  // namespace dlock::test
