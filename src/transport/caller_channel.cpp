#include "transport/caller_channel.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>

#include "dlock/error.hpp"
#include "resp/encoder.hpp"
#include "transport/link.hpp"

namespace dlock::transport {
namespace {

// poll() for `events` until `deadline`: true when ready, false on timeout or error.
bool wait_for(int fd, short events, caller_channel::clock::time_point deadline) {
  for (;;) {
    const auto left = deadline - caller_channel::clock::now();
    if (left <= caller_channel::clock::duration::zero()) return false;
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
    timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
    pollfd p{fd, events, 0};
    const int n = ::ppoll(&p, 1, &ts, nullptr);
    if (n > 0) return true;  // ready, or an error/hang-up the next call reports
    if (n < 0 && errno != EINTR) return false;
  }
}

}  // namespace

caller_channel::caller_channel(const config& cfg, const link& follows)
    : cfg_{cfg}, follows_{follows}, buf_(16 * 1024) {}

caller_channel::~caller_channel() { close(); }

caller_channel::turn caller_channel::take(clock::time_point deadline) {
  std::unique_lock lock{mu_, std::try_to_lock};
  if (!lock || closed_) return {};
  const auto peer = follows_.peer();
  if (!peer) {
    close();
    return {};
  }
  if (fd_ >= 0 && peer->second != follows_connects_) close();  // it reconnected: follow it
  if (fd_ >= 0 && clock::now() - last_used_ > std::chrono::seconds{1}) {
    // Closed or reset by the server while idle (its `timeout`, CLIENT KILL)? Then the next
    // request would be lost with its outcome unknown: reconnect first. (Not checked between
    // calls close together: one more system call each, for what the fence handles anyway.)
    char b;
    const auto n = ::recv(fd_, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) close();
  }
  if (fd_ < 0) {
    if (clock::now() < retry_at_) return {};
    follows_connects_ = peer->second;
    const auto by = std::min(deadline, clock::now() + cfg_.connect_timeout);
    if (!connect(peer->first, by)) {
      close();
      retry_at_ = clock::now() + cfg_.reconnect_max;
      return {};
    }
  }
  return turn{this, std::move(lock)};
}

bool caller_channel::connect(const asio::ip::tcp::endpoint& ep, clock::time_point deadline) {
  fd_ = ::socket(ep.protocol().family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd_ < 0) return false;
  int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (::connect(fd_, ep.data(), static_cast<socklen_t>(ep.size())) != 0) {
    if (errno != EINPROGRESS || !wait_for(fd_, POLLOUT, deadline)) return false;
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) return false;
  }
  // Blocking from here, each send and recv bounded by SO_SNDTIMEO/SO_RCVTIMEO (set_timeout):
  // one system call per request and per reply, as a synchronous client makes.
  const int flags = ::fcntl(fd_, F_GETFL);
  if (flags < 0 || ::fcntl(fd_, F_SETFL, flags & ~O_NONBLOCK) != 0) return false;
  timeout_ = unset;
  reader_.reset();
  // The command connection's handshake (link::send_handshake), in one write.
  std::string hello;
  std::size_t replies = append_handshake(
      hello, cfg_, cfg_.client_name.empty() ? std::string{} : cfg_.client_name + ":caller");
  // Its id, to fence a request left in doubt (client_impl::fence_caller_channel).
  resp::append_command(hello, {"CLIENT", "ID"});
  ++replies;
  std::error_code ec;
  if (!write_all(hello, deadline, ec)) return false;
  for (std::size_t i = 0; i < replies; ++i) {
    auto r = read_one(deadline, ec);
    if (!r || r->is_error()) return false;
    if (i + 1 == replies) {
      if (!r->is_integer() || r->integer() <= 0) return false;
      id_ = static_cast<std::uint64_t>(r->integer());
    }
  }
  ++connects_;
  return true;
}

