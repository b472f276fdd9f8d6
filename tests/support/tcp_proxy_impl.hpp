// The inside of tcp_proxy (tcp_proxy.hpp): its connections, each with a flow of held bytes per
// direction, and the one thread that moves them. The thread and its sockets are in
// tcp_proxy_loop.cpp, the control calls and the counters in tcp_proxy.cpp.
#pragma once

#include <poll.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <list>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "support/tcp_proxy.hpp"

namespace dlock::test {

struct tcp_proxy::impl {
  using clock = std::chrono::steady_clock;

  enum class mode { pass, blackhole, pause };

  struct chunk {
    std::string data;
    std::size_t offset = 0;
    clock::time_point due;
  };

  // One direction of one connection: bytes read from `from`, held in `queue`, written to `to`.
  struct flow {
    int from = -1, to = -1;
    std::deque<chunk> queue;
    std::size_t held = 0;  // bytes in queue not yet written
    bool eof = false;      // the source ended: deliver an end of stream after the queue
    bool done = false;     // the end of stream was delivered, or the destination is gone
    bool frozen = false;   // freeze(): held whatever the mode, until thaw() or pass()
    std::string head;      // the first bytes read (up to head_size), for freeze()'s filter
  };

  struct connection {
    std::uint64_t id = 0;
    int client = -1, server = -1;
    flow up, down;  // client→server, server→client
  };

  std::uint16_t target = 0;
  std::uint16_t port = 0;
  int listener = -1;
  int wake_read = -1, wake_write = -1;

  mutable std::mutex mu;  // everything below; held by the thread while it moves bytes
  bool stopping = false;
  std::array<mode, 2> modes{mode::pass, mode::pass};  // [0] client→server, [1] server→client
  std::array<std::chrono::milliseconds, 2> delays{};
  std::array<std::uint64_t, 2> forwarded{}, dropped{};
  std::list<connection> conns;
  std::size_t accepted = 0;  // also the id of the latest connection

  std::thread thread;

  // Calls fn(index) for each direction `d` names: 0 client→server, 1 server→client.
  template <class Fn>
  static void each(direction d, Fn fn) {
    if (d != direction::server_to_client) fn(std::size_t{0});
    if (d != direction::client_to_server) fn(std::size_t{1});
  }

  // Runs a control call's change under the lock, then wakes the thread to act on it.
  template <class Fn>
  void control(Fn change) {
    {
      std::lock_guard lock{mu};
      change();
    }
    wake();
  }

  // Wakes the thread (from any thread); what a control call or reset_all needs, under `mu`.
  void wake() const;
  void drop_held(std::size_t i);
  void close_connection(connection& c);

  // The thread's work, under `mu` (tcp_proxy_loop.cpp).
  void accept_all();
  bool can_read(const flow& f, std::size_t i) const;
  // The front chunk may be written now.
  bool front_due(const flow& f, std::size_t i, clock::time_point now) const;
  void read(flow& f, std::size_t d);
  void write(flow& f, std::size_t d);
  short events_for(int fd, const connection& c, clock::time_point now) const;
  // Milliseconds until the earliest delayed chunk is due (rounded up), or -1.
  int timeout_ms(clock::time_point now) const;
  // Reads what poll reported (when `fds` is given) and writes what is due, for every connection;
  // closes the finished ones. accept_all may have added connections (they have no pollfd yet)
  // and reset_all may have removed some while the lock was released: pollfds are matched to
  // connections by id.
  void service_all(const std::vector<pollfd>* fds, const std::vector<std::uint64_t>* ids);
  void run();
};

}  // namespace dlock::test
