// client::metrics() and config::on_event against a real redis-server: each counter and event is
// produced by the thing it counts (acquisitions of every outcome, hand-offs, renewals, a lease
// deleted under its holder, a lease whose renewals cannot get through, connections killed,
// error replies, warnings).
#include <gtest/gtest.h>

#include <asio/use_future.hpp>
#include <chrono>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "dlock/client.hpp"
#include "dlock/mutex.hpp"
#include "support/redis_server.hpp"
#include "support/tcp_proxy.hpp"
#include "test_util.hpp"

using namespace std::chrono_literals;
using dlock::acquire_outcome;
using dlock::errc;
using dlock::event_type;
using dlock::sync_kind;

namespace metrics_events {

// Events as they arrive (copied: the event's views live for the call only).
struct event_log {
  struct entry {
    event_type type;
    std::string name, node, message;
    dlock::loss_cause cause;
    std::error_code error;
  };
  std::mutex mu;
  std::vector<entry> seen;

  void attach(dlock::config& cfg) {
    cfg.on_event = [this](const dlock::event& e) {
      std::lock_guard lock{mu};
      seen.push_back({e.type, std::string{e.name}, std::string{e.node}, std::string{e.message},
                      e.cause, e.error});
    };
  }
  std::vector<entry> of(event_type t) {
    std::lock_guard lock{mu};
    std::vector<entry> out;
    for (const auto& e : seen) {
      if (e.type == t) out.push_back(e);
    }
    return out;
  }
  // Waits up to `limit` for an event of type t.
  bool wait_for(event_type t, std::chrono::milliseconds limit) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (of(t).empty()) {
      if (std::chrono::steady_clock::now() > end) return false;
      std::this_thread::sleep_for(10ms);
    }
    return true;
  }
};

std::uint64_t outcome(const dlock::metrics& m, sync_kind k, acquire_outcome o) {
  return m.of(k).acquisitions[static_cast<std::size_t>(o)];
}

TEST(metrics, count_acquisitions_by_outcome_with_wait_hold_and_handoff_times) {
  dlock::test::redis_server srv;
  dlock::client a{dlock::test::config_for(srv)}, b{dlock::test::config_for(srv)};
  const auto name = dlock::test::unique_name("m");
  dlock::mutex ma{a, name}, mb{b, name};

  ma.lock();
  EXPECT_FALSE(mb.try_lock());          // busy at once
  EXPECT_FALSE(mb.try_lock_for(50ms));  // busy after waiting
  std::stop_source stop;
  std::thread canceller{[&] {
    std::this_thread::sleep_for(50ms);
    stop.request_stop();
  }};
  std::error_code ec;
  mb.lock(stop.get_token(), ec);  // cancelled
  canceller.join();
  EXPECT_TRUE(ec);

  std::thread waiter{[&] {
    mb.lock();  // woken by ma's release: a hand-off
    mb.unlock();
  }};
  std::this_thread::sleep_for(150ms);
  ma.unlock();
  waiter.join();

  const auto m = b.metrics();
  EXPECT_EQ(outcome(m, sync_kind::mutex, acquire_outcome::acquired), 1u);
  EXPECT_EQ(outcome(m, sync_kind::mutex, acquire_outcome::busy), 2u);
  EXPECT_EQ(outcome(m, sync_kind::mutex, acquire_outcome::cancelled), 1u);
  EXPECT_EQ(outcome(m, sync_kind::mutex, acquire_outcome::failed), 0u);
  const auto& mx = m.of(sync_kind::mutex);
  EXPECT_EQ(mx.wait.count, 4u);
  EXPECT_GE(mx.wait.sum, 0.05 + 0.05 + 0.15);  // the two waits and the hand-off's wait
  EXPECT_EQ(mx.handoff.count, 1u);
  EXPECT_LT(mx.handoff.sum, 0.15);  // from the release message, not from the call
  EXPECT_EQ(mx.hold.count, 1u);
  std::uint64_t in_buckets = 0;
  for (auto n : mx.wait.buckets) in_buckets += n;
  EXPECT_EQ(in_buckets, mx.wait.count);

  const auto ma_m = a.metrics();
  EXPECT_EQ(ma_m.of(sync_kind::mutex).acquired(), 1u);
  EXPECT_EQ(ma_m.of(sync_kind::mutex).hold.count, 1u);
  EXPECT_GE(ma_m.of(sync_kind::mutex).hold.sum, 0.15);
  EXPECT_EQ(ma_m.of(sync_kind::fair_mutex).acquired(), 0u);
  EXPECT_GT(ma_m.commands_sent, 2u);
}

