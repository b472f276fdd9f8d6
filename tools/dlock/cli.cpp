#include "cli.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <stdexcept>

namespace dlock_cli {

namespace {
std::string percent_encode(const std::string& s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (const char c : s) {
    const auto ch = static_cast<unsigned char>(c);
    if (std::isalnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == '~' || ch == '/') {
      out.push_back(static_cast<char>(ch));
    } else {
      out.push_back('%');
      out.push_back(hex[ch >> 4]);
      out.push_back(hex[ch & 15]);
    }
  }
  return out;
}
}  // namespace

dlock::config make_config(const global_options& g) {
  std::string url = g.url;
  if (url.empty()) {
    const char* env = std::getenv("DLOCK_URL");
    url = env && *env ? env : "redis://127.0.0.1:6379";
  }
  // Options are appended as URI parameters, so they are checked exactly like the URI's own.
  std::string extra;
  auto add = [&](const char* key, const std::string& value) {
    if (value.empty()) return;
    extra += extra.empty() && url.find('?') == std::string::npos ? '?' : '&';
    extra += key;
    extra += '=';
    extra += percent_encode(value);
  };
  add("ca", g.ca);
  add("cert", g.cert);
  add("key", g.key);
  add("sni", g.sni);
  add("timeout", g.timeout);
  auto cfg = dlock::config::from_uri(url + extra);
  if (!g.user.empty()) cfg.username = g.user;
  if (!g.password.empty()) cfg.password = g.password;
  cfg.client_name = "dlock-cli";
  std::string reason;
  if (auto ec = cfg.validate(reason)) throw dlock::lock_error(ec, reason);
  return cfg;
}

std::chrono::milliseconds duration_arg(const std::string& text, const char* what) {
  std::error_code ec;
  auto d = dlock::parse_duration(text, ec);
  if (ec) {
    throw std::invalid_argument(std::string("bad duration for ") + what + ": '" + text +
                                "' (use e.g. 250ms, 30s, 2m)");
  }
  return d;
}

int exit_code_for(std::error_code ec) {
  using dlock::errc;
  // Misuse of a name, as much as bad input: a key of another type, a lock of another kind.
  if (ec == errc::invalid_argument || ec == errc::invalid_uri || ec == errc::wrong_type ||
      ec == errc::wrong_kind || ec == errc::upgrade_refused) {
    return exit_usage;
  }
  if (ec == errc::timeout) return exit_tempfail;
  if (ec == errc::lease_lost) return exit_software;
  return exit_unavailable;  // connection, auth, TLS, permission, server state
}

bool check_exec_args(const exec_options& o, const dlock::config& cfg, exec_args& a) {
  std::optional<std::chrono::milliseconds> kill_after;
  try {
    if (o.wait) a.wait = duration_arg(*o.wait, "--wait");
    if (o.lease) a.lease_time = duration_arg(*o.lease, "--lease");
    if (o.kill_after) kill_after = duration_arg(*o.kill_after, "--kill-after");
  } catch (const std::invalid_argument& e) {
    complain("exec", e.what());
    return false;
  }
  if (o.permits) {
    const auto n = count_arg(*o.permits, "exec: --permits");
    if (!n) return false;
    a.permits = *n;
  }
  std::string error;
  if (int(o.fair) + int(o.shared) + int(o.rw) > 1) {
    error = "--fair, --shared and --rw choose the kind of lock: give one of them at most";
  } else if (a.permits > 0 && (o.fair || o.shared || o.rw)) {
    error = "--permits takes a permit of a semaphore, not a lock: leave out --fair, --shared, --rw";
  } else if (o.names.empty() ||
             std::ranges::any_of(o.names, [](const auto& n) { return n.empty(); })) {
    error = "the lock name must not be empty";
  } else if (a.lease_time && a.lease_time->count() == 0) {
    error = "--lease must be positive";
  } else {
    a.lease = a.lease_time.value_or(cfg.watchdog_lease);
    auto chosen = choose_timing(a.lease, kill_after, a.lease_time.has_value());
    a.timing = chosen.timing;
    error = std::move(chosen.error);
  }
  if (!error.empty()) complain("exec", error);
  a.kind = o.fair     ? lock_kind::fair
           : o.shared ? lock_kind::read
           : o.rw     ? lock_kind::write
                      : lock_kind::mutex;
  return error.empty();
}

std::optional<std::int64_t> count_arg(const std::string& text, const char* what, std::int64_t max) {
  std::int64_t n = 0;
  const auto* end = text.data() + text.size();
  const auto [at, err] = std::from_chars(text.data(), end, n);
  if (text.empty() || err != std::errc{} || at != end || n < 1 || n > max) {
    complain(what,
             "'" + text + "' is not a count: give a whole number from 1 to " + std::to_string(max));
    return std::nullopt;
  }
  return n;
}

std::string kind_text(lock_kind kind) {
  switch (kind) {
    case lock_kind::fair:
      return "fair lock";
    case lock_kind::read:
      return "read hold of a read-write lock";
    case lock_kind::write:
      return "write hold of a read-write lock";
    case lock_kind::mutex:
      break;
  }
  return "lock";
}

chosen_lock::chosen_lock(dlock::client& c, const std::string& name, lock_kind kind) {
  switch (kind) {
    case lock_kind::mutex:
      side_ = &lock_.emplace<dlock::mutex>(c, name);
      break;
    case lock_kind::fair:
      side_ = &lock_.emplace<dlock::fair_mutex>(c, name);
      break;
    case lock_kind::read:
      side_ = &lock_.emplace<dlock::shared_mutex>(c, name).read_side();
      break;
    case lock_kind::write:
      side_ = &lock_.emplace<dlock::shared_mutex>(c, name).write_side();
      break;
  }
}

void complain(const std::string& what, const std::string& message) {
  std::fprintf(stderr, "dlock: %s: %s\n", what.c_str(), message.c_str());
}

void complain(const std::string& what, std::error_code ec) { complain(what, ec.message()); }

void verbose(const global_options& g, const std::string& line) {
  if (g.verbose) std::fprintf(stderr, "dlock: %s\n", line.c_str());
}

std::string ms_text(std::chrono::milliseconds d) { return std::to_string(d.count()) + " ms"; }

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    const auto ch = static_cast<unsigned char>(c);
    switch (ch) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (ch < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", ch);
          out += buf;
        } else {
          out.push_back(static_cast<char>(ch));
        }
    }
  }
  return out + "\"";
}

std::string iso_time(std::int64_t unix_ms) {
  const std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  char out[48];
  std::snprintf(out, sizeof out, "%s.%03dZ", buf, static_cast<int>(unix_ms % 1000));
  return out;
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) {
    if (!out.empty()) out += ' ';
    out += s;
  }
  return out;
}

}  // namespace dlock_cli
