// The socket of a link's connection attempt (internal to link.cpp and link_handshake.cpp).
#pragma once

#include <asio/ip/tcp.hpp>
#include <asio/ssl.hpp>
#include <optional>

#include "transport/link.hpp"

namespace dlock::transport {

// The socket of one connection attempt. Handlers hold it by shared_ptr, so a reconnect can
// replace it while completions of the old one are still queued.
struct link::stream {
  stream(const executor_type& ex, asio::ssl::context* ctx) : plain{ex} {
    if (ctx != nullptr) tls.emplace(ex, *ctx);
  }
  asio::ip::tcp::socket& socket() { return tls ? tls->next_layer() : plain; }
  template <class F>
  void with(F&& f) {
    if (tls) {
      f(*tls);
    } else {
      f(plain);
    }
  }
  asio::ip::tcp::socket plain;
  std::optional<asio::ssl::stream<asio::ip::tcp::socket>> tls;
};

}  // namespace dlock::transport
