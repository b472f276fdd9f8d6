// Helpers of the partition tests: a raw TCP client for the proxy's own tests, clients configured
// through the proxy. Measured numbers go through dlock::faults::measured (measured.hpp).
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include "dlock/client.hpp"
#include "dlock/config.hpp"
#include "measured.hpp"
#include "support/redis_server.hpp"
#include "support/tcp_proxy.hpp"

namespace dlock::test {

using steady = std::chrono::steady_clock;

inline long long ms_between(steady::time_point from, steady::time_point to) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(to - from).count();
}

// The holder's settings in the partition scenarios: short watchdog lease, timeouts well under it.
inline const std::string holder_params = "watchdog=900ms&timeout=300ms&connect_timeout=300ms";

// A config that connects through `proxy` (URI query `extra`), reconnecting within 10-100 ms.
inline dlock::config config_through(const tcp_proxy& proxy, const std::string& extra) {
  auto cfg = dlock::config::from_uri("redis://127.0.0.1:" + std::to_string(proxy.port()) +
                                     (extra.empty() ? "" : "?" + extra));
  cfg.reconnect_min = std::chrono::milliseconds{10};
  cfg.reconnect_max = std::chrono::milliseconds{100};
  return cfg;
}

// True when no owner field of `c` is left in the lock `name`.
inline bool none_of_ours(dlock::client& c, dlock::client& observer, const std::string& name) {
  const auto fields = observer.execute({"HKEYS", name});  // alive for the loop
  for (auto& f : fields.elements()) {
    if (f.str().starts_with(c.id() + ":")) return false;
  }
  return true;
}

// The holder recovers after the heal: a command goes through again.
inline steady::time_point wait_reconnected(dlock::client& c) {
  EXPECT_TRUE(wait_until(
      [&] {
        std::error_code ec;
        c.ping(ec);
        return !ec;
      },
      std::chrono::seconds{5}));
  return steady::now();
}

// A blocking TCP client to 127.0.0.1:port whose reads are bounded by a time limit.
class raw_client {
 public:
  explicit raw_client(std::uint16_t port) : fd_{::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)} {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      if (fd_ >= 0) ::close(fd_);
      throw std::runtime_error("raw_client: cannot connect");
    }
  }
  ~raw_client() { ::close(fd_); }
  raw_client(const raw_client&) = delete;
  raw_client& operator=(const raw_client&) = delete;

  void send(std::string_view bytes) {
    while (!bytes.empty()) {
      auto n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) throw std::runtime_error("raw_client: send failed");
      bytes.remove_prefix(static_cast<std::size_t>(n));
    }
  }
  // Reads until `n` bytes came, the peer closed, or `limit` passed; returns what came.
  std::string read_exact(std::size_t n, std::chrono::milliseconds limit) {
    std::string out;
    const auto end = steady::now() + limit;
    while (out.size() < n && !closed_) {
      const auto left = ms_between(steady::now(), end);
      if (left <= 0 || !readable(static_cast<int>(left))) break;
      read_some(out, n - out.size());
    }
    return out;
  }
  // Everything that arrives within `limit`.
  std::string read_for(std::chrono::milliseconds limit) {
    std::string out;
    const auto end = steady::now() + limit;
    while (!closed_) {
      const auto left = ms_between(steady::now(), end);
      if (left <= 0 || !readable(static_cast<int>(left))) break;
      read_some(out, 1 << 16);
    }
    return out;
  }
  // True once the peer closed (EOF or reset) within `limit`; data before that is discarded.
  bool closed_within(std::chrono::milliseconds limit) {
    read_for(limit);
    return closed_;
  }

 private:
  bool readable(int ms) {
    pollfd p{fd_, POLLIN, 0};
    return ::poll(&p, 1, ms) == 1;
  }
  void read_some(std::string& out, std::size_t max) {
    std::string buf(std::min<std::size_t>(max, 1 << 16), '\0');
    auto n = ::recv(fd_, buf.data(), buf.size(), 0);
    if (n <= 0) {
      closed_ = true;
      return;
    }
    out.append(buf, 0, static_cast<std::size_t>(n));
  }

  int fd_;
  bool closed_ = false;
};

}  // namespace dlock::test
