#include "dlock/error.hpp"

#include <array>

namespace dlock {
namespace {

class category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "dlock"; }

  std::string message(int ev) const override {
    switch (static_cast<errc>(ev)) {
      case errc::not_owner:
        return "the lock is not held by this owner";
      case errc::lease_lost:
        return "the lease was lost";
      case errc::timeout:
        return "operation timed out";
      case errc::would_deadlock:
        return "blocking call on the client's I/O thread would deadlock";
      case errc::shutdown:
        return "the client was shut down";
      case errc::invalid_argument:
        return "invalid argument";
      case errc::invalid_uri:
        return "invalid connection URI or configuration";
      case errc::resolve_failed:
        return "host name could not be resolved";
      case errc::connection_refused:
        return "connection refused";
      case errc::connect_timeout:
        return "could not connect within the connect timeout";
      case errc::connection_lost:
        return "connection lost with the request's outcome unknown";
      case errc::tls_handshake_failed:
        return "TLS handshake failed";
      case errc::tls_verify_failed:
        return "TLS certificate verification failed";
      case errc::tls_host_mismatch:
        return "TLS certificate does not match the host name";
      case errc::tls_config_invalid:
        return "TLS CA, certificate or key file could not be loaded";
      case errc::auth_failed:
        return "authentication failed (wrong user name or password)";
      case errc::no_auth:
        return "authentication required (NOAUTH)";
      case errc::no_permission:
        return "ACL user lacks permission (NOPERM)";
      case errc::protocol_error:
        return "RESP protocol error";
      case errc::moved:
        return "MOVED: key served by another cluster node";
      case errc::ask:
        return "ASK: key being migrated to another cluster node";
      case errc::try_again:
        return "TRYAGAIN: slot being resharded";
      case errc::cross_slot:
        return "CROSSSLOT: keys hash to different slots";
      case errc::cluster_down:
        return "CLUSTERDOWN: the cluster is down";
      case errc::loading:
        return "LOADING: Redis is loading the dataset";
      case errc::busy:
        return "BUSY: Redis is running a script";
      case errc::unkillable:
        return "UNKILLABLE: a script that wrote cannot be killed";
      case errc::master_down:
        return "MASTERDOWN: replica has lost its master";
      case errc::no_replicas:
        return "NOREPLICAS: not enough good replicas to write";
      case errc::read_only:
        return "READONLY: write against a read-only replica";
      case errc::out_of_memory:
        return "OOM: Redis is out of memory (maxmemory)";
      case errc::no_script:
        return "NOSCRIPT: script not loaded";
      case errc::wrong_type:
        return "WRONGTYPE: the key holds another kind of value";
      case errc::max_clients:
        return "Redis reached its maximum number of clients";
      case errc::server_error:
        return "Redis error reply";
      case errc::unsupported_server:
        return "the server cannot serve this configuration (Redis Cluster mode needs Redis >= "
               "7.0 with cluster-enabled yes)";
      case errc::unknown_master:
        return "no sentinel knows a master of that name (config::sentinel_master)";
      case errc::wrong_kind:
        return "the name is used as another kind of lock (a read-write lock and a mutex on one "
               "name)";
      case errc::upgrade_refused:
        return "a read hold cannot be upgraded to a write hold: release the read holds first";
    }
    return "unknown dlock error";
  }
};

}  // namespace

const std::error_category& error_category() noexcept {
  static const category instance;
  return instance;
}

bool is_retryable(std::error_code ec) noexcept {
  if (ec.category() != error_category()) return false;
  switch (static_cast<errc>(ec.value())) {
    case errc::timeout:
    case errc::resolve_failed:
    case errc::connection_refused:
    case errc::connect_timeout:
    case errc::connection_lost:
    case errc::moved:
    case errc::ask:
    case errc::try_again:
    case errc::cluster_down:
    case errc::loading:
    case errc::busy:
    case errc::master_down:
    case errc::no_replicas:
    case errc::read_only:
    case errc::no_script:
    case errc::max_clients:
      return true;
    default:
      return false;
  }
}

errc classify_error_reply(std::string_view text) noexcept {
  struct prefix {
    std::string_view word;
    errc code;
  };
  // The first word of an error reply is its code (Redis convention); "ERR" carries the generic
  // errors, of which only "max number of clients reached" is transient.
  static constexpr std::array<prefix, 20> table{{
      {"MOVED", errc::moved},
      {"ASK", errc::ask},
      {"TRYAGAIN", errc::try_again},
      {"CROSSSLOT", errc::cross_slot},
      {"CLUSTERDOWN", errc::cluster_down},
      {"LOADING", errc::loading},
      {"BUSY", errc::busy},
      {"UNKILLABLE", errc::unkillable},
      {"MASTERDOWN", errc::master_down},
      {"NOREPLICAS", errc::no_replicas},
      {"READONLY", errc::read_only},
      {"OOM", errc::out_of_memory},
      {"NOSCRIPT", errc::no_script},
      {"WRONGTYPE", errc::wrong_type},
      {"NOAUTH", errc::no_auth},
      {"WRONGPASS", errc::auth_failed},
      {"NOPERM", errc::no_permission},
      {"ERR", errc::server_error},
      {"EXECABORT", errc::server_error},
      {"NOTBUSY", errc::server_error},
  }};
  const auto word = text.substr(0, text.find(' '));
  for (const auto& p : table) {
    if (word != p.word) continue;
    if (p.code == errc::server_error) {
      if (text.find("max number of clients reached") != std::string_view::npos) {
        return errc::max_clients;
      }
      // ACL refusals inside scripts come as ERR, e.g. "ERR The user executing the script
      // can't publish to the channel mentioned in the command" (Redis 7.0).
      if (text.find("The user executing the script can't") != std::string_view::npos) {
        return errc::no_permission;
      }
    }
    return p.code;
  }
  return errc::server_error;
}

}  // namespace dlock
