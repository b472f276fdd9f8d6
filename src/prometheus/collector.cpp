// dlock::prometheus_collector: a client::metrics() snapshot as Prometheus metric families.
#include <algorithm>
#include <cctype>
#include <deque>
#include <limits>

#include "dlock/prometheus.hpp"

namespace dlock {

namespace {

using ::prometheus::ClientMetric;
using ::prometheus::MetricFamily;
using ::prometheus::MetricType;
using label_map = std::map<std::string, std::string>;

class family_builder {
 public:
  explicit family_builder(const label_map& base) : base_{base} {}

  MetricFamily& family(std::string name, std::string help, MetricType type) {
    out_.push_back(MetricFamily{std::move(name), std::move(help), type, {}});
    return out_.back();
  }
  // The families with at least one series.
  std::vector<MetricFamily> take() {
    std::vector<MetricFamily> out;
    for (auto& f : out_) {
      if (!f.metric.empty()) out.push_back(std::move(f));
    }
    return out;
  }
  void counter(MetricFamily& f, const label_map& extra, std::uint64_t value) {
    auto m = series(extra);
    m.counter.value = static_cast<double>(value);
    f.metric.push_back(std::move(m));
  }
  void histogram(MetricFamily& f, const label_map& extra, const dlock::histogram& h) {
    auto m = series(extra);
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i < h.buckets.size(); ++i) {
      cumulative += h.buckets[i];
      const double bound = i < dlock::histogram::bounds.size()
                               ? dlock::histogram::bounds[i]
                               : std::numeric_limits<double>::infinity();
      m.histogram.bucket.push_back({cumulative, bound});
    }
    m.histogram.sample_count = cumulative;
    m.histogram.sample_sum = h.sum;
    f.metric.push_back(std::move(m));
  }

 private:
  ClientMetric series(const label_map& extra) const {
    ClientMetric m;
    for (const auto& [k, v] : base_) m.label.push_back({k, v});
    for (const auto& [k, v] : extra) m.label.push_back({k, v});
    return m;
  }

  const label_map& base_;
  std::deque<MetricFamily> out_;  // a deque: family() hands out references that stay valid
};

bool used(const kind_metrics& k) {
  return k.wait.count > 0 || k.renewals_sent > 0 || k.lost() > 0 || k.hold.count > 0;
}

void kind_families(family_builder& b, const metrics& m) {
  auto& acq = b.family("dlock_acquisitions_total",
                       "Acquisitions (lock, try_lock, acquire, wait) by how they ended",
                       MetricType::Counter);
  auto& wait = b.family("dlock_lock_wait_seconds", "From an acquisition's call to its outcome",
                        MetricType::Histogram);
  auto& hold =
      b.family("dlock_lock_hold_seconds", "From an acquisition to its last release or its loss",
               MetricType::Histogram);
  auto& handoff = b.family("dlock_lock_handoff_seconds",
                           "From the release message that woke a waiter to its acquisition",
                           MetricType::Histogram);
  auto& renewals = b.family("dlock_renewals_total", "Hold renewals or checks sent by the watchdog",
                            MetricType::Counter);
  auto& batched =
      b.family("dlock_renewals_batched_total",
               "Hold renewals sent in one script together with other holds", MetricType::Counter);
  auto& failed = b.family("dlock_renewal_failures_total",
                          "Hold renewals whose script failed or was not answered in time",
                          MetricType::Counter);
  auto& lost = b.family("dlock_leases_lost_total", "Held leases reported lost, by cause",
                        MetricType::Counter);
  for (std::size_t i = 0; i < sync_kind_count; ++i) {
    const auto kind = static_cast<sync_kind>(i);
    const auto& k = m.of(kind);
    if (!used(k)) continue;
    const label_map by_kind{{"kind", std::string{to_string(kind)}}};
    for (std::size_t o = 0; o < acquire_outcome_count; ++o) {
      b.counter(acq,
                {{"kind", std::string{to_string(kind)}},
                 {"outcome", std::string{to_string(static_cast<acquire_outcome>(o))}}},
                k.acquisitions[o]);
    }
    b.histogram(wait, by_kind, k.wait);
    b.histogram(hold, by_kind, k.hold);
    b.histogram(handoff, by_kind, k.handoff);
    b.counter(renewals, by_kind, k.renewals_sent);
    b.counter(batched, by_kind, k.renewals_batched);
    b.counter(failed, by_kind, k.renewals_failed);
    for (std::size_t c = 0; c < loss_cause_count; ++c) {
      b.counter(lost,
                {{"kind", std::string{to_string(kind)}},
                 {"cause", std::string{to_string(static_cast<loss_cause>(c))}}},
                k.leases_lost[c]);
    }
  }
}

void client_families(family_builder& b, const metrics& m) {
  const std::pair<const char*, std::pair<const char*, std::uint64_t>> plain[] = {
      {"dlock_commands_sent_total", {"Requests written to command connections", m.commands_sent}},
      {"dlock_script_reloads_total", {"Scripts resent as EVAL after NOSCRIPT", m.script_reloads}},
      {"dlock_reconnects_total", {"Connections re-established after a loss", m.reconnects}},
      {"dlock_disconnects_total", {"Established connections lost", m.disconnects}},
      {"dlock_subscribe_errors_total", {"Subscriptions the server refused", m.subscribe_errors}},
      {"dlock_redirects_total", {"MOVED and ASK redirections followed", m.redirects}},
      {"dlock_failovers_total", {"Sentinel failovers followed", m.failovers}},
  };
  for (const auto& [name, what] : plain) {
    auto& f = b.family(name, what.first, MetricType::Counter);
    b.counter(f, {}, what.second);
  }
  auto& errors = b.family("dlock_errors_total", "Commands completed with an error, by errc",
                          MetricType::Counter);
  for (std::size_t i = 0; i < m.errors.size(); ++i) {
    if (m.errors[i] == 0) continue;
    b.counter(errors, {{"errc", std::string{to_string(static_cast<errc>(i))}}}, m.errors[i]);
  }
  if (errors.metric.empty()) b.counter(errors, {{"errc", "timeout"}}, 0);
}

}  // namespace

prometheus_collector::prometheus_collector(const client& c, label_map labels)
    : client_{c}, labels_{std::move(labels)} {
  // A name the families use themselves, or one Prometheus refuses, would make every scrape
  // invalid: refuse it here, once.
  for (const auto& [name, value] : labels_) {
    const bool reserved = name == "kind" || name == "outcome" || name == "cause" ||
                          name == "errc" || name == "le" || name.starts_with("__");
    const bool valid = !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0])) &&
                       std::all_of(name.begin(), name.end(), [](char ch) {
                         return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_';
                       });
    if (reserved || !valid) {
      throw lock_error(errc::invalid_argument,
                       "prometheus_collector: label name '" + name + "' is reserved or invalid");
    }
  }
}

std::vector<MetricFamily> prometheus_collector::Collect() const {
  return families(client_.metrics(), labels_);
}

std::vector<MetricFamily> prometheus_collector::families(const metrics& m,
                                                         const label_map& labels) {
  family_builder b{labels};
  kind_families(b, m);
  client_families(b, m);
  return b.take();
}

}  // namespace dlock
