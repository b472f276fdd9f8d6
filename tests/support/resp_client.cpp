// A tiny blocking RESP2 client for the test support library: send_command (and through it
// redis_server::command), free_port, and the loopback connections both use.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/posix_util.hpp"
#include "support/redis_server.hpp"

namespace dlock::test {
namespace posix {

unique_fd connect_loopback(std::uint16_t port, clock_type::time_point deadline) {
  unique_fd fd{::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)};
  if (fd.get() < 0) throw_errno("socket", errno);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const std::string where = "127.0.0.1:" + std::to_string(port);
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    if (errno != EINPROGRESS) throw_errno("connect to " + where, errno);
    pollfd p{fd.get(), POLLOUT, 0};
    int r;
    do {
      r = ::poll(&p, 1, poll_ms(deadline));
    } while (r < 0 && errno == EINTR);
    if (r < 0) throw_errno("poll", errno);
    if (r == 0) throw std::runtime_error("connect to " + where + ": timed out");
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) {
      throw_errno("getsockopt", errno);
    }
    if (err != 0) throw_errno("connect to " + where, err);
  }
  return fd;
}

bool tcp_accepts(std::uint16_t port, std::chrono::milliseconds limit) {
  try {
    connect_loopback(port, clock_type::now() + limit);
    return true;
  } catch (const std::runtime_error&) {
    return false;
  }
}

}  // namespace posix

using posix::clock_type;
using posix::connect_loopback;
using posix::poll_ms;
using posix::throw_errno;
using posix::unique_fd;

namespace {

class resp_conn {
 public:
  resp_conn(std::uint16_t port, clock_type::time_point deadline)
      : fd_{connect_loopback(port, deadline)}, deadline_{deadline}, port_{port} {}

  std::string call(const std::vector<std::string>& args) {
    std::string out = "*" + std::to_string(args.size()) + "\r\n";
    for (const auto& a : args) out += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
    write_all(out);
    return read_reply();
  }

 private:
  void wait_for(short events) {
    pollfd p{fd_.get(), events, 0};
    int r;
    do {
      r = ::poll(&p, 1, poll_ms(deadline_));
    } while (r < 0 && errno == EINTR);
    if (r < 0) throw_errno("poll", errno);
    if (r == 0) throw std::runtime_error(where() + ": timed out");
  }

  void write_all(const std::string& data) {
    std::size_t off = 0;
    while (off < data.size()) {
      const auto n = ::send(fd_.get(), data.data() + off, data.size() - off, MSG_NOSIGNAL);
      if (n >= 0) {
        off += static_cast<std::size_t>(n);
      } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
        wait_for(POLLOUT);
      } else if (errno != EINTR) {
        throw_errno(where() + ": send", errno);
      }
    }
  }

  void fill() {
    char buf[4096];
    for (;;) {
      const auto n = ::recv(fd_.get(), buf, sizeof buf, 0);
      if (n > 0) {
        buf_.append(buf, static_cast<std::size_t>(n));
        return;
      }
      if (n == 0) throw std::runtime_error(where() + ": connection closed by the server");
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        wait_for(POLLIN);
      } else if (errno != EINTR) {
        throw_errno(where() + ": recv", errno);
      }
    }
  }

  std::string read_line() {
    for (;;) {
      const auto end = buf_.find("\r\n", pos_);
      if (end != std::string::npos) {
        std::string line = buf_.substr(pos_, end - pos_);
        pos_ = end + 2;
        return line;
      }
      fill();
    }
  }

  std::string read_exact(std::size_t n) {
    while (buf_.size() - pos_ < n) fill();
    std::string s = buf_.substr(pos_, n);
    pos_ += n;
    return s;
  }

  long long read_length(const std::string& line) {
    try {
      std::size_t used = 0;
      const long long n = std::stoll(line.substr(1), &used);
      if (used == line.size() - 1 && n >= -1) return n;
    } catch (const std::exception&) {
    }
    throw std::runtime_error(where() + ": bad RESP length line: " + line);
  }

  std::string read_reply() {
    const std::string line = read_line();
    if (line.empty()) throw std::runtime_error(where() + ": empty RESP line");
    switch (line[0]) {
      case '+':
      case '-':
      case ':':
        return line;
      case '$': {
        const long long n = read_length(line);
        if (n < 0) return "$-1";
        std::string s = read_exact(static_cast<std::size_t>(n) + 2);
        s.resize(static_cast<std::size_t>(n));
        return s;
      }
      case '*': {
        const long long n = read_length(line);
        if (n < 0) return "*-1";
        std::string s = "[";
        for (long long i = 0; i < n; ++i) {
          if (i > 0) s += ", ";
          s += read_reply();
        }
        return s + "]";
      }
      default:
        throw std::runtime_error(where() + ": not a RESP2 reply: " + line);
    }
  }

  std::string where() const { return "redis 127.0.0.1:" + std::to_string(port_); }

  unique_fd fd_;
  clock_type::time_point deadline_;
  std::uint16_t port_;
  std::string buf_;
  std::size_t pos_ = 0;
};

}  // namespace

std::uint16_t free_port() {
  unique_fd fd{::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
  if (fd.get() < 0) throw_errno("socket", errno);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = 0;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    throw_errno("bind 127.0.0.1:0", errno);
  }
  socklen_t len = sizeof addr;
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    throw_errno("getsockname", errno);
  }
  return ntohs(addr.sin_port);
}

std::string send_command(std::uint16_t port, const std::vector<std::string>& args,
                         const command_options& opts) {
  if (args.empty()) throw std::invalid_argument("send_command: no arguments");
  resp_conn conn{port, clock_type::now() + opts.timeout};
  if (opts.authenticate && !opts.password.empty()) {
    std::vector<std::string> auth{"AUTH"};
    if (!opts.username.empty()) auth.push_back(opts.username);
    auth.push_back(opts.password);
    auto r = conn.call(auth);
    if (r != "+OK") {
      throw std::runtime_error("AUTH failed on port " + std::to_string(port) + ": " + r);
    }
  }
  return conn.call(args);
}

}  // namespace dlock::test
