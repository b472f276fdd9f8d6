// A master with one replica behind a loopback proxy the test controls, and the WAIT policy of
// config::wait_replicas / on_shortfall on every write: with replication healthy an acquisition
// is acknowledged; with it blocked, `fail` reports errc::no_replicas and leaves no key behind,
// `accept` keeps the lock and marks the lease unreplicated; a renewal that falls short does not
// extend the trust under `fail` (the lease is reported lost when it runs out); a re-entry is
// checked too; `auto` follows the replicas online; and what a shortfall costs the client's other
// commands is measured.
#include <gtest/gtest.h>

#include <asio/use_future.hpp>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "../integration/test_util.hpp"
#include "dlock/mutex.hpp"
#include "measured.hpp"
#include "support/async_code.hpp"
#include "support/redis_server.hpp"
#include "support/tcp_proxy.hpp"

namespace {

using namespace std::chrono_literals;
using dlock::errc;
using dlock::test::direction;
using steady = std::chrono::steady_clock;

long long ms_since(steady::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(steady::now() - start).count();
}

struct replicated : ::testing::Test {
  dlock::test::redis_server master;
  dlock::test::tcp_proxy link{master.port()};  // the replica's link to its master
  dlock::test::redis_server replica{
      {.extra_args = {"--replicaof", "127.0.0.1", std::to_string(link.port())}}};

  void SetUp() override {
    ASSERT_TRUE(dlock::test::wait_until(
        [&] {
          return replica.command({"INFO", "replication"}).find("master_link_status:up") !=
                 std::string::npos;
        },
        10s))
        << replica.command({"INFO", "replication"});
  }
  dlock::config cfg(const std::string& policy) {
    return dlock::config::from_uri(master.url() +
                                   "?wait_replicas=1&wait_timeout=300ms&on_shortfall=" + policy);
  }
};

TEST_F(replicated, a_healthy_replica_acknowledges_every_acquisition) {
  dlock::client c{cfg("fail")};
  const auto name = dlock::test::unique_name("lock");
  dlock::mutex m{c, name};
  const auto start = steady::now();
  ASSERT_TRUE(m.try_lock_for(2s));
  const auto took = ms_since(start);
  EXPECT_TRUE(m.lease_replicated());
  const bool on_replica = replica.command({"EXISTS", name}) == ":1";
  EXPECT_TRUE(on_replica) << "WAIT returned: the replica has it";
  dlock::faults::measured("healthy replica, wait_replicas=1: acquired in " + std::to_string(took) +
                          " ms, lease " + (m.lease_replicated() ? "replicated" : "unreplicated") +
                          ", key on the replica: " + (on_replica ? "yes" : "no"));
  m.unlock();
  auto l = m.async_lock(asio::use_future).get();
  EXPECT_TRUE(l.replicated());
  l.unlock();
}

TEST_F(replicated, fail_policy_reports_no_replicas_and_leaves_no_key_when_replication_is_blocked) {
  dlock::client c{cfg("fail")};
  const auto name = dlock::test::unique_name("lock");
  dlock::mutex m{c, name};
  link.pause(direction::both);  // replication stalls (bytes held, delivered on pass())
  std::error_code ec;
  const auto start = steady::now();
  EXPECT_FALSE(m.try_lock_for(2s, ec));
  const auto took = steady::now() - start;
  EXPECT_EQ(ec, errc::no_replicas) << ec.message();
  EXPECT_GE(took, 300ms) << "WAIT's timeout";
  EXPECT_LT(took, 2s);
  // Given back in the background (the call returns by its deadline): gone within moments.
  const auto returned = steady::now();
  EXPECT_TRUE(dlock::test::wait_until(
      [&] {
        return master.command({"EXISTS", name}) == ":0";
      },
      2s))
      << "given back";
  dlock::faults::measured(
      "replication paused, on_shortfall=fail, wait_timeout 300 ms: try_lock_for(2 s) reported '" +
      ec.message() + "' after " +
      std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(took).count()) +
      " ms; the key gone from the master " + std::to_string(ms_since(returned)) +
      " ms after the return");
  EXPECT_FALSE(m.lease_replicated());
  // The give-back's own unlock message must not wake the failed op into taking it again.
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(master.command({"EXISTS", name}), ":0")
      << "and not taken again behind the caller's back";
  auto f = dlock::test::async_code([&](auto h) { m.async_lock_for(2s, std::move(h)); });
  EXPECT_EQ(f.get(), errc::no_replicas);
  EXPECT_TRUE(dlock::test::wait_until(
      [&] {
        return master.command({"EXISTS", name}) == ":0";
      },
      2s));
  // Healed: acquisitions are acknowledged again.
  link.pass();
  ASSERT_TRUE(dlock::test::wait_until(
      [&] {
        return replica.command({"INFO", "replication"}).find("master_link_status:up") !=
               std::string::npos;
      },
      10s));
  ASSERT_TRUE(m.try_lock_for(5s, ec)) << ec.message();
  EXPECT_TRUE(m.lease_replicated());
  m.unlock();
}

TEST_F(replicated, accept_policy_keeps_the_lock_and_marks_the_lease_unreplicated) {
  dlock::client c{cfg("accept")};
  const auto name = dlock::test::unique_name("lock");
  dlock::mutex m{c, name};
  link.pause(direction::both);  // replication stalls (bytes held, delivered on pass())
  const auto start = steady::now();
  ASSERT_TRUE(m.try_lock_for(2s));
  dlock::faults::measured(
      "replication paused, on_shortfall=accept, wait_timeout 300 ms: acquired after " +
      std::to_string(ms_since(start)) + " ms, lease " +
      (m.lease_replicated() ? "replicated" : "unreplicated"));
  EXPECT_FALSE(m.lease_replicated()) << "held, but a failover now could lose it";
  EXPECT_GT(m.fencing_token(), 0u);
  EXPECT_EQ(master.command({"EXISTS", name}), ":1");
  m.unlock();
  EXPECT_EQ(master.command({"EXISTS", name}), ":0");
}

