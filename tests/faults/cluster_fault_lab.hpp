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
#include <asio/post.hpp>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <stop_token>
#include <string>
#include <thread>

#include "dlock/client.hpp"
#include "dlock/keys.hpp"
#include "dlock/mutex.hpp"
#include "fault_lab.hpp"
#include "runtime/client_access.hpp"
#include "runtime/client_impl.hpp"
#include "support/redis_cluster.hpp"

namespace dlock::faults::test {

// A lock user in the test's process: lock (waiting up to 5 s), hold 5 ms, unlock, every 10 ms,
// until stopped. Records how long its longest lock+unlock took and how many failed.
class cluster_probe {
 public:
  cluster_probe(const std::string& url, const std::string& name)
      : client_{dlock::config::from_uri(url)}, mutex_{client_, name} {
    thread_ = std::jthread{[this](std::stop_token stop) { run(stop); }};
  }
  ~cluster_probe() { stop(); }

  void stop() {
    if (thread_.joinable()) {
      thread_.request_stop();
      thread_.join();
    }
  }
  std::int64_t longest_ms() const { return longest_ns_.load() / 1'000'000; }
  long failures() const { return failures_.load(); }
  long cycles() const { return cycles_.load(); }

  // The router's record, read on the client's strand.
  template <class T, class F>
  T on_router(F read) {
    auto& impl = dlock::detail::client_access::impl(client_);
    std::promise<T> out;
    asio::post(impl.strand(), [&] { out.set_value(read(impl.router())); });
    return out.get_future().get();
  }

 private:
  void run(const std::stop_token& stop) {
    using clock = std::chrono::steady_clock;
    while (!stop.stop_requested()) {
      const auto start = clock::now();
      std::error_code ec;
      if (mutex_.try_lock_for(std::chrono::seconds{5}, ec)) {
        std::this_thread::sleep_for(std::chrono::milliseconds{5});
        mutex_.unlock(ec);
      }
      if (ec) ++failures_;
      ++cycles_;
      const auto took = (clock::now() - start).count();
      if (took > longest_ns_.load()) longest_ns_ = took;
      std::this_thread::sleep_for(std::chrono::milliseconds{10});
    }
  }

  dlock::client client_;
  dlock::mutex mutex_;
  std::atomic<std::int64_t> longest_ns_{0};
  std::atomic<long> failures_{0}, cycles_{0};
  std::jthread thread_;  // last: it stops before what it uses goes
};

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
    using traffic = std::vector<dlock::topology::router::node_traffic>;
    const auto nodes = probe.on_router<traffic>([](auto& r) { return r.traffic(); });
    std::size_t demoted = 0;
    for (const auto& n : nodes) {
      if (n.demoted == dlock::topology::router::clock::time_point{}) continue;
      ++demoted;
      EXPECT_LE(n.last_sent, n.demoted)
          << n.node.host << ':' << n.node.port << " got a command "
          << std::chrono::duration_cast<milliseconds>(n.last_sent - n.demoted).count()
          << " ms after the client learnt it was demoted";
    }
    EXPECT_GE(demoted, 1u) << "the probe's client never learnt of the demotion";
    measured("probe client: " + std::to_string(demoted) +
             " node(s) learnt demoted, no command sent to them afterwards");
  }

  dlock::test::redis_cluster cluster_;
  std::string tag_;
};

}  // namespace dlock::faults::test
