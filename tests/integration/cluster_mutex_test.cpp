// dlock::mutex on a real 3-master/3-replica Redis Cluster (support/redis_cluster.hpp), through a
// `redis+cluster://` URL: every call goes to the master of the lock's slot, waiting and hand-off
// use shard channels (SSUBSCRIBE/SPUBLISH), the watchdog renews one script per slot, and the
// client follows the slot map when it changes. No CROSSSLOT ever.
#include <gtest/gtest.h>

#include <asio/post.hpp>
#include <chrono>
#include <future>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "dlock/client.hpp"
#include "dlock/error.hpp"
#include "dlock/keys.hpp"
#include "dlock/mutex.hpp"
#include "runtime/client_access.hpp"
#include "runtime/client_impl.hpp"
#include "support/redis_cluster.hpp"
#include "test_util.hpp"

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

namespace {

dlock::config cluster_config(const dlock::test::redis_cluster& c, const std::string& extra = "") {
  auto cfg = dlock::config::from_uri(c.url() + (extra.empty() ? "" : "?" + extra));
  cfg.reconnect_min = 10ms;
  cfg.reconnect_max = 100ms;
  return cfg;
}

// One lock name per master: names whose slots each of the three masters serves.
std::vector<std::string> one_name_per_master(const dlock::test::redis_cluster& c) {
  std::map<std::size_t, std::string> by_master;
  const auto base = dlock::test::unique_name("cl");
  for (int i = 0; by_master.size() < c.masters().size() && i < 1000; ++i) {
    const auto name = base + ":" + std::to_string(i);
    by_master.try_emplace(c.master_of(dlock::keys::slot(name)), name);
  }
  std::vector<std::string> out;
  for (auto& [m, n] : by_master) out.push_back(n);
  return out;
}

class cluster_mutex : public testing::Test {
 protected:
  static void SetUpTestSuite() { cluster_ = new dlock::test::redis_cluster{}; }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void TearDown() override { EXPECT_EQ(cluster_->error_count("CROSSSLOT"), 0); }
  static dlock::test::redis_cluster* cluster_;
};
dlock::test::redis_cluster* cluster_mutex::cluster_ = nullptr;

TEST_F(cluster_mutex, locks_on_every_master_with_reentry_fencing_and_release) {
  auto& c = *cluster_;
  dlock::client client{cluster_config(c)};
  const auto names = one_name_per_master(c);
  ASSERT_EQ(names.size(), 3u);
  for (const auto& name : names) {
    dlock::mutex m{client, name};
    m.lock();
    const auto token = m.fencing_token();
    EXPECT_GT(token, 0u);
    m.lock();  // re-entry
    EXPECT_EQ(m.hold_count(), 2u);
    const auto slot = dlock::keys::slot(name);
    EXPECT_EQ(c.command_on_slot(slot, {"HLEN", name}), ":1") << "the hash is on the slot's master";
    EXPECT_TRUE(m.is_held_by_current_thread());
    m.unlock();
    m.unlock();
    EXPECT_EQ(c.command_on_slot(slot, {"EXISTS", name}), ":0");
    m.lock();
    EXPECT_GT(m.fencing_token(), token) << "tokens increase per name";
    m.unlock();
  }
  auto& impl = dlock::detail::client_access::impl(client);
  std::promise<std::size_t> masters;
  asio::post(impl.strand(), [&] { masters.set_value(impl.router().masters().size()); });
  EXPECT_EQ(masters.get_future().get(), 3u) << "the slot map was read";
}

TEST_F(cluster_mutex, a_waiter_in_another_client_is_handed_the_lock_over_shard_channels) {
  auto& c = *cluster_;
  for (const auto& name : one_name_per_master(c)) {
    dlock::client holder{cluster_config(c)}, waiter{cluster_config(c, "recheck=20s")};
    dlock::mutex h{holder, name}, w{waiter, name};
    h.lock();
    auto waiting = std::async(std::launch::async, [&] {
      const bool got = w.try_lock_for(15s);
      const auto at = steady::now();
      if (got) w.unlock();
      return std::pair{got, at};
    });
    const auto slot = dlock::keys::slot(name);
    const auto channel = dlock::keys::waiter_channel(name, waiter.id());
    ASSERT_TRUE(dlock::test::wait_until(
        [&] {
          return c.command_on_slot(slot, {"PUBSUB", "SHARDNUMSUB", channel}).find(":1]") !=
                 std::string::npos;
        },
        10s))
        << "the waiter listens on its shard channel at the slot's master";
    ASSERT_TRUE(dlock::test::wait_until(
        [&] {
          return c.command_on_slot(slot, {"ZCARD", dlock::keys::waiter_queue(name)}) == ":1";
        },
        10s));
    std::this_thread::sleep_for(50ms);  // its re-check after the confirmation is done
    const auto released = steady::now();
    h.unlock();
    ASSERT_EQ(waiting.wait_for(10s), std::future_status::ready);
    const auto [got, at] = waiting.get();
    EXPECT_TRUE(got);
    EXPECT_LT(at - released, 1s) << name << ": woken by the hand-off, not by its 20 s re-check";
  }
}

TEST_F(cluster_mutex, the_watchdog_renews_holds_on_every_slot) {
  auto& c = *cluster_;
  dlock::client client{cluster_config(c, "watchdog=900ms")};
  std::vector<std::unique_ptr<dlock::mutex>> held;
  for (const auto& name : one_name_per_master(c)) {
    held.push_back(std::make_unique<dlock::mutex>(client, name));
    held.back()->lock();
  }
  std::this_thread::sleep_for(2500ms);  // almost three leases
  for (auto& m : held) {
    EXPECT_FALSE(m->lease_lost().stop_requested());
    EXPECT_GT(m->remaining_lease().count(), 0);
    m->unlock();
  }
  EXPECT_GE(dlock::detail::client_access::impl(client).watchdog().renewals_sent(), 6u)
      << "one script per slot per period";
}

TEST_F(cluster_mutex, execute_goes_to_the_master_of_its_first_arguments_slot) {
  auto& c = *cluster_;
  dlock::client client{cluster_config(c)};
  for (const auto& name : one_name_per_master(c)) {
    EXPECT_EQ(client.execute({"SET", name, "v"}).str(), "OK");
    EXPECT_EQ(c.command_on_slot(dlock::keys::slot(name), {"GET", name}), "v");
    client.execute({"DEL", name});
  }
}

// A plain server named as a cluster: a typed error, not a hang.
TEST(cluster_config_errors, a_server_without_cluster_mode_is_refused) {
  dlock::test::redis_server srv;
  auto cfg = dlock::config::from_uri("redis+cluster://127.0.0.1:" + std::to_string(srv.port()) +
                                     "?timeout=1s");
  dlock::client client{cfg};
  dlock::mutex m{client, dlock::test::unique_name("plain")};
  std::error_code ec;
  ASSERT_TRUE(dlock::test::wait_until(
      [&] {
        m.try_lock_for(200ms, ec);
        return ec == dlock::errc::unsupported_server;
      },
      5s))
      << ec.message();
}

}  // namespace
