// dlock/error.hpp — every failure dlock reports, as a std::error_code.
//
// All public operations report errors as `std::error_code` values of `dlock::errc` (async
// completions and the `std::error_code&` overloads) or throw `dlock::lock_error`, a
// `std::system_error` carrying the same code (the overloads without `ec`, which is what
// std::lock_guard and friends expect).
//
//   std::error_code ec;
//   client.ping(ec);
//   if (ec == dlock::errc::connection_refused) ...
//   if (dlock::is_retryable(ec)) ...             // transient: the same call may succeed later
//
// Redis error replies are classified into these codes by `dlock::classify_error_reply`.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

namespace dlock {

enum class errc {
  // Lock semantics.
  not_owner = 1,     // unlock/renew by a caller that does not hold the lock
  lease_lost,        // the lease expired or was taken away while it was believed held
  timeout,           // the operation did not complete before its deadline
  would_deadlock,    // a blocking call was made on the client's own I/O thread
  shutdown,          // the client was shut down before the operation completed
  invalid_argument,  // a bad name, duration or other argument
  invalid_uri,       // a malformed connection URI or configuration value

  // Connection.
  resolve_failed,      // the host name could not be resolved
  connection_refused,  // nothing listens at host:port
  connect_timeout,     // no connection (TCP, TLS and handshake) within the connect timeout
  connection_lost,  // the connection broke with the request sent but unanswered (outcome unknown)
  tls_handshake_failed,  // the TLS handshake failed for a reason other than verification
  tls_verify_failed,     // the server's certificate chain did not verify against the CA
  tls_host_mismatch,     // the server's certificate names another host
  tls_config_invalid,    // the CA, certificate or key file could not be loaded
  auth_failed,           // WRONGPASS, or AUTH rejected during the handshake
  no_auth,               // NOAUTH: the server wants a password and none was given
  no_permission,         // NOPERM: the ACL user may not run the command, key or channel
  protocol_error,        // the server sent bytes that are not RESP2

  // Redis error replies.
  moved,               // MOVED: the slot lives on another cluster node
  ask,                 // ASK: retry once on another node with ASKING
  try_again,           // TRYAGAIN: multi-key request during resharding
  cross_slot,          // CROSSSLOT: keys of one request hash to different slots
  cluster_down,        // CLUSTERDOWN
  loading,             // LOADING: the server is loading its dataset
  busy,                // BUSY: a script is running
  unkillable,          // UNKILLABLE: a script that wrote cannot be killed
  master_down,         // MASTERDOWN: replica lost its master and serves no stale data
  no_replicas,         // NOREPLICAS: min-replicas-to-write not met
  read_only,           // READONLY: write sent to a replica (usually after a failover)
  out_of_memory,       // OOM: maxmemory reached under noeviction
  no_script,           // NOSCRIPT: EVALSHA of a script the server does not have
  wrong_type,          // WRONGTYPE: the key holds another kind of value
  max_clients,         // ERR max number of clients reached
  server_error,        // any other error reply (ERR ...)
  unsupported_server,  // cannot serve this configuration: Redis Cluster needs Redis >= 7.0

  // Redis Sentinel.
  unknown_master,  // every sentinel that answered knows no master named config::sentinel_master

  // Lock kinds (appended: the values above stay stable).
  wrong_kind,       // the name is a lock of another kind (a read-write lock used as a mutex...)
  upgrade_refused,  // a shared_mutex reader asked for the write side (it would deadlock)
  // A new value goes here, with its name in src/metrics.cpp (errc_names: metrics' labels).
};

const std::error_category& error_category() noexcept;

inline std::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), error_category()};
}

// True when the same request may succeed if repeated later without any change by the caller
// (redirections, failover and loading windows, lost connections). False for configuration and
// programming errors (WRONGTYPE, NOPERM, bad input) and for lock outcomes.
bool is_retryable(std::error_code ec) noexcept;

// The enumerator's name ("timeout", "no_permission"); "other" for a value errc does not have.
std::string_view to_string(errc e) noexcept;

// Maps the text of a Redis error reply (without the leading '-') to its errc.
errc classify_error_reply(std::string_view text) noexcept;

// Thrown by the sync overloads without `std::error_code&`. `what()` includes the detail
// (e.g. the server's error text) when there is one.
class lock_error : public std::system_error {
 public:
  explicit lock_error(std::error_code ec) : std::system_error(ec) {}
  lock_error(std::error_code ec, const std::string& detail) : std::system_error(ec, detail) {}
};

// Throws lock_error(ec) when ec is set. For implementing throwing overloads.
inline void throw_if(std::error_code ec) {
  if (ec) throw lock_error(ec);
}

}  // namespace dlock

template <>
struct std::is_error_code_enum<dlock::errc> : std::true_type {};
