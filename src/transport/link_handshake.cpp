// A link's handshake (link.hpp): AUTH, SELECT, CLIENT SETNAME, the fence of the connection
// before and CLIENT INFO, ROLE in sentinel mode, and what their replies decide.
#include <asio/write.hpp>

#include "dlock/error.hpp"
#include "resp/encoder.hpp"
#include "runtime/observer.hpp"
#include "transport/link.hpp"
#include "transport/link_stream.hpp"

namespace dlock::transport {

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
  if (connects_ > 1) report_connection(event_type::reconnected, {});
  arm_health_check();
  on_ready();
  want_write();
}

}  // namespace dlock::transport
