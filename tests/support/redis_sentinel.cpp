// sentinel_group (redis_sentinel.hpp): starting the data nodes and the sentinels, their
// configuration, and the accessors. The waits and failovers are in redis_sentinel_ops.cpp.
#include "support/redis_sentinel.hpp"

#include <algorithm>
#include <cctype>
#include <stdexcept>

namespace dlock::test {
namespace {

// Percent-encodes what may not stand in a URI's userinfo or query value.
std::string uri_escape(const std::string& s) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) != 0 || ch == '-' || ch == '_' || ch == '.' || ch == '~') {
      out += ch;
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 0xF];
    }
  }
  return out;
}

void check_options(const sentinel_group_options& o) {
  if (o.sentinels == 0) throw std::invalid_argument("sentinel_group: needs a sentinel");
  if (!o.data_username.empty() && o.data_password.empty()) {
    throw std::invalid_argument("sentinel_group: data_username needs data_password");
  }
  if (!o.sentinel_username.empty() && o.sentinel_password.empty()) {
    throw std::invalid_argument("sentinel_group: sentinel_username needs sentinel_password");
  }
  for (const auto i : o.proxied_sentinels) {
    if (i >= o.sentinels) throw std::invalid_argument("sentinel_group: no such sentinel to proxy");
  }
}

}  // namespace

sentinel_group::sentinel_group() : sentinel_group(sentinel_group_options{}) {}

sentinel_group::sentinel_group(sentinel_group_options opts) : opts_{std::move(opts)} {
  check_options(opts_);
  data_.push_back(std::make_unique<redis_server>(data_options()));
  std::uint16_t upstream = data_.front()->port();
  if (opts_.proxied_replication) {
    replication_proxy_ = std::make_unique<tcp_proxy>(upstream);
    upstream = replication_proxy_->port();
  }
  for (std::size_t r = 0; r < opts_.replicas; ++r) {
    auto o = data_options();
    o.extra_args.insert(o.extra_args.end(), {"--replicaof", "127.0.0.1", std::to_string(upstream)});
    data_.push_back(std::make_unique<redis_server>(std::move(o)));
  }
  // Sentinels read the master's replica list every 10 s until they see a failover: start them
  // once the replicas are listed, or discovery takes that long.
  wait_replicas_online(opts_.replicas, opts_.ready_timeout);
  for (std::size_t i = 0; i < opts_.sentinels; ++i) start_sentinel(i);
  wait_ready();
}

sentinel_group::~sentinel_group() {
  for (auto& s : sentinels_) {
    if (s.server) s.server->kill9();
  }
  for (auto& d : data_) d->kill9();
}

redis_server_options sentinel_group::data_options() const {
  redis_server_options o;
  o.extra_args = {"--repl-diskless-sync-delay", "0"};
  if (!opts_.data_username.empty()) {
    o.acl_file_contents = "user default off\nuser " + opts_.data_username + " on >" +
                          opts_.data_password + " ~* &* +@all\n";
    o.admin_username = opts_.data_username;
    o.admin_password = opts_.data_password;
    o.extra_args.insert(o.extra_args.end(), {"--masteruser", opts_.data_username});
  } else if (!opts_.data_password.empty()) {
    o.requirepass = opts_.data_password;
  }
  // Every node, the master too: after a failover it may become a replica.
  if (!opts_.data_password.empty()) {
    o.extra_args.insert(o.extra_args.end(), {"--masterauth", opts_.data_password});
  }
  o.extra_args.insert(o.extra_args.end(), opts_.data_extra_args.begin(),
                      opts_.data_extra_args.end());
  return o;
}

redis_server_options sentinel_group::sentinel_options(std::uint16_t own_port,
                                                      std::uint16_t announced_port) const {
  const auto& name = opts_.master_name;
  const auto monitored = replication_proxy_ ? replication_proxy_->port() : data_.front()->port();
  redis_server_options o;
  o.sentinel = true;
  o.port = own_port;
  o.config_lines = {
      "sentinel resolve-hostnames no",
      "sentinel monitor " + name + " 127.0.0.1 " + std::to_string(monitored) + " " +
          std::to_string(quorum()),
      "sentinel down-after-milliseconds " + name + " " + std::to_string(opts_.down_after.count()),
      "sentinel failover-timeout " + name + " " + std::to_string(opts_.failover_timeout.count()),
      "sentinel parallel-syncs " + name + " 1"};
  auto& lines = o.config_lines;
  if (!opts_.data_username.empty()) {
    lines.push_back("sentinel auth-user " + name + " " + opts_.data_username);
  }
  if (!opts_.data_password.empty()) {
    lines.push_back("sentinel auth-pass " + name + " " + opts_.data_password);
  }
  if (announced_port != 0) {
    lines.push_back("sentinel announce-ip 127.0.0.1");
    lines.push_back("sentinel announce-port " + std::to_string(announced_port));
  }
  if (!opts_.sentinel_username.empty()) {
    lines.push_back("user default off");
    lines.push_back("user " + opts_.sentinel_username + " on >" + opts_.sentinel_password +
                    " ~* &* +@all");
    lines.push_back("sentinel sentinel-user " + opts_.sentinel_username);
    o.admin_username = opts_.sentinel_username;
    o.admin_password = opts_.sentinel_password;
  } else if (!opts_.sentinel_password.empty()) {
    o.requirepass = opts_.sentinel_password;
  }
  if (!opts_.sentinel_password.empty()) {
    lines.push_back("sentinel sentinel-pass " + opts_.sentinel_password);
  }
  lines.insert(lines.end(), opts_.sentinel_config_lines.begin(), opts_.sentinel_config_lines.end());
  return o;
}

