#include "dlock/config.hpp"

#include <charconv>
#include <limits>
#include <string>
#include <utility>

#include "dlock/error.hpp"

namespace dlock {
namespace {

using namespace std::string_view_literals;

// One year bounds every duration: larger values are typos, and they keep deadline arithmetic
// on steady_clock far from overflow.
constexpr std::chrono::milliseconds max_duration{365ll * 24 * 3'600'000};

bool parse_uint(std::string_view s, std::uint64_t& out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc{} && p == s.data() + s.size();
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool percent_decode(std::string_view in, std::string& out) {
  out.clear();
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out.push_back(in[i]);
      continue;
    }
    if (i + 2 >= in.size()) return false;
    const int hi = hex_value(in[i + 1]), lo = hex_value(in[i + 2]);
    if (hi < 0 || lo < 0) return false;
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return true;
}

// Holds the first failure of a parse: the code and a human-readable reason.
struct parse_state {
  std::error_code& ec;
  std::string& reason;
  bool fail(std::string why) {
    ec = errc::invalid_uri;
    reason = std::move(why);
    return false;
  }
};

// `user:password@` (or `password@`, as redis-cli reads it), percent-decoded into cfg; `auth`
// is left with what follows the `@`.
bool parse_userinfo(std::string_view& auth, config& cfg, parse_state& st) {
  const auto at = auth.rfind('@');
  if (at == std::string_view::npos) return true;
  auto userinfo = auth.substr(0, at);
  auth = auth.substr(at + 1);
  auto colon = userinfo.find(':');
  std::string_view user = userinfo.substr(0, colon);
  std::string_view pass = colon == std::string_view::npos ? ""sv : userinfo.substr(colon + 1);
  if (colon == std::string_view::npos) {
    pass = user;
    user = {};
  }
  if (!percent_decode(user, cfg.username) || !percent_decode(pass, cfg.password)) {
    return st.fail("bad percent-encoding in user or password");
  }
  return true;
}

// `host[:port]`, the host a name, IPv4 or `[IPv6]`; `ep.port` keeps its default without `:port`.
bool parse_endpoint(std::string_view auth, endpoint& ep, parse_state& st) {
  std::string_view host, port;
  if (!auth.empty() && auth.front() == '[') {
    auto close = auth.find(']');
    if (close == std::string_view::npos) return st.fail("unterminated [IPv6] host");
    host = auth.substr(1, close - 1);
    auto rest = auth.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return st.fail("unexpected text after ]");
      port = rest.substr(1);
      if (port.empty()) return st.fail("empty port");
    }
  } else {
    auto colon = auth.find(':');
    host = auth.substr(0, colon);
    if (colon != std::string_view::npos) {
      port = auth.substr(colon + 1);
      if (port.empty()) return st.fail("empty port");
    }
  }
  if (host.empty()) return st.fail("missing host");
  // Caught here rather than as a resolver error later: usually a stray space after a comma.
  for (const char c : host) {
    if (static_cast<unsigned char>(c) <= ' ' || c == '\x7f') {
      return st.fail("host '" + std::string(host) + "' contains a space or control character");
    }
  }
  ep.host = std::string(host);
  if (!port.empty()) {
    std::uint64_t p = 0;
    if (!parse_uint(port, p) || p == 0 || p > 65535) {
      return st.fail("port must be 1..65535, got '" + std::string(port) + "'");
    }
    ep.port = static_cast<std::uint16_t>(p);
  }
  return true;
}

// The seeds of a cluster URI: comma-separated `host[:port]`, none empty. cfg.host and cfg.port
// get the first, so that messages naming "the server" name a real one.
bool parse_nodes(std::string_view list, config& cfg, parse_state& st) {
  if (list.empty()) return st.fail("a cluster URI needs at least one node (host[:port])");
  for (std::size_t n = 1;; ++n) {
    const auto comma = list.find(',');
    const auto item = list.substr(0, comma);
    if (item.empty()) return st.fail("node " + std::to_string(n) + " of the node list is empty");
    endpoint ep;
    if (!parse_endpoint(item, ep, st)) {
      st.reason = "node " + std::to_string(n) + " ('" + std::string(item) + "'): " + st.reason;
      return false;
    }
    cfg.cluster_nodes.push_back(std::move(ep));
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  cfg.host = cfg.cluster_nodes.front().host;
  cfg.port = cfg.cluster_nodes.front().port;
  return true;
}

bool parse_authority(std::string_view auth, bool cluster, config& cfg, parse_state& st) {
  if (!parse_userinfo(auth, cfg, st)) return false;
  if (cluster) return parse_nodes(auth, cfg, st);
  if (auth.find(',') != std::string_view::npos) {
    return st.fail("a list of nodes needs redis+cluster:// or rediss+cluster://");
  }
  endpoint ep;
  if (!parse_endpoint(auth, ep, st)) return false;
  cfg.host = std::move(ep.host);
  cfg.port = ep.port;
  return true;
}

bool set_duration(std::chrono::milliseconds& field, std::string_view key, std::string_view value,
                  bool allow_zero, parse_state& st) {
  std::error_code ec;
  auto d = parse_duration(value, ec);
  if (ec || (!allow_zero && d.count() == 0)) {
    return st.fail("bad duration for '" + std::string(key) + "': '" + std::string(value) + "'");
  }
  field = d;
  return true;
}

bool parse_parameter(std::string_view key, std::string_view raw, config& cfg, parse_state& st) {
  std::string value;
  if (!percent_decode(raw, value))
    return st.fail("bad percent-encoding in parameter " + std::string(key));
  if (key == "connect_timeout") return set_duration(cfg.connect_timeout, key, value, false, st);
  if (key == "timeout") return set_duration(cfg.command_timeout, key, value, false, st);
  if (key == "health_check") return set_duration(cfg.health_check_interval, key, value, true, st);
  if (key == "reconnect_min") return set_duration(cfg.reconnect_min, key, value, false, st);
  if (key == "reconnect_max") return set_duration(cfg.reconnect_max, key, value, false, st);
  if (key == "watchdog") return set_duration(cfg.watchdog_lease, key, value, false, st);
  if (key == "recheck") return set_duration(cfg.wait_recheck, key, value, false, st);
  if (key == "max_name") {
    std::uint64_t n = 0;
    if (!parse_uint(value, n) || n == 0 || n > 65536) return st.fail("max_name must be 1..65536");
    cfg.max_name_length = static_cast<std::size_t>(n);
    return true;
  }
  if (key == "name") {
    cfg.client_name = std::move(value);
    return true;
  }
  if (key == "wait_replicas") {
    std::uint64_t n = 0;
    if (!parse_uint(value, n) || n > 64) return st.fail("wait_replicas must be 0..64");
    cfg.wait_replicas = static_cast<unsigned>(n);
    return true;
  }
  if (key == "wait_timeout") return set_duration(cfg.wait_timeout, key, value, false, st);
  if (key == "on_shortfall") {
    if (value != "fail" && value != "accept") {
      return st.fail("on_shortfall must be fail or accept, got '" + value + "'");
    }
    cfg.on_shortfall =
        value == "fail" ? config::shortfall_policy::fail : config::shortfall_policy::accept;
    return true;
  }
  if (key == "fencing") {
    if (value != "on" && value != "off")
      return st.fail("fencing must be on or off, got '" + value + "'");
    cfg.fencing = value == "on" ? config::fencing_mode::on : config::fencing_mode::off;
    return true;
  }
  std::string* file = key == "ca"     ? &cfg.tls.ca_file
                      : key == "cert" ? &cfg.tls.cert_file
                      : key == "key"  ? &cfg.tls.key_file
                      : key == "sni"  ? &cfg.tls.server_name
                                      : nullptr;
  if (file == nullptr) return st.fail("unknown parameter '" + std::string(key) + "'");
  if (!cfg.tls.enabled) {
    return st.fail("parameter '" + std::string(key) + "' needs rediss:// or rediss+cluster://");
  }
  if (value.empty()) return st.fail("empty value for '" + std::string(key) + "'");
  *file = std::move(value);
  return true;
}

// The schemes: plain or TLS, one server or a cluster's seed nodes.
struct scheme {
  std::string_view prefix;
  bool tls, cluster;
};
constexpr scheme schemes[] = {{"redis://", false, false},
                              {"rediss://", true, false},
                              {"redis+cluster://", false, true},
                              {"rediss+cluster://", true, true}};

bool parse_database(std::string_view path, bool cluster, config& cfg, parse_state& st) {
  if (path.empty()) return true;
  if (cluster && path != "0") {
    return st.fail("Redis Cluster has only database 0, got '/" + std::string(path) + "'");
  }
  std::uint64_t db = 0;
  if (!parse_uint(path, db) || db > static_cast<std::uint64_t>(std::numeric_limits<int>::max())) {
    return st.fail("database index must be a non-negative integer, got '" + std::string(path) +
                   "'");
  }
  cfg.database = static_cast<int>(db);
  return true;
}

bool parse(std::string_view uri, config& cfg, parse_state& st) {
  const scheme* sch = nullptr;
  for (const auto& s : schemes) {
    if (uri.starts_with(s.prefix)) sch = &s;  // no prefix is another's prefix
  }
  if (sch == nullptr) {
    return st.fail("scheme must be redis://, rediss://, redis+cluster:// or rediss+cluster://");
  }
  uri.remove_prefix(sch->prefix.size());
  cfg.tls.enabled = sch->tls;
  std::string_view query;
  if (auto q = uri.find('?'); q != std::string_view::npos) {
    query = uri.substr(q + 1);
    uri = uri.substr(0, q);
  }
  std::string_view path;
  if (auto slash = uri.find('/'); slash != std::string_view::npos) {
    path = uri.substr(slash + 1);
    uri = uri.substr(0, slash);
  }
  if (!parse_authority(uri, sch->cluster, cfg, st)) return false;
  if (!parse_database(path, sch->cluster, cfg, st)) return false;
  while (!query.empty()) {
    auto amp = query.find('&');
    auto item = query.substr(0, amp);
    query = amp == std::string_view::npos ? ""sv : query.substr(amp + 1);
    if (item.empty()) continue;
    auto eq = item.find('=');
    if (eq == std::string_view::npos)
      return st.fail("parameter '" + std::string(item) + "' has no value");
    if (!parse_parameter(item.substr(0, eq), item.substr(eq + 1), cfg, st)) return false;
  }
  std::error_code vec;
  std::string why;
  if ((vec = cfg.validate(why))) return st.fail(why);
  return true;
}

// What is wrong with where the client connects, or empty. In cluster mode host and port are
// unused (a URI sets them to the first seed) and only the seeds are checked.
std::string address_problem(const config& c) {
  if (!c.cluster()) {
    if (c.host.empty()) return "missing host";
    if (c.port == 0) return "port must be 1..65535";
    return {};
  }
  for (std::size_t i = 0; i < c.cluster_nodes.size(); ++i) {
    const auto& n = c.cluster_nodes[i];
    const auto which = "cluster node " + std::to_string(i + 1);
    if (n.host.empty()) return which + ": missing host";
    if (n.port == 0) return which + " (" + n.host + "): port must be 1..65535";
  }
  if (c.database != 0) return "Redis Cluster has only database 0";
  return {};
}

}  // namespace

std::chrono::milliseconds parse_duration(std::string_view text, std::error_code& ec) {
  ec.clear();
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  std::uint64_t n = 0;
  if (digits == 0 || !parse_uint(text.substr(0, digits), n)) {
    ec = errc::invalid_argument;
    return {};
  }
  const auto unit = text.substr(digits);
  std::uint64_t scale = 0;
  if (unit.empty() || unit == "ms")
    scale = 1;
  else if (unit == "s")
    scale = 1000;
  else if (unit == "m" || unit == "min")
    scale = 60'000;
  else if (unit == "h")
    scale = 3'600'000;
  const auto max_ms = static_cast<std::uint64_t>(max_duration.count());
  if (scale == 0 || n > max_ms / scale) {
    ec = errc::invalid_argument;
    return {};
  }
  return std::chrono::milliseconds{static_cast<std::int64_t>(n * scale)};
}

std::error_code config::validate(std::string& reason) const {
  auto bad = [&](std::string why) {
    reason = std::move(why);
    return make_error_code(errc::invalid_uri);
  };
  if (auto why = address_problem(*this); !why.empty()) return bad(std::move(why));
  if (database < 0) return bad("database index must be non-negative");
  if (connect_timeout.count() <= 0) return bad("connect_timeout must be positive");
  if (command_timeout.count() <= 0) return bad("timeout must be positive");
  if (health_check_interval.count() < 0) return bad("health_check must not be negative");
  if (reconnect_min.count() <= 0 || reconnect_max < reconnect_min) {
    return bad("reconnect_min must be positive and not above reconnect_max");
  }
  if (watchdog_lease.count() < 30) return bad("watchdog lease must be at least 30ms");
  if (wait_recheck.count() <= 0) return bad("recheck must be positive");
  // What a URI could not say (parse_duration stops at a year): kept there for struct configs too.
  if (watchdog_lease > max_duration || wait_recheck > max_duration || wait_timeout > max_duration ||
      command_timeout > max_duration || connect_timeout > max_duration ||
      health_check_interval > max_duration || reconnect_max > max_duration) {
    return bad("durations must be at most a year");
  }
  if (max_name_length == 0) return bad("max_name must be positive");
  if (wait_timeout.count() <= 0) return bad("wait_timeout must be positive");
  for (char c : client_name) {
    if (c <= ' ' || c > '~') return bad("client name must be printable ASCII without spaces");
  }
  if (!password.empty() || username.empty()) return {};
  return bad("a user name needs a password");
}

config config::from_uri(std::string_view uri, std::error_code& ec, std::string& reason) {
  ec.clear();
  reason.clear();
  config cfg;
  parse_state st{ec, reason};
  if (!parse(uri, cfg, st)) return config{};
  return cfg;
}

config config::from_uri(std::string_view uri, std::error_code& ec) {
  std::string reason;
  return from_uri(uri, ec, reason);
}

config config::from_uri(std::string_view uri) {
  std::error_code ec;
  std::string reason;
  auto cfg = from_uri(uri, ec, reason);
  if (ec) throw lock_error(ec, reason);
  return cfg;
}

}  // namespace dlock
