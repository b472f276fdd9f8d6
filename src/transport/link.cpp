#include "transport/link.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <asio/bind_executor.hpp>
#include <asio/post.hpp>
#include <asio/write.hpp>
#include <cerrno>
#include <random>
#include <typeinfo>

#include "dlock/error.hpp"
#include "resp/encoder.hpp"
#include "runtime/observer.hpp"
#include "transport/link_stream.hpp"
#include "transport/tls.hpp"

namespace dlock::transport {

namespace {

std::error_code map_connect_error(const std::error_code& ec) {
  if (ec == asio::error::connection_refused) return errc::connection_refused;
  if (ec == asio::error::host_not_found || ec == asio::error::host_not_found_try_again ||
      ec == asio::error::no_data || ec == asio::error::service_not_found) {
    return errc::resolve_failed;
  }
  return errc::connection_refused;
}

std::uint64_t seed() {
  std::random_device rd;
  return (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
}

}  // namespace

link::link(executor_type strand, config cfg, std::shared_ptr<asio::ssl::context> tls)
    : strand_{std::move(strand)},
      obs_{detail::observer_of(strand_)},
      cfg_{std::move(cfg)},
      tls_{std::move(tls)},
      resolver_{strand_},
      connect_timer_{strand_},
      retry_timer_{strand_},
      health_timer_{strand_},
      backoff_{cfg_.reconnect_min, cfg_.reconnect_max, seed()},
      rbuf_(64 * 1024),
      wbuf_{std::make_shared<std::string>()} {}

link::~link() = default;

void link::start() {
  asio::post(strand_, [self = shared_from_this()] {
    if (self->state_ == state::idle) self->connect();
  });
}

void link::stop() {
  asio::post(strand_, [self = shared_from_this()] {
    if (self->state_ == state::stopped) return;
    ++self->gen_;
    self->state_ = state::stopped;
    self->close_stream();
    self->retry_timer_.cancel();
    self->on_stopped();
  });
}

std::optional<std::pair<asio::ip::tcp::endpoint, std::uint64_t>> link::peer() const {
  std::lock_guard lock{peer_mu_};
  return peer_;
}

bool running_in(const executor_type& ex) noexcept {
  // Asio 1.22's any_executor::target<T>() casts without checking the type: checked here.
  using plain = asio::io_context::executor_type;
  if (ex.target_type() == typeid(plain)) return ex.target<plain>()->running_in_this_thread();
  return false;
}

void link::close_stream() {
  up_ = false;
  {
    std::lock_guard lock{peer_mu_};
    peer_.reset();
  }
  resolver_.cancel();
  connect_timer_.cancel();
  health_timer_.cancel();
  writing_ = false;
  if (stream_) {
    std::error_code ignored;
    stream_->socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
    stream_->socket().close(ignored);
    stream_.reset();
  }
  if (wbuf_.use_count() > 1) wbuf_ = std::make_shared<std::string>();  // an old write holds it
  wbuf_->clear();
}

// Runs on the strand.
void link::connect() {
  state_ = state::connecting;
  const auto gen = ++gen_;
  stream_ = std::make_shared<stream>(strand_, tls_.get());
  reader_.reset();
  connect_timer_.expires_after(cfg_.connect_timeout);
  connect_timer_.async_wait([self = shared_from_this(), gen](std::error_code ec) {
    if (!ec && gen == self->gen_ && self->state_ != state::ready) self->drop(errc::connect_timeout);
  });
  if (!locate_) return resolve(gen);
  locate_([self = shared_from_this(), gen](std::error_code ec, const endpoint& at) {
    if (gen != self->gen_) return;
    if (ec) return self->drop(ec);
    self->cfg_.host = at.host;
    self->cfg_.port = at.port;
    self->resolve(gen);
  });
}

void link::resolve(std::uint64_t gen) {
  resolver_.async_resolve(cfg_.host, std::to_string(cfg_.port),
                          [self = shared_from_this(), gen](
                              std::error_code ec, asio::ip::tcp::resolver::results_type eps) {
                            if (gen != self->gen_) return;
                            if (ec) return self->drop(map_connect_error(ec));
                            auto all = std::make_shared<std::vector<asio::ip::tcp::endpoint>>(
                                eps.begin(), eps.end());
                            self->connect_to(gen, std::move(all), 0, asio::error::host_not_found);
                          });
}

// Tries the resolved endpoints in turn. Each socket is opened close-on-exec here, which asio's
// own open (and asio::async_connect, which reopens per endpoint) does not do: a child that the
// application starts (fork and exec: batch jobs start children) would otherwise keep this
// connection open after this process died — to Redis still a live client, whose subscriber
// would go on hearing grants for waiters that are gone.
void link::connect_to(std::uint64_t gen, std::shared_ptr<std::vector<asio::ip::tcp::endpoint>> eps,
                      std::size_t at, std::error_code last) {
  if (at >= eps->size()) return drop(map_connect_error(last));
  const auto& ep = (*eps)[at];
  auto s = stream_;
  std::error_code ec;
  s->socket().close(ec);
  const int fd = ::socket(ep.protocol().family(), SOCK_STREAM | SOCK_CLOEXEC, IPPROTO_TCP);
  if (fd < 0) return drop(map_connect_error(std::error_code{errno, std::system_category()}));
  s->socket().assign(ep.protocol(), fd, ec);
  if (ec) {
    ::close(fd);
    return drop(map_connect_error(ec));
  }
  s->socket().async_connect(ep, [self = shared_from_this(), gen, s, eps = std::move(eps),
                                 at](std::error_code cec) mutable {
    if (gen != self->gen_) return;
    if (cec) return self->connect_to(gen, std::move(eps), at + 1, cec);
    self->on_connected(gen);
  });
}

void link::on_connected(std::uint64_t gen) {
  std::error_code ignored;
  stream_->socket().set_option(asio::ip::tcp::no_delay{true}, ignored);
  if (!stream_->tls) return send_handshake();
  expect_peer_name(*stream_->tls, cfg_.tls.server_name.empty() ? cfg_.host : cfg_.tls.server_name);
  auto s = stream_;
  s->tls->async_handshake(asio::ssl::stream_base::client,
                          [self = shared_from_this(), gen, s](std::error_code ec) {
                            if (gen != self->gen_) return;
                            if (ec) return self->drop(classify_handshake_error(*s->tls, ec));
                            self->send_handshake();
                          });
}

void link::read(std::uint64_t gen) {
  auto s = stream_;
  s->with([&](auto& st) {
    st.async_read_some(asio::buffer(rbuf_),
                       [self = shared_from_this(), gen, s](std::error_code ec, std::size_t n) {
                         self->on_read(gen, ec, n);
                       });
  });
}

void link::on_read(std::uint64_t gen, std::error_code ec, std::size_t n) {
  if (gen != gen_) return;
  if (ec) return drop(errc::connection_lost);
  last_heard_ = clock::now();
  reader_.feed({rbuf_.data(), n});
  std::error_code perr;
  while (auto r = reader_.next(perr)) {
    if (state_ == state::handshaking) {
      on_handshake_reply(*r);
    } else {
      on_reply(std::move(*r));
    }
    if (gen != gen_) return;  // a hook dropped or stopped the connection
  }
  if (perr) return drop(perr);
  read(gen);
}

void link::want_write() {
  if (state_ != state::ready || writing_) return;
  std::string& out = *wbuf_;
  out.clear();
  fill_write(out);
  if (out.empty()) return;
  writing_ = true;
  ++writes_;
  note_write();
  const auto gen = gen_;
  auto s = stream_;
  auto buf = wbuf_;
  s->with([&](auto& st) {
    asio::async_write(st, asio::buffer(*buf),
                      [self = shared_from_this(), gen, s, buf](std::error_code ec, std::size_t) {
                        self->on_written(gen, ec);
                      });
  });
}

void link::note_write() {
  const endpoint to{cfg_.host, cfg_.port};
  for (auto& [at, when] : last_writes_) {
    if (at == to) {
      when = clock::now();
      return;
    }
  }
  last_writes_.emplace_back(to, clock::now());
}

void link::leave_unless(const endpoint& master) {
  if (state_ == state::stopped || target() == master) return;
  if (state_ == state::idle) {
    // Between attempts: the next one asks the sentinels, now rather than after the backoff.
    retry_timer_.cancel();
    return connect();
  }
  drop(errc::connection_lost);
  if (state_ != state::idle) return;  // on_down stopped it
  retry_timer_.cancel();
  connect();
}

void link::on_written(std::uint64_t gen, std::error_code ec) {
  if (gen != gen_) return;
  writing_ = false;
  if (ec) return drop(errc::connection_lost);
  want_write();
}

void link::arm_health_check() {
  if (cfg_.health_check_interval.count() == 0) return;
  health_timer_.expires_after(cfg_.health_check_interval);
  health_timer_.async_wait([self = shared_from_this(), gen = gen_](std::error_code ec) {
    if (ec || gen != self->gen_ || !self->ready()) return;
    if (clock::now() - self->last_heard_ >= self->cfg_.health_check_interval) self->on_idle();
    if (gen == self->gen_) self->arm_health_check();
  });
}

void link::report_connection(event_type what, std::error_code why) const {
  auto& obs = obs_;
  (what == event_type::reconnected ? obs.reconnects : obs.disconnects)
      .fetch_add(1, std::memory_order_relaxed);
  if (!obs.wants_events()) return;
  const bool v6 = cfg_.host.find(':') != std::string::npos;
  const auto node = (v6 ? "[" + cfg_.host + "]" : cfg_.host) + ":" + std::to_string(cfg_.port);
  std::string message{to_string(what)};
  message += " " + node;
  if (why) message += ": " + why.message();
  event e{what, message};
  e.node = node;
  e.error = why;
  obs.emit(e);
}

void link::drop(std::error_code why) {
  if (state_ == state::stopped) return;
  const bool was_ready = state_ == state::ready;
  // Sentinel mode: a master that could not be reached may be one a sentinel still names after a
  // failover: the sentinels are asked again before the next attempt. (A ROLE refusal has asked.)
  if (locate_ && not_master_ && state_ != state::ready && why != errc::read_only) not_master_();
  // A connection that carried requests may still deliver some: the next one fences it.
  if (state_ == state::ready && identity_) fence_ = std::move(identity_);
  identity_.reset();
  ++gen_;
  close_stream();
  state_ = state::idle;
  last_error_ = why;
  on_down(why);
  // Told once the link is down and its requests answered: what the callback submits waits for
  // the reconnect.
  if (was_ready) report_connection(event_type::disconnected, why);
  if (state_ != state::idle) return;  // on_down stopped us
  if (down_hook_) down_hook_(why);
  retry_timer_.expires_after(backoff_.next());
  retry_timer_.async_wait([self = shared_from_this(), gen = gen_](std::error_code ec) {
    if (!ec && gen == self->gen_ && self->state_ == state::idle) self->connect();
  });
}

}  // namespace dlock::transport