void caller_channel::close(bool reset) {
  if (fd_ >= 0) {
    if (reset) {
      // A reset, not an orderly close: what is still unsent is dropped, never retransmitted.
      linger l{1, 0};
      ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    }
    ::close(fd_);
  }
  fd_ = -1;
  id_ = 0;
  reader_.reset();
}

void caller_channel::close_for_good() {
  std::lock_guard lock{mu_};
  closed_ = true;
  close();
}

// Bounds the socket's next blocking calls by `deadline`. The timeout is set again only when it
// is more than a millisecond off, so a call may overrun its deadline by up to that much.
bool caller_channel::set_timeout(clock::time_point deadline) {
  const auto left = deadline - clock::now();
  if (left <= clock::duration::zero()) return false;
  if (timeout_ == unset || left < timeout_ - std::chrono::milliseconds{1} ||
      left > timeout_ + std::chrono::milliseconds{1}) {
    const auto us = std::max<std::int64_t>(std::chrono::ceil<std::chrono::microseconds>(left).count(), 1);
    timeval tv{static_cast<time_t>(us / 1'000'000), static_cast<suseconds_t>(us % 1'000'000)};
    if (::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0 ||
        ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) != 0) {
      return false;
    }
    timeout_ = left;
  }
  return true;
}

bool caller_channel::write_all(std::string_view bytes, clock::time_point deadline,
                               std::error_code& ec) {
  while (!bytes.empty()) {
    if (!set_timeout(deadline)) {
      ec = errc::timeout;
      return false;
    }
    const auto n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n > 0) {
      bytes.remove_prefix(static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;  // deadline checked above
    ec = errc::connection_lost;
    return false;
  }
  return true;
}

std::optional<reply> caller_channel::read_one(clock::time_point deadline, std::error_code& ec) {
  for (;;) {
    if (auto r = reader_.next(ec)) return r;
    if (ec) return std::nullopt;
    if (!set_timeout(deadline)) {
      ec = errc::timeout;
      return std::nullopt;
    }
    const auto n = ::recv(fd_, buf_.data(), buf_.size(), 0);
    if (n > 0) {
      reader_.feed({buf_.data(), static_cast<std::size_t>(n)});
      continue;
    }
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;  // deadline checked above
    ec = errc::connection_lost;  // closed by the server, or reset
    return std::nullopt;
  }
}

std::error_code caller_channel::exchange(std::string_view bytes, std::size_t replies,
                                         clock::time_point deadline, reply& out) {
  std::error_code ec;
  last_used_ = clock::now();
  if (write_all(bytes, deadline, ec)) {
    for (std::size_t i = 0; i < replies && !ec; ++i) {
      if (auto r = read_one(deadline, ec)) out = std::move(*r);
    }
  }
  if (!ec) {
    // Nothing else was asked: a further reply in what was read means the stream is out of
    // step (a RESP2 server sends nothing unasked on a connection that does not subscribe).
    std::error_code more;
    if (reader_.next(more) || more) ec = errc::protocol_error;
  }
  if (ec) {
    // The reply may still come, or the stream is out of step: never reuse this connection,
    // and let the caller fence what it sent (take_doubtful()).
    doubtful_ = id_;
    close(true);
    retry_at_ = clock::now() + cfg_.reconnect_min;
    if (ec != errc::timeout) ec = errc::connection_lost;
    return ec;
  }
  if (out.is_error()) return classify_error_reply(out.str());
  return {};
}

std::error_code caller_channel::turn::eval(const scripts::script& s, std::string_view request,
                                           clock::time_point deadline, reply& out) {
  ++ch_->calls_;
  auto ec = ch_->exchange(request, 1, deadline, out);
  if (ec != errc::no_script) return ec;
  // Not in the server's script cache (SCRIPT FLUSH, a restart): load it and send again, back
  // to back; a second NOSCRIPT is reported.
  std::string again = resp::encode_command({"SCRIPT", "LOAD", s.text});
  again.append(request);
  return ch_->exchange(again, 2, deadline, out);
}

}  // namespace dlock::transport
