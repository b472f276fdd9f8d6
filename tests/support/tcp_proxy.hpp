// A TCP proxy on loopback that tests control, for partitions and latency without network
// namespaces: it listens on 127.0.0.1:<free port> and forwards every connection to
// 127.0.0.1:<target>. It knows nothing of Redis (it is just TCP), so it can sit between a client
// and a server or between a replica and its master (`--replicaof 127.0.0.1 <proxy port>`).
//
//   dlock::test::redis_server srv;
//   dlock::test::tcp_proxy proxy{srv.port()};
//   auto cfg = dlock::config::from_uri("redis://127.0.0.1:" + std::to_string(proxy.port()));
//   proxy.blackhole(dlock::test::direction::server_to_client);  // replies vanish
//   proxy.pause(dlock::test::direction::both);                  // bytes wait in the proxy...
//   proxy.pass();                                               // ...and are delivered, in order
//   proxy.delay(dlock::test::direction::both, 50ms);            // every chunk 50 ms late
//   proxy.reset_all();                                          // RST every proxied connection
//
// Each direction (client→server, server→client) has a mode, shared by every connection, new
// ones included:
//   pass       bytes are forwarded, each chunk `delay` after the proxy read it (order kept: a
//              chunk never overtakes an earlier one);
//   blackhole  bytes are read and dropped, and so are those the proxy held for that direction
//              when the blackhole began; connections stay open. An end of stream (FIN, or an
//              error on the source) is not dropped: it is delivered once the direction passes
//              again, so connections do not linger forever after a heal;
//   pause      bytes are read and held (and an end of stream after them); resume() or pass()
//              delivers them in order. Data read from a peer that has since gone is delivered
//              all the same, as TCP delivers what was sent before a FIN: a late request really
//              arrives late.
// A direction whose held bytes pass 4 MiB per connection stops reading (TCP flow control).
// Controls take effect on return: every byte the proxy reads afterwards obeys them.
//
// Implementation: non-blocking POSIX sockets, poll() and one thread (no busy loop: it sleeps
// until a socket is ready, the next delayed chunk is due, or a control call wakes it). Every
// member may be called from any thread. The destructor stops the thread (bounded: the thread
// only ever blocks in poll, and in a loopback connect of at most 1 s) and closes everything.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

namespace dlock::test {

enum class direction { both, client_to_server, server_to_client };

class tcp_proxy {
 public:
  // Starts listening and forwarding to 127.0.0.1:target_port. Throws std::runtime_error when
  // the listening socket or the thread cannot be set up.
  explicit tcp_proxy(std::uint16_t target_port);
  ~tcp_proxy();
  tcp_proxy(const tcp_proxy&) = delete;
  tcp_proxy& operator=(const tcp_proxy&) = delete;

  // The port clients connect to, and the one the proxy connects to.
  std::uint16_t port() const noexcept;
  std::uint16_t target_port() const noexcept;

  // Both directions forward at once: no blackhole, no pause, no delay; held bytes (paused or
  // delayed) are delivered now, in order.
  void pass();
  // Drops the bytes of `d` (and those held for it) from now on.
  void blackhole(direction d = direction::both);
  // Holds the bytes of `d` until resume() or pass().
  void pause(direction d = direction::both);
  // `d` forwards again (its delay is kept): held bytes are delivered in order.
  void resume(direction d = direction::both);
  // Holds the bytes of `d` on the connections open now (those the proxy has accepted: see
  // connections()), whatever the mode, until thaw() or pass(); connections accepted later are
  // not frozen. A request sent on a connection its client has since given up on then arrives
  // after what the client sent on its next one (a late request), as after a partition heals.
  void freeze(direction d = direction::both);
  // The same for the open connections whose client's first bytes (up to 256) contain
  // `client_said` — one client's command connection by the name its handshake sets, say.
  void freeze(direction d, std::string_view client_said);
  void thaw();
  // Every chunk of `d` read from now on is delivered `ms` after it was read (0: no delay). Does
  // not change the mode.
  void delay(direction d, std::chrono::milliseconds ms);
  // Closes every proxied connection with a reset (both peers see ECONNRESET or EOF). New
  // connections are still accepted.
  void reset_all();

  // Proxied connections open now, and accepted since the start.
  std::size_t connections() const;
  std::size_t accepted() const;
  // Bytes written to the destination, dropped by blackholes, and held (read, not yet written),
  // in direction `d` (both: the sum), over all connections.
  std::uint64_t bytes_forwarded(direction d = direction::both) const;
  std::uint64_t bytes_dropped(direction d = direction::both) const;
  std::uint64_t bytes_held(direction d = direction::both) const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace dlock::test
