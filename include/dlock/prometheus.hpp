// dlock/prometheus.hpp — dlock's metrics for Prometheus (the optional dlock::prometheus component,
// built when prometheus-cpp is found; link dlock::prometheus).
//
//   prometheus::Exposer exposer{"127.0.0.1:9464"};
//   auto metrics = std::make_shared<dlock::prometheus_collector>(client);
//   exposer.RegisterCollectable(metrics);   // or a push Gateway; keep `metrics` alive
//
// Every scrape reads client::metrics() once and exposes it, so nothing is counted twice and
// nothing runs between scrapes. It is a prometheus::Collectable rather than metrics created in
// a prometheus::Registry: a Registry's histograms take observations one by one, while dlock's
// are already bucketed; an Exposer or a Gateway collects both side by side.
//
// Names (base units, counters end in _total; `kind` is sync_kind's to_string, e.g. "mutex",
// "shared_read"; series of a kind appear once the client has used it):
//   dlock_acquisitions_total{kind,outcome}      outcome: acquired | busy | cancelled | failed
//   dlock_lock_wait_seconds{kind}               histogram: call to outcome
//   dlock_lock_hold_seconds{kind}               histogram: acquisition to release or loss
//   dlock_lock_handoff_seconds{kind}            histogram: release message to acquisition
//   dlock_renewals_total{kind}, dlock_renewals_batched_total{kind},
//   dlock_renewal_failures_total{kind}
//   dlock_leases_lost_total{kind,cause}         cause: not_held | unconfirmed
//   dlock_commands_sent_total, dlock_script_reloads_total, dlock_reconnects_total,
//   dlock_disconnects_total, dlock_subscribe_errors_total, dlock_redirects_total,
//   dlock_failovers_total
//   dlock_errors_total{errc}                    errc: to_string(errc), e.g. "timeout"
// `labels` are added to every series (e.g. {{"client", "orders"}}).
#pragma once

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <map>
#include <string>
#include <vector>

#include "dlock/client.hpp"

namespace dlock {

class prometheus_collector : public ::prometheus::Collectable {
 public:
  // `c` must outlive the collector's registration. `labels` go on every series (several clients
  // in one process need one that tells them apart); a label name the families use (kind,
  // outcome, cause, errc, le) or an invalid one throws lock_error(errc::invalid_argument).
  explicit prometheus_collector(const client& c, std::map<std::string, std::string> labels = {});

  std::vector<::prometheus::MetricFamily> Collect() const override;

  // The families for a snapshot (what Collect() returns for client.metrics()).
  static std::vector<::prometheus::MetricFamily> families(
      const metrics& m, const std::map<std::string, std::string>& labels = {});

 private:
  const client& client_;
  std::map<std::string, std::string> labels_;
};

}  // namespace dlock
