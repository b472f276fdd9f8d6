// dlock/config.hpp — where and how a client connects, as a struct with defaults or a URI.
//
//   auto cfg = dlock::config::from_uri("redis://app:secret@10.0.0.5:6379/2?timeout=500ms");
//   auto tls = dlock::config::from_uri(
//       "rediss://redis.internal:6380?ca=/etc/ssl/ca.pem&cert=/etc/ssl/me.pem&key=/etc/ssl/me.key");
//
// URI grammar: `redis://` or `rediss://` (TLS), optional `user:password@` or `:password@`
// (percent-encoded), host name, IPv4 or `[IPv6]`, optional `:port` (default 6379), optional
// `/db` (a non-negative integer; the server checks it against `databases`), then parameters.
// Redis Cluster (>= 7.0): `redis+cluster://` or `rediss+cluster://`, the same userinfo (used on
// every node), seed nodes `host[:port]` separated by commas, optional `/0`, the same parameters:
//
//   redis+cluster://app:secret@10.0.0.5:7000,10.0.0.6:7000,[fd00::7]:7000?timeout=500ms
//
// Redis Sentinel: `redis+sentinel://` or `rediss+sentinel://` (TLS to sentinels and data nodes),
// the userinfo for the data nodes, the sentinels `host[:port]` (default port 26379) separated by
// commas, `/master-name` as the sentinels know it, optional `/db`, the same parameters plus
// sentinel_user and sentinel_password for the sentinels' own AUTH:
//
//   redis+sentinel://app:secret@s1:26379,s2:26379,s3:26379/mymaster?sentinel_password=x
//
// Parameters:
//
//   connect_timeout, timeout (per command), health_check (idle PING interval, 0 = off),
//   reconnect_min, reconnect_max     durations: `250ms`, `3s`, `2m`, or a bare number of ms
//   name          CLIENT SETNAME (no spaces)
//   ca, cert, key TLS files (PEM): CA bundle, client certificate chain, client private key
//   sni           the name to verify the server certificate against (default: the host); in
//                 cluster mode every node's (default: each node's own host)
//   watchdog      lease given to locks taken without one (default 30s; renewed every third)
//   recheck       longest a waiter goes without re-checking the lock (default 3s): what a lost
//                 unlock message can cost, at most
//   max_name      longest lock name accepted, in bytes (default 1024)
//   fencing       `on` (default): every first acquisition takes a fencing token from the
//                 counter of the lock's cluster slot (keys::slot_fencing_counter: at most one small
//                 key per slot, whatever the number of names), kept above Redisson RFencedLock's
//                 counter of the name when that exists; `off`: no counter, tokens are 0
//   wait_replicas replicas that must acknowledge every write of a lock: acquisitions,
//                 re-entries, renewals, releases (WAIT after the script, on the same connection:
//                 WAIT counts that connection's writes; one WAIT covers every write whose reply
//                 it follows). A number, or `auto`: the replicas `online` in INFO replication
//                 (read at every connect and every second). 0 (default) = no check
//   wait_timeout  how long WAIT may take (default 500ms; the client's other commands queue
//                 behind it, so it must be under a third of the watchdog lease)
//   on_shortfall  fewer replicas acknowledged in time: `fail` (default) gives a new hold back
//                 and reports errc::no_replicas, and a renewal does not extend the hold's trust
//                 (it runs out and is reported lost unless a later renewal is acknowledged);
//                 `accept` keeps both and marks the lease unreplicated
//                 (lease::replicated() == false). A release's WAIT only reports
//   sentinel_user, sentinel_password   AUTH for the sentinels (sentinel URIs only)
//
// Removed in this version (a URI naming them is refused): io_threads (a client runs one I/O
// thread), caller_io (blocking calls wait on the asynchronous ones), handoff, grant and linger
// (the hand-off is part of the lock protocol, not a setting), fencing=per-lock (see fencing).
//
// Any other parameter, a bad port (0 or > 65535), missing host, an empty node in a cluster list,
// bad db index (in cluster mode anything but 0) or bad duration is rejected with
// errc::invalid_uri.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "dlock/events.hpp"