// Renewals go through WAIT too: under `fail` a renewal the replica did not acknowledge leaves
// the trust where the last acknowledged write put it, so the hold is reported lost when that
// runs out (about two thirds of a lease after the block), not kept on a master alone.
TEST_F(replicated, a_renewal_short_of_replicas_does_not_extend_the_trust_under_fail) {
  dlock::client c{dlock::config::from_uri(
      master.url() + "?wait_replicas=1&wait_timeout=100ms&on_shortfall=fail&watchdog=900ms")};
  dlock::mutex m{c, dlock::test::unique_name("lock")};
  m.lock();
  ASSERT_TRUE(m.lease_replicated());
  const auto lost = m.lease_lost();
  std::this_thread::sleep_for(1s);  // renewals acknowledged: kept past the first lease
  ASSERT_FALSE(lost.stop_requested()) << "renewed while replication is healthy";
  const auto blocked = steady::now();
  link.pause(direction::both);
  EXPECT_TRUE(dlock::test::wait_until([&] { return lost.stop_requested(); }, 3s))
      << "trust not extended past what was replicated";
  const auto after = ms_since(blocked);
  EXPECT_FALSE(m.lease_replicated());
  dlock::faults::measured(
      "renewals short of replicas, on_shortfall=fail, watchdog 900 ms: lease "
      "reported lost " +
      std::to_string(after) + " ms after replication was blocked");
  std::error_code ec;
  m.unlock(ec);
  EXPECT_EQ(ec, errc::lease_lost);
}

TEST_F(replicated, a_renewal_short_of_replicas_keeps_the_hold_unreplicated_under_accept) {
  dlock::client c{dlock::config::from_uri(
      master.url() + "?wait_replicas=1&wait_timeout=100ms&on_shortfall=accept&watchdog=900ms")};
  dlock::mutex m{c, dlock::test::unique_name("lock")};
  m.lock();
  link.pause(direction::both);
  std::this_thread::sleep_for(2s);  // two leases: only renewals kept it
  EXPECT_FALSE(m.lease_lost().stop_requested());
  EXPECT_FALSE(m.lease_replicated());
  m.unlock();
}

// A re-entry rewrites the count and the lease: under `fail` a shortfall refuses the re-entry
// and leaves the first hold as it was.
TEST_F(replicated, a_reentry_short_of_replicas_is_refused_and_the_first_hold_stays) {
  dlock::client c{cfg("fail")};
  dlock::mutex m{c, dlock::test::unique_name("lock")};
  m.lock();
  link.pause(direction::both);
  std::error_code ec;
  EXPECT_FALSE(m.try_lock_for(2s, ec));
  EXPECT_EQ(ec, errc::no_replicas) << ec.message();
  EXPECT_TRUE(dlock::test::wait_until([&] { return m.hold_count() == 1; }, 2s))
      << "the re-entry given back, the first hold kept";
  link.pass();
  m.unlock();
  EXPECT_FALSE(m.is_locked());
}

// `auto` asks for the replicas online: one while it is attached; none once it is detached, so
// acquisitions are acknowledged at once instead of failing as a fixed count would.
TEST_F(replicated, auto_follows_the_replicas_online) {
  dlock::client c{dlock::config::from_uri(
      master.url() + "?wait_replicas=auto&wait_timeout=300ms&on_shortfall=fail")};
  dlock::mutex m{c, dlock::test::unique_name("lock")};
  ASSERT_TRUE(m.try_lock_for(2s));
  EXPECT_TRUE(m.lease_replicated());
  m.unlock();
  replica.command({"REPLICAOF", "NO", "ONE"});
  ASSERT_TRUE(dlock::test::wait_until(
      [&] {
        return master.command({"INFO", "replication"}).find("connected_slaves:0") !=
               std::string::npos;
      },
      5s));
  std::this_thread::sleep_for(1200ms);  // past replication::online_max_age
  std::error_code ec;
  bool ok = false;
  // The first WAIT after the count aged may still use it; the refresh it starts counts 0.
  for (int i = 0; i < 3 && !ok; ++i) ok = m.try_lock_for(2s, ec);
  ASSERT_TRUE(ok) << ec.message();
  EXPECT_TRUE(m.lease_replicated());
  m.unlock();
}

// WAIT holds the connection it runs on: while replicas fall short, the client's other commands
// queue behind it for up to wait_timeout. Measured with a PING beside failing acquisitions.
TEST_F(replicated, what_a_shortfall_costs_the_clients_other_commands) {
  dlock::client c{cfg("fail")};
  dlock::mutex busy{c, dlock::test::unique_name("lock")};
  link.pause(direction::both);
  std::atomic<bool> stop{false};
  std::thread writer{[&] {
    std::error_code ec;
    while (!stop) busy.try_lock_for(500ms, ec);
  }};
  std::this_thread::sleep_for(100ms);
  std::chrono::microseconds worst{0};
  for (int i = 0; i < 10; ++i) worst = std::max(worst, c.ping());
  stop = true;
  writer.join();
  EXPECT_LT(worst, 300ms + 1s) << "at most one WAIT ahead of it";
  dlock::faults::measured(
      "replication blocked, wait_timeout 300 ms: the slowest of 10 PINGs "
      "beside failing acquisitions took " +
      std::to_string(worst.count() / 1000) + " ms");
}

}  // namespace
