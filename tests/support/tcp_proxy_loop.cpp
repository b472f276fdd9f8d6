// tcp_proxy's thread (tcp_proxy_impl.hpp): it accepts connections, connects each to the target,
// and moves bytes between them as the modes say, sleeping in poll() until a socket is ready, the
// next delayed chunk is due, or a control call wakes it; and the constructor and destructor that
// start and stop it.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>

#include "support/tcp_proxy.hpp"
#include "support/tcp_proxy_impl.hpp"

namespace dlock::test {
namespace {

constexpr std::size_t hold_limit = 4 * 1024 * 1024;  // per connection and direction
constexpr std::size_t read_size = 64 * 1024;
constexpr std::size_t head_size = 256;  // client bytes kept per connection for freeze()
constexpr int connect_limit_ms = 1000;

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

}  // namespace

void tcp_proxy::impl::wake() const {
  char c = 1;
  [[maybe_unused]] auto n = ::write(wake_write, &c, 1);  // full pipe: a wake-up is pending
}

void tcp_proxy::impl::drop_held(std::size_t i) {
  for (auto& c : conns) {
    auto& f = i == 0 ? c.up : c.down;
    dropped[i] += f.held;
    f.queue.clear();
    f.held = 0;
  }
}

void tcp_proxy::impl::close_connection(connection& c) {
  close_with_reset(c.client);
  close_with_reset(c.server);
}

void tcp_proxy::impl::accept_all() {
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

bool tcp_proxy::impl::can_read(const flow& f, std::size_t i) const {
  if (f.eof) return false;
  return modes[i] == mode::blackhole || f.done || f.held < hold_limit;
}

// The front chunk may be written now.
bool tcp_proxy::impl::front_due(const flow& f, std::size_t i, clock::time_point now) const {
  return modes[i] == mode::pass && !f.frozen && !f.done && !f.queue.empty() &&
         f.queue.front().due <= now;
}

void tcp_proxy::impl::read(flow& f, std::size_t d) {
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

void tcp_proxy::impl::write(flow& f, std::size_t d) {
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

short tcp_proxy::impl::events_for(int fd, const connection& c, clock::time_point now) const {
  short ev = 0;
  const flow& in = fd == c.client ? c.up : c.down;   // read from fd
  const flow& out = fd == c.client ? c.down : c.up;  // written to fd
  const std::size_t in_dir = fd == c.client ? 0 : 1;
  if (can_read(in, in_dir)) ev |= POLLIN;
  if (front_due(out, 1 - in_dir, now)) ev |= POLLOUT;
  return ev;
}

// Milliseconds until the earliest delayed chunk is due (rounded up), or -1.
int tcp_proxy::impl::timeout_ms(clock::time_point now) const {
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
void tcp_proxy::impl::service_all(const std::vector<pollfd>* fds,
                                  const std::vector<std::uint64_t>* ids) {
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

void tcp_proxy::impl::run() {
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

}  // namespace dlock::test
