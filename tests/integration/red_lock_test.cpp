// dlock::red_lock against 3 and 5 independent redis-servers: a majority acquires, a minority
// does not; a dead or stopped server costs a round its attempt timeout; the quorum's fencing
// token is written back as a floor, so a later quorum that misses the server holding the maximum
// still issues a larger token; the lease is lost when fewer than a majority are still held.
#include "dlock/red_lock.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "dlock/keys.hpp"
#include "support/redis_server.hpp"
#include "test_util.hpp"

using namespace std::chrono_literals;
using dlock::errc;

namespace red_lock_tests {

using namespace dlock::test;
using steady = std::chrono::steady_clock;

// N servers and one client for each.
struct fleet {
  explicit fleet(std::size_t n, const std::string& params = "") {
    for (std::size_t i = 0; i < n; ++i) {
      servers.push_back(std::make_unique<redis_server>());
      clients.push_back(std::make_unique<dlock::client>(config_for(*servers.back(), params)));
    }
  }
  std::vector<std::reference_wrapper<dlock::client>> refs() {
    std::vector<std::reference_wrapper<dlock::client>> out;
    for (auto& c : clients) out.emplace_back(*c);
    return out;
  }
  int holding(const std::string& name) {
    int n = 0;
    for (auto& s : servers) {
      if (s->running() && !s->paused() && s->command({"EXISTS", name}) == ":1") ++n;
    }
    return n;
  }
  std::vector<std::unique_ptr<redis_server>> servers;
  std::vector<std::unique_ptr<dlock::client>> clients;
};

TEST(red_lock, holds_the_name_on_every_server_and_excludes_another_red_lock) {
  for (std::size_t n : {3u, 5u}) {
    fleet f{n};
    const auto name = unique_name("red");
    dlock::red_lock a{f.refs(), name};
    ASSERT_TRUE(a.try_lock_for(2s)) << n;
    // Every server, unless one answered later than the round allows stragglers (a loaded CI).
    EXPECT_GE(f.holding(name), static_cast<int>(n / 2 + 1));
    EXPECT_GT(a.fencing_token(), 0u);
    EXPECT_GT(a.lease_time_left(), 25s);
    // Another process's red_lock (its own clients) is refused while held.
    std::vector<std::unique_ptr<dlock::client>> cs;
    std::vector<std::reference_wrapper<dlock::client>> refs;
    for (auto& s : f.servers) {
      cs.push_back(std::make_unique<dlock::client>(config_for(*s)));
      refs.emplace_back(*cs.back());
    }
    dlock::red_lock b{refs, name};
    const int held = f.holding(name);
    EXPECT_FALSE(b.try_lock_for(200ms));
    // (What b's failed rounds took goes back in the background.)
    EXPECT_TRUE(wait_until([&] { return f.holding(name) == held; }, 2s))
        << "b's failed rounds kept nothing";
    a.unlock();  // returns once a majority released; the rest follow at once
    EXPECT_TRUE(wait_until([&] { return f.holding(name) == 0; }, 2s));
    EXPECT_TRUE(b.try_lock_for(2s));
    b.unlock();
  }
}

TEST(red_lock, a_majority_suffices_and_a_minority_does_not) {
  fleet f{5};
  const auto name = unique_name("quorum");
  dlock::red_lock r{f.refs(), name};
  f.servers[0]->kill9();
  f.servers[1]->kill9();
  const auto start = steady::now();
  ASSERT_TRUE(r.try_lock_for(3s)) << "three of five";
  EXPECT_LT(steady::now() - start, 1s) << "dead servers cost a refused connection, not a wait";
  EXPECT_EQ(f.holding(name), 3);
  EXPECT_GT(r.lease_time_left(), 25s);
  r.unlock();
  f.servers[2]->kill9();
  // Refused connections surface after connect_timeout (2 s): within 300 ms the round is merely
  // unanswered, and the caller's deadline is kept.
  const auto second = steady::now();
  EXPECT_FALSE(r.try_lock_for(300ms));
  EXPECT_LT(steady::now() - second, 1s);
  EXPECT_TRUE(wait_until([&] { return f.holding(name) == 0; }, 2s))
      << "what the minority took went back";
  std::error_code ec;
  EXPECT_FALSE(r.try_lock_for(3s, ec));
  EXPECT_EQ(ec, errc::connection_refused) << "an unreachable majority is an error at the deadline";
}

TEST(red_lock, a_stopped_server_costs_a_round_its_attempt_timeout) {
  fleet f{3};
  const auto name = unique_name("stopped");
  dlock::red_lock r{f.refs(), name};
  ASSERT_TRUE(r.try_lock_for(2s, 2s));  // connect everything first
  r.unlock();
  f.servers[2]->pause();
  const auto start = steady::now();
  // A 2 s lease: each attempt may take a tenth of it.
  ASSERT_TRUE(r.try_lock_for(5s, 2s));
  const auto took = steady::now() - start;
  EXPECT_LT(took, 1500ms);
  EXPECT_GT(r.lease_time_left(), 500ms);
  r.unlock();
  // Held on all three, then one stops: the unlock returns once a majority released.
  f.servers[2]->resume();
  ASSERT_TRUE(r.try_lock_for(5s, 2s));
  f.servers[2]->pause();
  const auto unlocking = steady::now();
  r.unlock();
  EXPECT_LT(steady::now() - unlocking, 1s) << "not the stopped server's command timeout";
  f.servers[2]->resume();
}

TEST(red_lock, the_quorum_token_is_written_back_so_a_later_quorum_issues_a_larger_one) {
  fleet f{3};
  const auto name = unique_name("floor");
  const auto counter = dlock::keys::slot_fencing_counter_of(name);
  // Server 2's counter is far ahead of the clocks the others' tokens come from.
  const std::string ahead = "5000000000000000";
  f.servers[2]->command({"SET", counter, ahead});
  dlock::red_lock r{f.refs(), name};
  ASSERT_TRUE(r.try_lock_for(2s));
  const auto first = r.fencing_token();
  EXPECT_GT(first, 5000000000000000u);
  int floored = 0;
  for (auto& s : f.servers) {
    if (std::stoull(s->command({"GET", counter})) >= first) ++floored;
  }
  EXPECT_GE(floored, 2) << "the floor reached the quorum";
  r.unlock();
  // The next quorum misses server 2.
  f.servers[2]->kill9();
  ASSERT_TRUE(r.try_lock_for(2s));
  EXPECT_GT(r.fencing_token(), first);
  r.unlock();
}

TEST(red_lock, is_lost_when_fewer_than_a_majority_are_still_held) {
  fleet f{3, "watchdog=3s"};  // renewed every second
  const auto name = unique_name("lost");
  dlock::red_lock r{f.refs(), name};
  // Held on all three (a server answering after the majority, plus as long again, is released:
  // on a loaded machine that can happen, so try again).
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(r.try_lock_for(2s));
    if (f.holding(name) == 3) break;
    r.unlock();
  }
  ASSERT_EQ(f.holding(name), 3);
  const auto lost = r.lease_lost();
  f.servers[0]->command({"DEL", name});
  std::this_thread::sleep_for(2500ms);  // two renewals
  EXPECT_FALSE(lost.stop_requested()) << "two of three still hold it";
  EXPECT_GT(r.lease_time_left(), 0ms);
  f.servers[1]->command({"DEL", name});
  EXPECT_TRUE(wait_until([&] { return lost.stop_requested(); }, 5s));
  EXPECT_EQ(r.lease_time_left(), 0ms);
  std::error_code ec;
  r.unlock(ec);
  EXPECT_EQ(ec, errc::lease_lost);
  EXPECT_EQ(f.holding(name), 0) << "the member still held was released";
}

