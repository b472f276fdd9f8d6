#include "dlock/config.hpp"

#include <charconv>
#include <limits>
#include <string>
#include <utility>

#include "config_text.hpp"
#include "dlock/error.hpp"

namespace dlock {
namespace {

using namespace std::string_view_literals;
using namespace detail::uri;

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

// A node list: comma-separated `host[:port]` (without a port: `default_port`), none empty.
bool parse_nodes(std::string_view list, std::vector<endpoint>& out, std::uint16_t default_port,
                 parse_state& st) {
  for (std::size_t n = 1;; ++n) {
    const auto comma = list.find(',');
    const auto item = list.substr(0, comma);
    if (item.empty()) return st.fail("node " + std::to_string(n) + " of the node list is empty");
    endpoint ep;
    ep.port = default_port;
    if (!parse_endpoint(item, ep, st)) {
      st.reason = "node " + std::to_string(n) + " ('" + std::string(item) + "'): " + st.reason;
      return false;
    }
    out.push_back(std::move(ep));
    if (comma == std::string_view::npos) return true;
    list.remove_prefix(comma + 1);
  }
}

// The schemes: plain or TLS; one server, a cluster's seed nodes, or the sentinels of a master.
enum class kind { single, cluster, sentinel };
struct scheme {
  std::string_view prefix;
  bool tls;
  kind what;
};
constexpr scheme schemes[] = {{"redis://", false, kind::single},
                              {"rediss://", true, kind::single},
                              {"redis+cluster://", false, kind::cluster},
                              {"rediss+cluster://", true, kind::cluster},
                              {"redis+sentinel://", false, kind::sentinel},
                              {"rediss+sentinel://", true, kind::sentinel}};

// cfg.host and cfg.port get the first node of a list, so that messages naming "the server"
// name a real one.
bool parse_authority(std::string_view auth, kind what, config& cfg, parse_state& st) {
  if (!parse_userinfo(auth, cfg, st)) return false;
  if (what != kind::single) {
    if (auth.empty()) {
      return st.fail(what == kind::cluster ? "a cluster URI needs at least one node (host[:port])"
                                           : "a sentinel URI needs at least one sentinel");
    }
    auto& list = what == kind::cluster ? cfg.cluster_nodes : cfg.sentinel_nodes;
    if (!parse_nodes(auth, list, what == kind::cluster ? 6379 : 26379, st)) return false;
    cfg.host = list.front().host;
    cfg.port = list.front().port;
    return true;
  }
  if (auth.find(',') != std::string_view::npos) {
    return st.fail("a list of nodes needs redis+cluster:// or redis+sentinel://");
  }
  endpoint ep;
  if (!parse_endpoint(auth, ep, st)) return false;
  cfg.host = std::move(ep.host);
  cfg.port = ep.port;
  return true;
}

// The path: `/db`, or in sentinel mode `/master-name[/db]`.
bool parse_database(std::string_view path, kind what, config& cfg, parse_state& st) {
  if (what == kind::sentinel) {
    const auto slash = path.find('/');
    if (!percent_decode(path.substr(0, slash), cfg.sentinel_master)) {
      return st.fail("bad percent-encoding in the master name");
    }
    if (cfg.sentinel_master.empty()) return st.fail("a sentinel URI needs /master-name");
    path = slash == std::string_view::npos ? std::string_view{} : path.substr(slash + 1);
  }
  if (path.empty()) return true;
  if (what == kind::cluster && path != "0") {
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
    return st.fail(
        "scheme must be redis://, rediss://, redis+cluster://, rediss+cluster://, "
        "redis+sentinel:// or rediss+sentinel://");
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
  if (!parse_authority(uri, sch->what, cfg, st)) return false;
  if (!parse_database(path, sch->what, cfg, st)) return false;
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
  if (!cfg.sentinel() && (!cfg.sentinel_user.empty() || !cfg.sentinel_password.empty())) {
    return st.fail("sentinel_user and sentinel_password need redis+sentinel://");
  }
  std::error_code vec;
  std::string why;
  if ((vec = cfg.validate(why))) return st.fail(why);
  return true;
}

std::string nodes_problem(const std::vector<endpoint>& nodes, std::string_view what) {
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const auto& n = nodes[i];
    const auto which = std::string(what) + " " + std::to_string(i + 1);
    if (n.host.empty()) return which + ": missing host";
    if (n.port == 0) return which + " (" + n.host + "): port must be 1..65535";
  }
  return {};
}

// What is wrong with where the client connects, or empty. In cluster and sentinel mode host
// and port are unused (a URI sets them to the first node) and only the node lists are checked.
std::string address_problem(const config& c) {
  if (c.cluster() && c.sentinel()) return "cluster_nodes and sentinel_nodes exclude each other";
  if (c.sentinel()) {
    if (c.sentinel_master.empty()) return "sentinel mode needs the master's name";
    if (!c.sentinel_user.empty() && c.sentinel_password.empty()) {
      return "a sentinel user name needs a sentinel password";
    }
    return nodes_problem(c.sentinel_nodes, "sentinel");
  }
  if (!c.cluster()) {
    if (c.host.empty()) return "missing host";
    if (c.port == 0) return "port must be 1..65535";
    return {};
  }
  if (auto why = nodes_problem(c.cluster_nodes, "cluster node"); !why.empty()) return why;
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
  if (wait_replicas > 64 && wait_replicas != online_replicas) {
    return bad("wait_replicas must be 0..64 or auto");
  }
  // A renewal's WAIT holds up every later command of the client: it must end well before the
  // renewals that follow are due.
  if (wait_replicas > 0 && wait_timeout * 3 >= watchdog_lease) {
    return bad("wait_timeout must be under a third of the watchdog lease");
  }
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
