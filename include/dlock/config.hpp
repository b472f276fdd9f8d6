// dlock/config.hpp — where and how a client connects, as a struct with defaults or a URI.
//
//   auto cfg = dlock::config::from_uri("redis://app:secret@10.0.0.5:6379/2?timeout=500ms");
//   auto tls = dlock::config::from_uri(
//       "rediss://redis.internal:6380?ca=/etc/ssl/ca.pem&cert=/etc/ssl/me.pem&key=/etc/ssl/me.key");
//
// URI grammar: `redis://` or `rediss://` (TLS), optional `user:password@` or `:password@`
// (percent-encoded), host name, IPv4 or `[IPv6]`, optional `:port` (default 6379), optional
// `/db` (a non-negative integer; the server checks it against `databases`), then parameters:
//
//   connect_timeout, timeout (per command), health_check (idle PING interval, 0 = off),
//   reconnect_min, reconnect_max     durations: `250ms`, `3s`, `2m`, or a bare number of ms
//   name          CLIENT SETNAME (no spaces)
//   ca, cert, key TLS files (PEM): CA bundle, client certificate chain, client private key
//   sni           the name to verify the server certificate against (default: the host)
//   watchdog      lease given to locks taken without one (default 30s; renewed every third)
//   recheck       longest a waiter goes without re-checking the lock (default 3s): what a lost
//                 unlock message can cost, at most
//   max_name      longest lock name accepted, in bytes (default 1024)
//   io_threads    threads running the client's io_context (default 1)
//   fencing       `on` (default): every first acquisition takes a fencing token from one
//                 counter that all locks of the database share (dlock_fencing_counter);
//                 `per-lock`: from the lock's own counter redisson_lock_token:{name}, as
//                 Redisson's RFencedLock (for names that RFencedLock takes too; the key, ~100
//                 bytes, stays after release, one per name ever locked); `off`: no counter,
//                 tokens are 0
//   wait_replicas replicas that must acknowledge each acquisition (WAIT after the acquire
//                 script, on the same connection: WAIT counts that connection's writes);
//                 0 (default) = no check
//   wait_timeout  how long WAIT may take (default 500ms; the client's other commands queue
//                 behind it, so keep it well under a third of the watchdog lease)
//   on_shortfall  fewer replicas acknowledged in time: `fail` (default) gives the lock back
//                 and reports errc::no_replicas; `accept` keeps it and marks the lease
//                 unreplicated (lease::replicated() == false)
//   caller_io     `on` (default): a blocking lock()/try_lock*/unlock() sends its script and
//                 reads the reply on the calling thread, over a second connection (see
//                 caller_io below); `off`: every call goes through the client's I/O thread
//   handoff       how long an unlock keeps the lock for the waiter it wakes (default 100ms;
//                 `0` = no hand-off: whoever asks first after an unlock takes the lock)
//   grant         `on` (default): an unlock hands the lock straight to the waiter it wakes
//                 (see grants below); `off`: it only keeps the lock for it (both sides)
//   linger        how long a lock's unlock channel stays subscribed after its last waiter in
//                 this client is done (default 1s; `0` = unsubscribe at once)
//
// Any other parameter, a bad port (0 or > 65535), missing host, bad db index or bad duration is
// rejected with errc::invalid_uri.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <system_error>

namespace dlock {

struct tls_options {
  bool enabled = false;
  std::string ca_file;     // PEM CA bundle; empty = the system's default trust store
  std::string cert_file;   // client certificate chain (PEM), for servers that require one
  std::string key_file;    // client private key (PEM)
  std::string server_name; // name the certificate must carry; empty = config::host
};

// Conditions that do not fail a call but weaken what a lock promises, or slow it down.
enum class warning {
  channels_denied,  // SUBSCRIBE refused (NOPERM: Redis 7 ACL users have no channels by
                    // default): waiters fall back to re-checks every config::wait_recheck
  evicting_policy,  // maxmemory-policy may evict lock keys (they have a TTL): a held lock could
                    // vanish and be taken by another owner. Use noeviction.
  unfenced,         // CLIENT INFO or CLIENT KILL refused (an ACL user without the rights, a
                    // server before 6.2): a request a broken connection delivers late may run
                    // after the client's resend (docs/safety.md). Grant client|info, client|kill.
};

struct config {
  std::string host = "127.0.0.1";
  std::uint16_t port = 6379;
  std::string username;  // empty = the default user (AUTH password)
  std::string password;  // empty = no AUTH
  int database = 0;
  tls_options tls;