void sentinel_group::start_sentinel(std::size_t i) {
  const bool proxied = std::find(opts_.proxied_sentinels.begin(), opts_.proxied_sentinels.end(),
                                 i) != opts_.proxied_sentinels.end();
  sentinel_member m;
  std::uint16_t own = 0;
  if (proxied) {
    // The announced port goes into the configuration, so the proxy comes first, aimed at a
    // port picked now (redis_server retries it while another process holds it).
    own = free_port();
    m.proxy = std::make_unique<tcp_proxy>(own);
  }
  m.server = std::make_unique<redis_server>(sentinel_options(own, m.proxy ? m.proxy->port() : 0));
  sentinels_.push_back(std::move(m));
}

std::string sentinel_group::url(const std::string& params) const {
  std::string u = "redis+sentinel://";
  if (!opts_.data_password.empty()) {
    u += uri_escape(opts_.data_username) + ":" + uri_escape(opts_.data_password) + "@";
  }
  for (std::size_t i = 0; i < sentinels_.size(); ++i) {
    u += (i > 0 ? ",127.0.0.1:" : "127.0.0.1:") + std::to_string(sentinel_port(i));
  }
  u += "/" + uri_escape(opts_.master_name);
  std::vector<std::string> query;
  if (!opts_.sentinel_username.empty()) {
    query.push_back("sentinel_user=" + uri_escape(opts_.sentinel_username));
  }
  if (!opts_.sentinel_password.empty()) {
    query.push_back("sentinel_password=" + uri_escape(opts_.sentinel_password));
  }
  if (!params.empty()) query.push_back(params);
  for (std::size_t k = 0; k < query.size(); ++k) u += (k == 0 ? "?" : "&") + query[k];
  return u;
}

redis_server& sentinel_group::node(std::uint16_t port) const {
  if (replication_proxy_ && port == replication_proxy_->port()) {
    port = replication_proxy_->target_port();
  }
  for (const auto& d : data_) {
    if (d->port() == port) return *d;
  }
  throw std::runtime_error("sentinel_group: no data node on port " + std::to_string(port));
}

std::uint16_t sentinel_group::sentinel_port(std::size_t i) const {
  const auto& m = sentinels_.at(i);
  return m.proxy ? m.proxy->port() : m.server->port();
}

tcp_proxy& sentinel_group::sentinel_proxy(std::size_t i) const {
  const auto& m = sentinels_.at(i);
  if (!m.proxy) {
    throw std::runtime_error("sentinel_group: sentinel " + std::to_string(i) + " is not proxied");
  }
  return *m.proxy;
}

tcp_proxy& sentinel_group::replication_proxy() const {
  if (!replication_proxy_) throw std::runtime_error("sentinel_group: replication is not proxied");
  return *replication_proxy_;
}

std::vector<std::size_t> sentinel_group::live_sentinels() const {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < sentinels_.size(); ++i) {
    if (sentinel(i).running() && !sentinel(i).paused()) out.push_back(i);
  }
  return out;
}

std::size_t sentinel_group::live_data_nodes() const {
  return static_cast<std::size_t>(std::count_if(
      data_.begin(), data_.end(), [](const auto& d) { return d->running() && !d->paused(); }));
}

std::vector<std::string> sentinel_group::sentinel_cmd(const std::string& sub) const {
  return {"SENTINEL", sub, opts_.master_name};
}

sentinel_entry sentinel_group::master_entry(std::size_t i) const {
  const auto entries = parse_sentinel_entries(sentinel(i).command(sentinel_cmd("MASTER")), true);
  return entries.at(0);
}

std::vector<sentinel_entry> sentinel_group::replica_entries(std::size_t i) const {
  return parse_sentinel_entries(sentinel(i).command(sentinel_cmd("REPLICAS")));
}

std::vector<sentinel_entry> sentinel_group::sentinel_entries(std::size_t i) const {
  return parse_sentinel_entries(sentinel(i).command(sentinel_cmd("SENTINELS")));
}

}  // namespace dlock::test
