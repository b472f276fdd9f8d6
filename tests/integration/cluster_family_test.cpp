// dlock::fair_mutex, dlock::shared_mutex, the semaphores and the latch on a real 3-master Redis
// Cluster: every script and key on the name's slot master (names with and without their own hash
// tag), waiters woken on shard channels (a fair waiter's own channel, the read-write channel,
// redisson_sc, the latch's), renewals per slot. No CROSSSLOT ever.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "dlock/client.hpp"
#include "dlock/counting_semaphore.hpp"
#include "dlock/fair_mutex.hpp"
#include "dlock/keys.hpp"
#include "dlock/latch.hpp"
#include "dlock/leased_semaphore.hpp"
#include "dlock/multi_lock.hpp"
#include "dlock/script.hpp"
#include "dlock/shared_mutex.hpp"
#include "support/redis_cluster.hpp"
#include "test_util.hpp"

using namespace std::chrono_literals;

namespace cluster_family {

dlock::config family_cluster_config(const dlock::test::redis_cluster& c) {
  auto cfg = dlock::config::from_uri(c.url() + "?watchdog=1500ms");
  cfg.reconnect_min = 10ms;
  cfg.reconnect_max = 100ms;
  return cfg;
}

class on_cluster : public testing::Test {
 protected:
  static void SetUpTestSuite() { cluster_ = new dlock::test::redis_cluster{}; }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void TearDown() override { EXPECT_EQ(cluster_->error_count("CROSSSLOT"), 0); }
  static dlock::test::redis_cluster* cluster_;
};
dlock::test::redis_cluster* on_cluster::cluster_ = nullptr;

TEST_F(on_cluster, a_fair_waiter_is_woken_on_its_shard_channel) {
  auto& c = *cluster_;
  dlock::client a{family_cluster_config(c)}, b{family_cluster_config(c)};
  for (const auto& name :
       {dlock::test::unique_name("cf"), "jobs{" + dlock::test::unique_name("t") + "}x"}) {
    dlock::fair_mutex holder{a, name};
    holder.lock();
    const auto slot = dlock::keys::slot(name);
    auto waiter = std::async(std::launch::async, [&b, name] {
      dlock::fair_mutex m{b, name};
      const auto t = std::chrono::steady_clock::now();
      const bool got = m.try_lock_for(10s);
      const auto waited = std::chrono::steady_clock::now() - t;
      if (got) m.unlock();
      return std::pair{got, waited};
    });
    ASSERT_TRUE(dlock::test::wait_until(
        [&] {
          return c.command_on_slot(slot, {"LLEN", dlock::keys::fair_queue(name)}) == ":1";
        },
        5s))
        << name;
    std::this_thread::sleep_for(2s);  // a renewal or two on the slot's master
    EXPECT_FALSE(holder.lease_lost().stop_requested());
    holder.unlock();
    const auto [got, waited] = waiter.get();
    EXPECT_TRUE(got) << name;
    EXPECT_LT(waited, 4s) << "woken by the unlock, not by a re-check";
    EXPECT_EQ(c.command_on_slot(slot, {"EXISTS", name}), ":0");
  }
}

TEST_F(on_cluster, read_holds_renew_and_a_writer_is_woken_on_the_shard_channel) {
  auto& c = *cluster_;
  dlock::client a{family_cluster_config(c)}, b{family_cluster_config(c)};
  const auto name = dlock::test::unique_name("crw");
  const auto slot = dlock::keys::slot(name);
  dlock::shared_mutex reader{a, name};
  reader.lock_shared();
  reader.lock_shared();
  auto writer = std::async(std::launch::async, [&b, name] {
    dlock::shared_mutex w{b, name};
    const bool got = w.try_lock_for(15s);
    if (got) w.unlock();
    return got;
  });
  std::this_thread::sleep_for(3s);  // two renewal periods: the hold keys must be renewed
  EXPECT_FALSE(reader.read_side().lease_lost().stop_requested());
  EXPECT_EQ(c.command_on_slot(slot, {"HGET", name, "mode"}), "read");
  EXPECT_EQ(c.command_on_slot(slot, {"ZCARD", dlock::keys::waiting_writers(name)}), ":1");
  reader.unlock_shared();
  reader.unlock_shared();
  EXPECT_TRUE(writer.get());
  EXPECT_EQ(c.command_on_slot(slot, {"EXISTS", name}), ":0");
}

// Permits on the slot's master, renewed there, and a waiter woken on the shard channel
// redisson_sc:{name} by a release (the re-check is 3 s).
TEST_F(on_cluster, permits_renew_on_the_slot_master_and_wake_waiters_on_its_shard) {
  auto& c = *cluster_;
  dlock::client a{family_cluster_config(c)}, b{family_cluster_config(c)};
  for (const auto& name :
       {dlock::test::unique_name("cs"), "jobs{" + dlock::test::unique_name("t") + "}x"}) {
    dlock::leased_semaphore sa{a, name}, sb{b, name};
    ASSERT_TRUE(sa.try_set_permits(1)) << name;
    auto held = sa.acquire();
    const auto slot = dlock::keys::slot(name);
    EXPECT_EQ(c.command_on_slot(slot, {"ZCARD", dlock::keys::permit_timeouts(name)}), ":1");
    auto waiter = std::async(std::launch::async, [&sb] {
      const auto t = std::chrono::steady_clock::now();
      auto p = sb.try_acquire_for(10s);
      return std::pair{p.count(), std::chrono::steady_clock::now() - t};
    });
    std::this_thread::sleep_for(2s);  // past the 1.5 s watchdog lease: renewed on the master
    EXPECT_FALSE(held.lost().stop_requested()) << name;
    held.release();
    const auto [got, waited] = waiter.get();
    EXPECT_EQ(got, 1u) << name;
    EXPECT_LT(waited, 4500ms) << "woken by the release on the shard channel";
    // The waiter's permit went back in the background as it went out of scope.
    EXPECT_TRUE(dlock::test::wait_until([&] { return sa.available() == 1; }, 5s)) << name;
  }
}

TEST_F(on_cluster, counting_permits_and_a_latch_wake_on_shard_channels) {
  auto& c = *cluster_;
  dlock::client a{family_cluster_config(c)}, b{family_cluster_config(c)};
  const auto name = dlock::test::unique_name("cc");
  dlock::counting_semaphore sa{a, name}, sb{b, name};
  sa.try_set_permits(0);
  auto taker = std::async(std::launch::async, [&sb] { return sb.try_acquire_for(10s); });
  std::this_thread::sleep_for(500ms);
  const auto released = std::chrono::steady_clock::now();
  sa.release();
  EXPECT_TRUE(taker.get());
  EXPECT_LT(std::chrono::steady_clock::now() - released, 2500ms);
  const auto latch_name = dlock::test::unique_name("cl");
  dlock::latch la{a, latch_name}, lb{b, latch_name};
  ASSERT_TRUE(la.try_set_count(1));
  auto waiter = std::async(std::launch::async, [&lb] { return lb.wait_for(10s); });
  std::this_thread::sleep_for(500ms);
  const auto opened = std::chrono::steady_clock::now();
  la.count_down();
  EXPECT_TRUE(waiter.get());
  EXPECT_LT(std::chrono::steady_clock::now() - opened, 2500ms);
  // The latch channel wraps the raw name in braces: a tagged name's channel hashes elsewhere.
  dlock::latch tagged{a, "batch{" + dlock::test::unique_name("t") + "}"};
  std::error_code ec;
  EXPECT_FALSE(tagged.try_set_count(1, ec));
  EXPECT_EQ(ec, dlock::errc::invalid_argument);
  EXPECT_FALSE(tagged.try_wait(ec));
  EXPECT_EQ(ec, dlock::errc::invalid_argument);
}

TEST_F(on_cluster, a_multi_lock_takes_one_slots_members_in_one_script_and_the_others_at_once) {
  auto& c = *cluster_;
  dlock::client a{family_cluster_config(c)}, b{family_cluster_config(c)};
  const auto tag = dlock::test::unique_name("t");
  const std::vector<std::string> names{"a{" + tag + "}", "b{" + tag + "}",
                                       dlock::test::unique_name("x"),
                                       dlock::test::unique_name("y")};
  std::vector<std::unique_ptr<dlock::mutex>> ms;
  std::vector<std::reference_wrapper<dlock::mutex>> refs;
  for (const auto& n : names) {
    ms.push_back(std::make_unique<dlock::mutex>(a, n));
    refs.emplace_back(*ms.back());
  }
  dlock::multi_lock all{refs};
  ASSERT_TRUE(all.try_lock_for(5s));  // loads the script where it runs
  all.unlock();
  auto scripts_run = [&] {
    long long n = 0;
    for (const auto& node : c.nodes()) {
      n += dlock::test::command_stat(*node, "evalsha") + dlock::test::command_stat(*node, "eval");
    }
    return n;
  };
  const auto before = scripts_run();
  ASSERT_TRUE(all.try_lock_for(5s));
  EXPECT_EQ(scripts_run() - before, 3) << "three slots, three scripts";
  for (const auto& n : names) {
    EXPECT_EQ(c.command_on_slot(dlock::keys::slot(n), {"HLEN", n}), ":1") << n;
  }
  const auto tokens = all.fencing_tokens();
  EXPECT_LT(tokens[0], tokens[1]) << "one script issues its tokens in order";
  // A member held elsewhere: nothing of the others stays taken.
  all.unlock();
  dlock::mutex y{b, names[3]};
  y.lock();
  EXPECT_FALSE(all.try_lock_for(300ms));
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(dlock::test::wait_until(
        [&] {
          return c.command_on_slot(dlock::keys::slot(names[i]), {"EXISTS", names[i]}) == ":0";
        },
        2s))
        << names[i];
  }
  y.unlock();
}

TEST_F(on_cluster, a_user_script_runs_on_its_keys_slot_master_and_cross_slot_keys_are_refused) {
  dlock::client c{family_cluster_config(*cluster_)};
  const dlock::script incr{"return redis.call('INCRBY', KEYS[1], ARGV[1])"};
  for (int i = 0; i < 6; ++i) {  // tags land on every master
    const auto tag = dlock::test::unique_name("us");
    EXPECT_EQ(c.eval(incr, {tag}, {"2"}).integer(), 2);
    EXPECT_EQ(c.eval(incr, {"{" + tag + "}:n", "{" + tag + "}:x"}, {"1"}).integer(), 1);
  }
  std::error_code ec;
  c.eval(incr, {"a", "b"}, {"1"}, ec);  // slots 15495 and 3300
  EXPECT_EQ(ec, dlock::errc::cross_slot);
}

}  // namespace cluster_family