TEST(metrics, count_renewals_and_a_lease_deleted_under_its_holder) {
  dlock::test::redis_server srv;
  event_log log;
  auto cfg = dlock::test::config_for(srv, "watchdog=300ms");
  log.attach(cfg);
  dlock::client c{cfg};
  const auto name = dlock::test::unique_name("lost");
  auto lease = dlock::mutex{c, name}.async_lock(asio::use_future).get();
  std::this_thread::sleep_for(400ms);  // renewed every 100 ms
  c.execute({"DEL", name});
  ASSERT_TRUE(log.wait_for(event_type::lease_lost, 2s));
  EXPECT_TRUE(lease.lost().stop_requested());

  const auto m = c.metrics();
  const auto& mx = m.of(sync_kind::mutex);
  EXPECT_GE(mx.renewals_sent, 3u);
  EXPECT_EQ(mx.renewals_failed, 0u);
  EXPECT_EQ(mx.leases_lost[static_cast<std::size_t>(dlock::loss_cause::not_held)], 1u);
  EXPECT_EQ(mx.lost(), 1u);
  EXPECT_EQ(mx.hold.count, 1u);  // the hold ended with its loss
  const auto lost = log.of(event_type::lease_lost);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].name, name);
  EXPECT_EQ(lost[0].cause, dlock::loss_cause::not_held);
  EXPECT_NE(lost[0].message.find(name), std::string::npos);

  std::error_code ec;
  lease.unlock(ec);
  EXPECT_EQ(ec, errc::lease_lost);
  EXPECT_EQ(c.metrics().of(sync_kind::mutex).lost(), 1u);  // counted once
}

TEST(metrics, a_lease_whose_renewals_cannot_get_through_is_at_risk_then_lost) {
  dlock::test::redis_server srv;
  dlock::test::tcp_proxy proxy{srv.port()};
  event_log log;
  auto cfg = dlock::config::from_uri("redis://127.0.0.1:" + std::to_string(proxy.port()) +
                                     "?watchdog=600ms&timeout=100ms");
  log.attach(cfg);
  dlock::client c{cfg};
  auto lease = dlock::mutex{c, dlock::test::unique_name("risk")}.async_lock(asio::use_future).get();
  proxy.blackhole(dlock::test::direction::both);
  ASSERT_TRUE(log.wait_for(event_type::lease_at_risk, 2s));
  ASSERT_TRUE(log.wait_for(event_type::lease_lost, 2s));
  const auto lost = log.of(event_type::lease_lost);
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].cause, dlock::loss_cause::unconfirmed);
  const auto risk = log.of(event_type::lease_at_risk);
  EXPECT_TRUE(risk[0].error) << risk[0].message;
  const auto m = c.metrics();
  EXPECT_GE(m.of(sync_kind::mutex).renewals_failed, 1u);
  EXPECT_EQ(m.of(sync_kind::mutex).leases_lost[1], 1u);
  EXPECT_GE(m.errors_of(errc::timeout), 1u);
  proxy.pass();
}

TEST(metrics, count_connections_lost_and_reestablished_and_errors_by_errc) {
  dlock::test::redis_server srv;
  event_log log;
  auto cfg = dlock::test::config_for(srv);
  log.attach(cfg);
  dlock::client c{cfg};
  c.ping();
  const auto key = dlock::test::unique_name("s");
  c.execute({"SET", key, "v"});
  std::error_code ec;
  c.execute({"HSET", key, "f", "1"}, ec);
  EXPECT_EQ(ec, errc::wrong_type);
  c.execute({"NOSUCHCOMMAND"}, ec);
  EXPECT_EQ(ec, errc::server_error);

  srv.command({"CLIENT", "KILL", "TYPE", "normal"});
  ASSERT_TRUE(log.wait_for(event_type::reconnected, 3s));
  c.ping();
  const auto m = c.metrics();
  EXPECT_GE(m.disconnects, 1u);
  EXPECT_GE(m.reconnects, 1u);
  EXPECT_EQ(m.errors_of(errc::wrong_type), 1u);
  EXPECT_EQ(m.errors_of(errc::server_error), 1u);
  EXPECT_EQ(m.errors_of(errc::timeout), 0u);
  const auto down = log.of(event_type::disconnected);
  ASSERT_FALSE(down.empty());
  EXPECT_EQ(down[0].node, "127.0.0.1:" + std::to_string(srv.port()));
  EXPECT_TRUE(down[0].error);
}

TEST(events, a_warning_is_an_event_and_a_throwing_callback_is_contained) {
  dlock::test::redis_server_options opts;
  opts.extra_args = {"--maxmemory-policy", "allkeys-lru"};
  dlock::test::redis_server srv{opts};
  event_log log;
  auto cfg = dlock::test::config_for(srv);
  log.attach(cfg);
  dlock::client c{cfg};
  c.ping();
  ASSERT_TRUE(log.wait_for(event_type::warning, 3s));
  EXPECT_NE(log.of(event_type::warning)[0].message.find("allkeys-lru"), std::string::npos);

  auto cfg2 = dlock::test::config_for(srv);
  cfg2.on_event = [](const dlock::event&) { throw std::runtime_error{"bad sink"}; };
  dlock::client c2{cfg2};
  dlock::mutex m{c2, dlock::test::unique_name("t")};
  m.lock();  // the warning's event threw on the I/O thread; the client goes on
  m.unlock();
}

}  // namespace metrics_events