namespace dlock {

struct tls_options {
  bool enabled = false;
  std::string ca_file;      // PEM CA bundle; empty = the system's default trust store
  std::string cert_file;    // client certificate chain (PEM), for servers that require one
  std::string key_file;     // client private key (PEM)
  std::string server_name;  // name the certificate must carry; empty = the host connected to
                            // (config::host, or in cluster mode each node's own host)
};

// A Redis node's address.
struct endpoint {
  std::string host;
  std::uint16_t port = 6379;
  friend bool operator==(const endpoint&, const endpoint&) = default;
};

struct config {
  std::string host = "127.0.0.1";
  std::uint16_t port = 6379;
  std::string username;  // empty = the default user (AUTH password)
  std::string password;  // empty = no AUTH
  int database = 0;
  tls_options tls;
  // Redis Cluster (Redis >= 7.0): seed nodes, tried in turn to read the slot map. Non-empty
  // selects cluster mode; host and port are then unused, and database must be 0.
  std::vector<endpoint> cluster_nodes;
  bool cluster() const noexcept { return !cluster_nodes.empty(); }
  // Redis Sentinel: the sentinels, tried in turn, and the master they monitor. Non-empty
  // sentinel_nodes selects sentinel mode: host and port are then unused (the master is asked of
  // the sentinels, and checked with ROLE, at every connect).
  std::vector<endpoint> sentinel_nodes;
  std::string sentinel_master;
  std::string sentinel_user;      // empty = the default user (AUTH sentinel_password)
  std::string sentinel_password;  // empty = the sentinels want no AUTH
  bool sentinel() const noexcept { return !sentinel_nodes.empty(); }

  std::chrono::milliseconds connect_timeout{2000};        // TCP + TLS + AUTH/SELECT handshake
  std::chrono::milliseconds command_timeout{3000};        // per command, from submission to reply
  std::chrono::milliseconds health_check_interval{5000};  // PING after this long idle; 0 = off
  std::chrono::milliseconds reconnect_min{50};            // first backoff step (jittered)
  std::chrono::milliseconds reconnect_max{2000};          // backoff cap
  std::chrono::milliseconds watchdog_lease{30000};        // lease of locks taken without one
  std::chrono::milliseconds wait_recheck{3000};           // a waiter re-checks at least this often
  std::size_t max_name_length = 1024;                     // longest lock name accepted (bytes)
  std::string client_name = "dlock";
  // Where fencing tokens come from (see `fencing` above).
  enum class fencing_mode { off, on };
  fencing_mode fencing = fencing_mode::on;
  // Replication check of every write (see wait_replicas above).
  enum class shortfall_policy { fail, accept };
  static constexpr unsigned online_replicas = ~0u;  // wait_replicas=auto
  unsigned wait_replicas = 0;
  std::chrono::milliseconds wait_timeout{500};
  shortfall_policy on_shortfall = shortfall_policy::fail;
  // Called at most once per kind of warning per client, on the client's I/O thread (it must not
  // block). When neither this nor on_event is set, the warning is printed to stderr as
  // "dlock: warning: <message>".
  std::function<void(warning, std::string_view message)> on_warning;
  // Every event of events.hpp (lease lost or at risk, connections, failovers, warnings), on the
  // client's I/O thread; it must not block. Empty: no events (metrics still count).
  std::function<void(const event&)> on_event;

  // Parses a URI (see the file comment). The throwing form raises lock_error(errc::invalid_uri)
  // with the reason in what(); the other sets `ec` and returns a default config.
  static config from_uri(std::string_view uri);
  static config from_uri(std::string_view uri, std::error_code& ec);
  static config from_uri(std::string_view uri, std::error_code& ec, std::string& reason);

  // Checks the values a struct-built config may get wrong (timeouts <= 0, empty host, names
  // with spaces...). Returns errc::invalid_uri with `reason` set, or an empty code.
  std::error_code validate(std::string& reason) const;
};

// Reads a duration: `250ms`, `30s`, `2m`, `1h`, or a bare number of milliseconds. Rejects
// negative, fractional, overflowing and unit-less garbage with errc::invalid_argument.
std::chrono::milliseconds parse_duration(std::string_view text, std::error_code& ec);

}  // namespace dlock