  std::chrono::milliseconds connect_timeout{2000};    // TCP + TLS + AUTH/SELECT handshake
  std::chrono::milliseconds command_timeout{3000};    // per command, from submission to reply
  std::chrono::milliseconds health_check_interval{5000};  // PING after this long idle; 0 = off
  std::chrono::milliseconds reconnect_min{50};        // first backoff step (jittered)
  std::chrono::milliseconds reconnect_max{2000};      // backoff cap
  std::chrono::milliseconds watchdog_lease{30000};    // lease of locks taken without one
  std::chrono::milliseconds wait_recheck{3000};       // a waiter re-checks at least this often
  std::size_t max_name_length = 1024;                 // longest lock name accepted (bytes)
  std::string client_name = "dlock";
  unsigned io_threads = 1;
  // The blocking calls of dlock::mutex (lock, try_lock*, unlock) do their I/O on the calling
  // thread when they can: over one more connection to the server, used by one thread at a
  // time, they write the script and sleep until its reply, instead of handing the command to
  // the I/O thread and being woken by it (two thread switches per command). A call that finds
  // that connection busy, or has to wait for the lock, goes through the I/O thread as before.
  // Not used with TLS or wait_replicas (WAIT counts the writes of the connection that sends it).
  bool caller_io = true;
  // Where fencing tokens come from (see `fencing` above).
  enum class fencing_mode { off, shared, per_lock };
  fencing_mode fencing = fencing_mode::shared;
  // Replication check of every first acquisition (see wait_replicas above).
  enum class shortfall_policy { fail, accept };
  unsigned wait_replicas = 0;
  std::chrono::milliseconds wait_timeout{500};
  shortfall_policy on_shortfall = shortfall_policy::fail;
  // Hand-off: an unlock that wakes a waiter of the lock's queue keeps the lock for that waiter
  // this long (a reservation in the lock hash), so that nobody else's acquire takes it in the
  // moment between the unlock and the woken waiter's acquire: waiters of dlock clients are
  // served in arrival order instead of losing to whoever comes back first. A woken waiter that
  // does not come (its process died) holds the others up for about this long: the next in
  // line is told to stand by and re-checks when the window has passed. A waiter that gives up,
  // or whose client is destroyed, passes it on at once. 0 = off.
  std::chrono::milliseconds handoff_window{100};
  // Grants: within the hand-off, the unlock gives the lock to the woken waiter outright — that
  // waiter's owner field, a fencing token, the unlocker's window as its first lease — and tells
  // it so on its client's channel: the waiter holds the lock when the message arrives, without
  // a round trip of its own. It trusts the grant from no later than it was made (the message
  // says how long after its last attempt, and the window) for that window, and a fifth of the
  // window later, if it still holds the lock, confirms it (setting its own lease; a holder that
  // releases sooner never needs to); a confirmation that finds it gone marks the lease lost.
  // A client takes grants when handoff_window > 0, wait_replicas == 0 (a grant is the
  // unlocker's write, which the waiter's WAIT could not count) and this is on; it makes them
  // when handoff_window > 0, this is on, and the waiter is fenced as it is. A grant no one hears
  // (its client died) is undone at once; one to a stalled process holds the lock for the
  // window, and the other waiters find it free at their next re-check (wait_recheck). Off: the
  // client neither makes nor takes grants (the unlock keeps the lock for the waiter, which then
  // acquires it).
  bool grants = true;
  // How long a lock's unlock channel (redisson_lock__channel:{name}) stays subscribed after the
  // last waiter of this client on it is done. A client that waits on the same lock again
  // within it (a worker loop) neither subscribes again nor re-checks after the subscription's
  // confirmation: three commands less per wait (SUBSCRIBE, the check, UNSUBSCRIBE). Meanwhile unlock messages of
  // that lock still reach the client (and are dropped). At most 64 channels linger per client;
  // the oldest is unsubscribed first. 0 = unsubscribe at once, as Redisson does.
  std::chrono::milliseconds subscription_linger{1000};
  // Called at most once per kind of warning per client, on the client's I/O thread (it must not
  // block). Empty: the warning is printed to stderr as "dlock: warning: <message>".
  std::function<void(warning, std::string_view message)> on_warning;

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
