// Names of metrics' and events' enumerations (the Prometheus export's label values), and
// client::metrics().
#include "dlock/metrics.hpp"

#include <array>

#include "dlock/client.hpp"
#include "dlock/events.hpp"
#include "runtime/client_impl.hpp"
#include "runtime/observer.hpp"

namespace dlock {

namespace {
// In errc's order, from 1.
constexpr std::array<std::string_view, 39> errc_names{
    "not_owner",
    "lease_lost",
    "timeout",
    "would_deadlock",
    "shutdown",
    "invalid_argument",
    "invalid_uri",
    "resolve_failed",
    "connection_refused",
    "connect_timeout",
    "connection_lost",
    "tls_handshake_failed",
    "tls_verify_failed",
    "tls_host_mismatch",
    "tls_config_invalid",
    "auth_failed",
    "no_auth",
    "no_permission",
    "protocol_error",
    "moved",
    "ask",
    "try_again",
    "cross_slot",
    "cluster_down",
    "loading",
    "busy",
    "unkillable",
    "master_down",
    "no_replicas",
    "read_only",
    "out_of_memory",
    "no_script",
    "wrong_type",
    "max_clients",
    "server_error",
    "unsupported_server",
    "unknown_master",
    "wrong_kind",
    "upgrade_refused",
};
static_assert(errc_names.size() == static_cast<std::size_t>(errc::upgrade_refused));
static_assert(errc_names.size() < errc_slots);
}  // namespace

std::string_view to_string(errc e) noexcept {
  const auto i = static_cast<std::size_t>(e);
  return i >= 1 && i <= errc_names.size() ? errc_names[i - 1] : std::string_view{"other"};
}

std::string_view to_string(sync_kind k) noexcept {
  static constexpr std::array<std::string_view, sync_kind_count> names{
      "mutex",        "fair_mutex",       "shared_read",
      "shared_write", "leased_semaphore", "counting_semaphore",
      "latch",        "multi_lock",       "red_lock"};
  return names[static_cast<std::size_t>(k)];
}

std::string_view to_string(acquire_outcome o) noexcept {
  static constexpr std::array<std::string_view, acquire_outcome_count> names{"acquired", "busy",
                                                                             "cancelled", "failed"};
  return names[static_cast<std::size_t>(o)];
}

std::string_view to_string(loss_cause c) noexcept {
  return c == loss_cause::not_held ? "not_held" : "unconfirmed";
}

std::string_view to_string(event_type t) noexcept {
  static constexpr std::array<std::string_view, 6> names{
      "lease_lost", "lease_at_risk", "disconnected", "reconnected", "failover", "warning"};
  return names[static_cast<std::size_t>(t)];
}

metrics client::metrics() const noexcept {
  auto m = impl_->observer().snapshot();
  m.subscribe_errors = impl_->waiters().refused();  // counted where refusals are told apart
  return m;
}

}  // namespace dlock
