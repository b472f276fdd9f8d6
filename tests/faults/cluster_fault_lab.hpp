// The fault lab on a real 3-master/3-replica Redis Cluster (support/redis_cluster.hpp): the
// workers of fault_lab.hpp take the lock through a `redis+cluster://` URL (the resource stays on
// its own server), and a probe in the test's process uses a lock of the same slot through the
// faults, so that the test can read what its client sent to which node and which redirections
// it followed (topology::router::traffic/redirected). The lock's name carries a hash tag, so
// that the probe's lock shares its slot.
//
// fault_lab's single lock server is started but not used here.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>

#include "dlock/keys.hpp"
#include "fault_lab.hpp"
#include "probe_client.hpp"
#include "support/redis_cluster.hpp"

namespace dlock::faults::test {

// The probe of probe_client.hpp, by the name the cluster scenarios use.
using cluster_probe = probe_client;

class cluster_fault_lab : public fault_lab {
 protected:
  cluster_fault_lab() {
    tag_ = dlock::test::unique_name("cf");
    name_ = "{" + tag_ + "}:lock";
  }

  std::string cluster_url(const std::string& params) const {
    return cluster_.url() + "?reconnect_min=10ms&reconnect_max=100ms" +
           (params.empty() ? "" : "&" + params);
  }
  int slot() const { return dlock::keys::slot(name_); }
  std::string probe_name() const { return "{" + tag_ + "}:probe"; }

  // `n` workers of `count` sections of `hold` ms (+ up to 20 ms) on the cluster, each waiting
  // up to 30 s, the watchdog lease 2 s.
  void spawn_contenders(int n, int count, int hold) {
    for (int i = 0; i < n; ++i) {
      spawn("w" + std::to_string(i), cluster_url("watchdog=2000ms"),
            {"--count", std::to_string(count), "--hold", std::to_string(hold), "--jitter", "20",
             "--wait", "30000", "--seed", std::to_string(21 + i)});
    }
  }

  // Until `n` clients listen on the lock's shard channel at the slot's master.
  bool shard_listeners(long n) {
    const auto channel = dlock::keys::lock_channel(name_);
    return dlock::test::wait_until(
        [&] {
          const auto text = cluster_.command_on_slot(slot(), {"PUBSUB", "SHARDNUMSUB", channel});
          const auto colon = text.rfind(':');
          return colon != std::string::npos && std::stol(text.substr(colon + 1)) >= n;
        },
        std::chrono::seconds{10});
  }

  // The longest wait for the lock in [from, to] (ns): from a section's end to the next enter, for
  // every enter in the window.
  static std::int64_t longest_gap(const report& r, std::int64_t from, std::int64_t to) {
    std::int64_t longest = 0;
    for (std::size_t i = 1; i < r.sections.size(); ++i) {
      const auto& next = r.sections[i];
      if (next.enter < from || next.enter > to) continue;
      longest = std::max(longest, next.enter - r.sections[i - 1].end);
    }
    return longest;
  }

  // The probe's client learnt that a node was no longer a master, and sent it nothing after.
  void expect_nothing_sent_after_demotion(cluster_probe& probe) {
    dlock::faults::test::expect_nothing_sent_after_demotion(probe);
  }

  dlock::test::redis_cluster cluster_;
  std::string tag_;
};

}  // namespace dlock::faults::test
