#include "support/tcp_proxy.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <deque>
#include <list>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace dlock::test {
namespace {

using clock = std::chrono::steady_clock;

constexpr std::size_t hold_limit = 4 * 1024 * 1024;  // per connection and direction
constexpr std::size_t read_size = 64 * 1024;
constexpr std::size_t head_size = 256;  // client bytes kept per connection for freeze()
constexpr int connect_limit_ms = 1000;

enum class mode { pass, blackhole, pause };

[[noreturn]] void fail(const std::string& what) {
  throw std::runtime_error("tcp_proxy: " + what + ": " + std::strerror(errno));
}

sockaddr_in loopback(std::uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

void no_delay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// Closes with a reset rather than a FIN (no TIME_WAIT, and the peer learns at once).
void close_with_reset(int fd) {
  linger l{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
  ::close(fd);
}

// A non-blocking socket connected to 127.0.0.1:port, or -1 (refused, or no answer within
// connect_limit_ms: loopback answers at once unless the listen backlog is full).
int connect_to(std::uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  auto a = loopback(port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    if (errno != EINPROGRESS) {
      ::close(fd);
      return -1;
    }
    pollfd p{fd, POLLOUT, 0};
    int err = 0;
    socklen_t len = sizeof err;
    if (::poll(&p, 1, connect_limit_ms) != 1 ||
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
      ::close(fd);
      return -1;
    }
  }
  no_delay(fd);
  return fd;
}

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

}  // namespace

struct tcp_proxy::impl {
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

  void wake() const {
    char c = 1;
    [[maybe_unused]] auto n = ::write(wake_write, &c, 1);  // full pipe: a wake-up is pending
  }

  void drop_held(std::size_t i) {
    for (auto& c : conns) {
      auto& f = i == 0 ? c.up : c.down;
      dropped[i] += f.held;
      f.queue.clear();
      f.held = 0;
    }
  }

  void close_connection(connection& c) {
    close_with_reset(c.client);
    close_with_reset(c.server);
  }

  void accept_all() {
    for (;;) {
      int fd = ::accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;  // EAGAIN, or a connection that died in the backlog
      no_delay(fd);
      int server = connect_to(target);
      if (server < 0) {
        close_with_reset(fd);  // nothing listens behind us: the client sees a reset
        continue;
      }
      ++accepted;
      auto& c = conns.emplace_back();
      c.id = accepted;
      c.client = fd;
      c.server = server;
      c.up.from = fd;
      c.up.to = server;
      c.down.from = server;
      c.down.to = fd;
    }
  }

  bool can_read(const flow& f, std::size_t i) const {
    if (f.eof) return false;
    return modes[i] == mode::blackhole || f.done || f.held < hold_limit;
  }

  // The front chunk may be written now.
  bool front_due(const flow& f, std::size_t i, clock::time_point now) const {
    return modes[i] == mode::pass && !f.frozen && !f.done && !f.queue.empty() &&
           f.queue.front().due <= now;
  }

  void read(flow& f, std::size_t d) {
    std::string buf(read_size, '\0');
    for (int rounds = 0; rounds < 16 && can_read(f, d); ++rounds) {
      auto n = ::recv(f.from, buf.data(), buf.size(), 0);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
      if (n <= 0) {  // EOF or an error (e.g. a reset): the source is finished either way
        f.eof = true;
        return;
      }
      const auto size = static_cast<std::size_t>(n);
      if (f.head.size() < head_size)
        f.head.append(buf.data(), std::min(size, head_size - f.head.size()));
      if (f.done || modes[d] == mode::blackhole) {
        dropped[d] += size;
        continue;
      }
      f.queue.push_back(chunk{buf.substr(0, size), 0, clock::now() + delays[d]});
      f.held += size;
    }
  }

  void write(flow& f, std::size_t d) {
    while (front_due(f, d, clock::now())) {
      auto& c = f.queue.front();
      auto n = ::send(f.to, c.data.data() + c.offset, c.data.size() - c.offset,
                      MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
      if (n < 0) {  // the destination is gone: nothing more can reach it
        dropped[d] += f.held;
        f.queue.clear();
        f.held = 0;
        f.done = true;
        return;
      }
      const auto size = static_cast<std::size_t>(n);
      forwarded[d] += size;
      f.held -= size;
      c.offset += size;
      if (c.offset == c.data.size()) f.queue.pop_front();
    }
    if (f.eof && !f.done && !f.frozen && f.queue.empty() && modes[d] == mode::pass) {
      ::shutdown(f.to, SHUT_WR);
      f.done = true;
    }
  }

  short events_for(int fd, const connection& c, clock::time_point now) const {
    short ev = 0;
    const flow& in = fd == c.client ? c.up : c.down;   // read from fd
    const flow& out = fd == c.client ? c.down : c.up;  // written to fd
    const std::size_t in_dir = fd == c.client ? 0 : 1;
    if (can_read(in, in_dir)) ev |= POLLIN;
    if (front_due(out, 1 - in_dir, now)) ev |= POLLOUT;
    return ev;
  }

  // Milliseconds until the earliest delayed chunk is due (rounded up), or -1.
  int timeout_ms(clock::time_point now) const {
    std::optional<clock::time_point> next;
    for (auto& c : conns) {
      for (std::size_t i = 0; i < 2; ++i) {
        const flow& f = i == 0 ? c.up : c.down;
        if (modes[i] != mode::pass || f.frozen || f.done || f.queue.empty()) continue;
        auto due = f.queue.front().due;
        if (due > now && (!next || due < *next)) next = due;
      }
    }
    if (!next) return -1;
    auto ms = std::chrono::ceil<std::chrono::milliseconds>(*next - now).count();
    return static_cast<int>(std::max<long long>(1, ms));
  }

  // Reads what poll reported (when `fds` is given) and writes what is due, for every connection;
  // closes the finished ones. accept_all may have added connections (they have no pollfd yet)
  // and reset_all may have removed some while the lock was released: pollfds are matched to
  // connections by id.
  void service_all(const std::vector<pollfd>* fds, const std::vector<std::uint64_t>* ids) {
    std::size_t j = 0;
    for (auto it = conns.begin(); it != conns.end();) {
      auto& c = *it;
      if (fds) {
        while (j < ids->size() && (*ids)[j] != c.id) ++j;
        if (j < ids->size()) {
          constexpr short ready = POLLIN | POLLHUP | POLLERR;
          if ((*fds)[2 + 2 * j].revents & ready) read(c.up, 0);
          if ((*fds)[3 + 2 * j].revents & ready) read(c.down, 1);
        }
      }
      write(c.up, 0);
      write(c.down, 1);
      if (c.up.done && c.down.done) {
        close_connection(c);
        it = conns.erase(it);
      } else {
        ++it;
      }
    }
  }

  void run() {
    std::vector<pollfd> fds;
    std::vector<std::uint64_t> ids;  // ids[j]: the connection of fds[2 + 2j] and fds[3 + 2j]
    std::unique_lock lock{mu};
    while (!stopping) {
      // Chunks that came due while polling, or that a control call made due, go first.
      service_all(nullptr, nullptr);
      const auto now = clock::now();
      fds.clear();
      fds.push_back({wake_read, POLLIN, 0});
      fds.push_back({listener, POLLIN, 0});
      ids.clear();
      for (auto& c : conns) {
        ids.push_back(c.id);
        for (int fd : {c.client, c.server}) {
          const short ev = events_for(fd, c, now);
          // A socket polled for nothing would still report POLLHUP/POLLERR at once: leave it
          // out (fd -1) so that a finished peer cannot make the loop spin.
          fds.push_back({ev ? fd : -1, ev, 0});
        }
      }
      const int timeout = timeout_ms(now);
      lock.unlock();
      ::poll(fds.data(), fds.size(), timeout);
      lock.lock();
      if (stopping) break;
      if (fds[0].revents) {
        char buf[64];
        while (::read(wake_read, buf, sizeof buf) > 0) {
        }
      }
      if (fds[1].revents & POLLIN) accept_all();
      service_all(&fds, &ids);
    }
  }
};

tcp_proxy::tcp_proxy(std::uint16_t target_port) : impl_{std::make_unique<impl>()} {
  auto& m = *impl_;
  m.target = target_port;
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_NONBLOCK | O_CLOEXEC) != 0) fail("pipe2");
  m.wake_read = pipe_fds[0];
  m.wake_write = pipe_fds[1];
  m.listener = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (m.listener < 0) fail("socket");
  int one = 1;
  ::setsockopt(m.listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  auto a = loopback(0);
  if (::bind(m.listener, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) fail("bind");
  if (::listen(m.listener, 128) != 0) fail("listen");
  socklen_t len = sizeof a;
  if (::getsockname(m.listener, reinterpret_cast<sockaddr*>(&a), &len) != 0) fail("getsockname");
  m.port = ntohs(a.sin_port);
  m.thread = std::thread{[&m] { m.run(); }};
}

tcp_proxy::~tcp_proxy() {
  auto& m = *impl_;
  {
    std::lock_guard lock{m.mu};
    m.stopping = true;
  }
  m.wake();
  m.thread.join();
  for (auto& c : m.conns) m.close_connection(c);
  ::close(m.listener);
  ::close(m.wake_read);
  ::close(m.wake_write);
}

std::uint16_t tcp_proxy::port() const noexcept { return impl_->port; }
std::uint16_t tcp_proxy::target_port() const noexcept { return impl_->target; }

void tcp_proxy::pass() {
  impl_->control([&m = *impl_] {
    const auto now = clock::now();
    m.modes = {mode::pass, mode::pass};
    m.delays = {};
    for (auto& c : m.conns) {
      for (auto* f : {&c.up, &c.down}) {
        f->frozen = false;
        for (auto& ch : f->queue) ch.due = std::min(ch.due, now);
      }
    }
  });
}

void tcp_proxy::freeze(direction d) { freeze(d, ""); }

void tcp_proxy::freeze(direction d, std::string_view client_said) {
  impl_->control([&m = *impl_, d, needle = std::string{client_said}] {
    for (auto& c : m.conns) {
      if (c.up.head.find(needle) == std::string::npos) continue;
      impl::each(d, [&](std::size_t i) { (i == 0 ? c.up : c.down).frozen = true; });
    }
  });
}

void tcp_proxy::thaw() {
  impl_->control([&m = *impl_] {
    for (auto& c : m.conns) c.up.frozen = c.down.frozen = false;
  });
}

void tcp_proxy::blackhole(direction d) {
  impl_->control([&m = *impl_, d] {
    impl::each(d, [&](std::size_t i) {
      m.modes[i] = mode::blackhole;
      m.drop_held(i);
    });
  });
}

void tcp_proxy::pause(direction d) {
  impl_->control(
      [&m = *impl_, d] { impl::each(d, [&](std::size_t i) { m.modes[i] = mode::pause; }); });
}

void tcp_proxy::resume(direction d) {
  impl_->control(
      [&m = *impl_, d] { impl::each(d, [&](std::size_t i) { m.modes[i] = mode::pass; }); });
}

void tcp_proxy::delay(direction d, std::chrono::milliseconds ms) {
  impl_->control([&m = *impl_, d, ms] { impl::each(d, [&](std::size_t i) { m.delays[i] = ms; }); });
}

void tcp_proxy::reset_all() {
  impl_->control([&m = *impl_] {
    m.drop_held(0);
    m.drop_held(1);
    for (auto& c : m.conns) m.close_connection(c);
    m.conns.clear();
  });
}

std::size_t tcp_proxy::connections() const {
  std::lock_guard lock{impl_->mu};
  return impl_->conns.size();
}

std::size_t tcp_proxy::accepted() const {
  std::lock_guard lock{impl_->mu};
  return impl_->accepted;
}

std::uint64_t tcp_proxy::bytes_forwarded(direction d) const {
  std::lock_guard lock{impl_->mu};
  std::uint64_t n = 0;
  impl::each(d, [&](std::size_t i) { n += impl_->forwarded[i]; });
  return n;
}

std::uint64_t tcp_proxy::bytes_dropped(direction d) const {
  std::lock_guard lock{impl_->mu};
  std::uint64_t n = 0;
  impl::each(d, [&](std::size_t i) { n += impl_->dropped[i]; });
  return n;
}

std::uint64_t tcp_proxy::bytes_held(direction d) const {
  std::lock_guard lock{impl_->mu};
  std::uint64_t n = 0;
  for (auto& c : impl_->conns)
    impl::each(d, [&](std::size_t i) { n += (i == 0 ? c.up : c.down).held; });
  return n;
}

}  // namespace dlock::test
