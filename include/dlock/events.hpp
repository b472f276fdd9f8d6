// dlock/events.hpp — what a client tells a log: config::on_event receives a dlock::event for
// each lease lost or at risk, each connection lost and re-established, each Sentinel failover
// followed, and each warning. examples/events_spdlog.cpp wires it to spdlog.
//
//   cfg.on_event = [](const dlock::event& e) {
//     std::fprintf(stderr, "dlock %s: %.*s\n", dlock::to_string(e.type).data(),
//                  int(e.message.size()), e.message.data());
//   };
//
// The callback runs on the client's I/O thread: it must not block, and must not make sync calls
// on the client (they would fail with errc::would_deadlock). The views in an event are valid
// for the call only. An exception it throws is caught and printed to stderr. One callback given
// to several clients is called from their several I/O threads: it must be thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>
#include <system_error>

#include "dlock/metrics.hpp"

namespace dlock {

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

enum class event_type : std::uint8_t {
  lease_lost,     // kind, name, cause: a held lease is no longer trusted (lease::lost() fired)
  lease_at_risk,  // kind, name, time_left, error: a renewal failed; the lease is still trusted
                  // for time_left, and is lost unless a renewal gets through before then
  disconnected,   // node, error: an established connection was lost
  reconnected,    // node: a connection was re-established after a loss
  failover,       // node: a Sentinel failover was followed; node is the new master
  warning,        // warning, message: given once per kind of warning per client
};
std::string_view to_string(event_type t) noexcept;  // "lease_lost", ...

struct event {
  event_type type = event_type::warning;
  std::string_view message{};                         // one line for a log, saying everything below
  sync_kind kind = sync_kind::mutex;                  // lease events
  std::string_view name{};                            // lease events: the synchronizer's name
  loss_cause cause = loss_cause::not_held;            // lease_lost
  std::chrono::milliseconds time_left{0};             // lease_at_risk
  std::string_view node{};                            // connection events and failover: "host:port"
  std::error_code error{};                            // lease_at_risk, disconnected: why
  dlock::warning warning = warning::channels_denied;  // warning
};

}  // namespace dlock
