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
#include "transport/tls.hpp"

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

std::size_t append_handshake(std::string& out, const config& cfg, std::string_view client_name) {
  std::size_t n = 0;
  if (!cfg.password.empty()) {
    if (cfg.username.empty()) {
      resp::append_command(out, {"AUTH", cfg.password});
    } else {
      resp::append_command(out, {"AUTH", cfg.username, cfg.password});
    }
    ++n;
  }
  if (cfg.database != 0) {
    resp::append_command(out, {"SELECT", std::to_string(cfg.database)});
    ++n;
  }
  if (!client_name.empty()) {
    resp::append_command(out, {"CLIENT", "SETNAME", client_name});
    ++n;
  }
  return n;
}

std::optional<client_identity> parse_client_info(const reply& r) {
  if (!r.is_string()) return std::nullopt;
  const std::string_view text = r.str();
  auto field = [&](std::string_view key) -> std::string {
    for (std::size_t at = 0; at < text.size();) {
      const auto end = std::min(text.find_first_of(" \r\n", at), text.size());
      const auto word = text.substr(at, end - at);
      if (word.size() > key.size() && word.substr(0, key.size()) == key &&
          word[key.size()] == '=') {
        return std::string{word.substr(key.size() + 1)};
      }
      at = end + 1;
    }
    return {};
  };
  client_identity who{field("id"), field("addr"), field("laddr")};
  if (who.id.empty() || who.addr.empty() || who.laddr.empty() ||
      who.id.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  return who;
}

// AUTH, SELECT and CLIENT SETNAME go out in one write — with the fence of the connection before
// and CLIENT INFO, where this link fences; user traffic waits for their replies.
void link::send_handshake() {
  state_ = state::handshaking;
  std::string& out = *wbuf_;
  out.clear();
  const auto required = append_handshake(out, cfg_, cfg_.client_name);
  handshake_.assign(required, handshake_reply::required);
  handshake_at_ = 0;
  identity_.reset();
  if (fences_old_connections()) {
    if (fence_) {
      resp::append_command(out, {"CLIENT", "KILL", "ID", fence_->id, "ADDR", fence_->addr, "LADDR",
                                 fence_->laddr, "SKIPME", "yes"});
      handshake_.push_back(handshake_reply::fence);
    }
    resp::append_command(out, {"CLIENT", "INFO"});
    handshake_.push_back(handshake_reply::identify);
  }
  if (locate_) {
    resp::append_command(out, {"ROLE"});
    handshake_.push_back(handshake_reply::role);
  } else if (required == 0) {
    // Still prove the server answers (and takes our commands: NOAUTH) before calling it ready.
    resp::append_command(out, {"PING"});
    handshake_.push_back(handshake_reply::required);
  }
  writing_ = true;
  const auto gen = gen_;
  auto s = stream_;
  auto buf = wbuf_;
  s->with([&](auto& st) {
    asio::async_write(st, asio::buffer(*buf),
                      [self = shared_from_this(), gen, s, buf](std::error_code ec, std::size_t) {
                        self->on_written(gen, ec);
                      });
  });
  read(gen);
}

void link::on_handshake_reply(const reply& r) {
  const auto kind =
      handshake_at_ < handshake_.size() ? handshake_[handshake_at_] : handshake_reply::required;
  ++handshake_at_;
  if (kind == handshake_reply::role && !r.is_error()) {
    // A replica (a demoted master, or one the sentinels have not yet promoted) gets nothing.
    const bool master = r.is_array() && !r.elements().empty() && r.elements().front().is_string() &&
                        r.elements().front().str() == "master";
    if (!master) {
      if (not_master_) not_master_();
      return drop(errc::read_only);
    }
  } else if (kind == handshake_reply::role) {
    // ROLE refused (an ACL user without it): the sentinels' word has to do.
  } else if (kind != handshake_reply::required && r.is_error()) {
    const auto code = classify_error_reply(r.str());
    // Transient (BUSY with a script running, LOADING): the old connection may still deliver
    // once it passes, so try again on a new connection — nothing has gone out on this one.
    if (is_retryable(code)) return drop(code);
    // For good (no right; an unknown subcommand before 6.2): nothing more can be done. Anything
    // else (NOAUTH) keeps the fence: the reply that must succeed fails the handshake.
    if (code == errc::no_permission || code == errc::server_error) {
      if (kind == handshake_reply::fence) fence_.reset();
      on_unfenced(std::string{kind == handshake_reply::fence ? "CLIENT KILL" : "CLIENT INFO"} +
                  " refused: " + r.str());
    }
  } else if (kind == handshake_reply::fence) {
    fence_.reset();  // killed (:1), or gone already (:0)
  } else if (kind == handshake_reply::identify) {
    identity_ = parse_client_info(r);
    if (!identity_) on_unfenced("CLIENT INFO answered without id, addr and laddr");
  } else if (r.is_error()) {
    auto code = classify_error_reply(r.str());
    // An AUTH refusal that is not WRONGPASS (e.g. "ERR AUTH <password> called without any
    // password configured") is still an authentication failure to the user.
    if (code == errc::server_error && r.str().find("AUTH") != std::string::npos) {
      code = errc::auth_failed;
    }
    return drop(code);
  }
  if (handshake_at_ < handshake_.size()) return;
  state_ = state::ready;
  connect_timer_.cancel();
  backoff_.reset();
  last_error_.clear();
  ++connects_;
  {
    std::error_code ignored;
    auto ep = stream_->socket().remote_endpoint(ignored);
    std::lock_guard lock{peer_mu_};
    if (!ignored) peer_.emplace(ep, connects_.load());
  }
  up_ = true;
  arm_health_check();
  on_ready();
  want_write();
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

void link::drop(std::error_code why) {
  if (state_ == state::stopped) return;
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
  if (state_ != state::idle) return;  // on_down stopped us
  if (down_hook_) down_hook_(why);
  retry_timer_.expires_after(backoff_.next());
  retry_timer_.async_wait([self = shared_from_this(), gen = gen_](std::error_code ec) {
    if (!ec && gen == self->gen_ && self->state_ == state::idle) self->connect();
  });
}

}  // namespace dlock::transport
