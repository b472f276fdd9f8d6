// A lock user in the test's own process, for the fault labs on several nodes (cluster and
// sentinel): its client's router is readable, so a test can show what the client sent to which
// node and which redirections it followed (topology::router::traffic/redirected), which the
// worker processes cannot.
//
//   probe_client probe{url, "{tag}:probe"};   // starts locking at once
//   ... faults ...
//   probe.stop();
//   expect_nothing_sent_after_demotion(probe);
#pragma once

#include <gtest/gtest.h>

#include <asio/post.hpp>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "dlock/client.hpp"
#include "dlock/mutex.hpp"
#include "measured.hpp"
#include "runtime/client_access.hpp"
#include "runtime/client_impl.hpp"

namespace dlock::faults::test {

// Locks (waiting up to 5 s), holds 5 ms, unlocks, every 10 ms, until stopped. Records how long
// its longest lock+unlock took and how many failed.
class probe_client {
 public:
  probe_client(const std::string& url, const std::string& name)
      : client_{dlock::config::from_uri(url)}, mutex_{client_, name} {
    thread_ = std::jthread{[this](std::stop_token stop) { run(stop); }};
  }
  ~probe_client() { stop(); }

  void stop() {
    if (thread_.joinable()) {
      thread_.request_stop();
      thread_.join();
    }
  }
  std::int64_t longest_ms() const { return longest_ns_.load() / 1'000'000; }
  long failures() const { return failures_.load(); }
  // The first failure's message ("" if none), for the report.
  std::string first_error() const {
    std::lock_guard lock{mu_};
    return first_error_;
  }
  long cycles() const { return cycles_.load(); }
  // Starts a new measurement of longest_ms() (a phase of a scenario).
  void reset_longest() { longest_ns_ = 0; }

  dlock::metrics metrics() const { return client_.metrics(); }

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
      if (ec && failures_++ == 0) {
        std::lock_guard lock{mu_};
        first_error_ = ec.message();
      }
      // A failed unlock (the server unreachable past the connect timeout) leaves the thread's
      // hold recorded, as std::mutex's rules want, and every try_lock_for would then re-enter
      // that lost hold and fail at once with lease_lost: give it up and start afresh.
      if (ec) {
        std::error_code ignored;
        mutex_.unlock(ignored);
      }
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
  mutable std::mutex mu_;
  std::string first_error_;
  std::jthread thread_;  // last: it stops before what it uses goes
};

// The probe's client learnt that a node was no longer a master (at least `at_least` such
// nodes), and sent it nothing after it learnt it. Returns how many it learnt.
inline std::size_t expect_nothing_sent_after_demotion(probe_client& probe,
                                                      std::size_t at_least = 1) {
  using router = dlock::topology::router;
  const auto nodes =
      probe.on_router<std::vector<router::node_traffic>>([](auto& r) { return r.traffic(); });
  std::size_t demoted = 0;
  for (const auto& n : nodes) {
    if (n.demoted == router::clock::time_point{}) continue;
    ++demoted;
    EXPECT_LE(n.last_sent, n.demoted)
        << n.node.host << ':' << n.node.port << " got a command "
        << std::chrono::duration_cast<std::chrono::milliseconds>(n.last_sent - n.demoted).count()
        << " ms after the client learnt it was demoted";
  }
  EXPECT_GE(demoted, at_least) << "the probe's client never learnt of the demotion";
  dlock::faults::measured("probe client: " + std::to_string(demoted) +
                          " node(s) learnt demoted, no command sent to them afterwards");
  return demoted;
}

}  // namespace dlock::faults::test