TEST(red_lock, contenders_in_many_threads_never_overlap) {
  fleet f{3};
  const auto name = unique_name("contend");
  std::atomic<int> inside{0}, overlaps{0}, acquired{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      std::vector<std::unique_ptr<dlock::client>> cs;
      std::vector<std::reference_wrapper<dlock::client>> refs;
      for (auto& s : f.servers) {
        cs.push_back(std::make_unique<dlock::client>(config_for(*s)));
        refs.emplace_back(*cs.back());
      }
      dlock::red_lock r{refs, name};
      for (int i = 0; i < 10; ++i) {
        if (!r.try_lock_for(20s)) continue;
        ++acquired;
        if (inside.fetch_add(1) != 0) ++overlaps;
        std::this_thread::sleep_for(2ms);
        inside.fetch_sub(1);
        r.unlock();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(acquired.load(), 40);
  EXPECT_EQ(overlaps.load(), 0);
}

TEST(red_lock, bad_input_is_a_typed_error) {
  fleet f{2};
  std::error_code ec;
  dlock::red_lock none{std::vector<std::reference_wrapper<dlock::client>>{}, "x"};
  EXPECT_FALSE(none.try_lock(ec));
  EXPECT_EQ(ec, errc::invalid_argument);
  dlock::red_lock twice{{*f.clients[0], *f.clients[0]}, "x"};
  EXPECT_FALSE(twice.try_lock(ec));
  EXPECT_EQ(ec, errc::invalid_argument);
  dlock::red_lock unnamed{f.refs(), ""};
  EXPECT_FALSE(unnamed.try_lock(ec));
  EXPECT_EQ(ec, errc::invalid_argument);
  dlock::red_lock two{f.refs(), unique_name("two")};
  EXPECT_FALSE(two.try_lock_for(1s, 0ms, ec));
  EXPECT_EQ(ec, errc::invalid_argument);
  // Two servers: a majority is both.
  f.servers[1]->kill9();
  EXPECT_FALSE(two.try_lock_for(3s, ec));
  EXPECT_EQ(ec, errc::connection_refused);
}

}  // namespace red_lock_tests
