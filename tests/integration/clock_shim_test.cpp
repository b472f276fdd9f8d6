// The fake-clock shim (fake_clock.hpp, clock_shim.c) in a real redis-server: TIME and key expiry
// follow its steps and its rate, changed while the server runs. These are the faults the fault
// lab's clock scenarios (tests/faults/clock_fault_test.cpp) inject.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>

#include "support/fake_clock.hpp"
#include "support/redis_server.hpp"

using namespace std::chrono_literals;
using dlock::test::fake_clock;
using dlock::test::redis_server;

namespace {

std::int64_t to_ms(std::chrono::system_clock::duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

class clock_shim : public ::testing::Test {
 protected:
  // TIME in ms since the epoch (the reply renders as "[<seconds>, <microseconds>]").
  std::int64_t server_time_ms() const {
    const auto r = srv_.command({"TIME"});
    const auto comma = r.find(',');
    return std::stoll(r.substr(1, comma - 1)) * 1000 + std::stoll(r.substr(comma + 2)) / 1000;
  }
  static std::int64_t real_time_ms() {
    return to_ms(std::chrono::system_clock::now().time_since_epoch());
  }
  bool exists(const std::string& key) const { return srv_.command({"EXISTS", key}) == ":1"; }
  std::int64_t pttl(const std::string& key) const {
    return std::stoll(srv_.command({"PTTL", key}).substr(1));
  }

  fake_clock clock_;
  redis_server srv_{{.clock_file = clock_.path()}};
};

TEST_F(clock_shim, the_server_keeps_real_time_until_the_clock_is_changed) {
  const auto before = real_time_ms();
  const auto t = server_time_ms();
  EXPECT_GE(t, before - 5);  // TIME's and the clocks' granularity
  EXPECT_LE(t, real_time_ms() + 5);
}

TEST_F(clock_shim, time_jumps_by_a_step_and_comes_back_on_reset) {
  const auto t0 = server_time_ms();
  clock_.step(120s);
  const auto t1 = server_time_ms();
  EXPECT_GE(t1 - t0, 120'000);
  EXPECT_LE(t1 - t0, 125'000) << "a step of 120 s, plus the time between the two reads";
  clock_.reset();
  const auto t2 = server_time_ms();
  EXPECT_LE(t2 - real_time_ms(), 5);
  EXPECT_GE(t2 - t0, 0);
}

TEST_F(clock_shim, a_rate_change_keeps_the_time_continuous) {
  clock_.step(-1h);
  clock_.set_rate(1.5);
  const auto t0 = server_time_ms();
  std::this_thread::sleep_for(200ms);  // not ordering: lets the fast clock gain ~100 ms
  clock_.set_rate(1.0);
  const auto t1 = server_time_ms();
  EXPECT_GE(t1 - t0, 290) << "200 ms at 1.5x";
  EXPECT_LE(t1 - t0, 1000) << "no jump at the change";
  const auto gained = std::chrono::duration_cast<std::chrono::milliseconds>(clock_.offset());
  EXPECT_GE(gained.count(), -3'600'000 + 90);
  EXPECT_LE(gained.count(), -3'600'000 + 600);
  EXPECT_LE(std::abs(t1 - real_time_ms() - gained.count()), 10) << "the server sees offset()";
}

TEST_F(clock_shim, a_forward_step_expires_a_key_at_once) {
  ASSERT_EQ(srv_.command({"SET", "k", "v", "PX", "3000"}), "+OK");
  clock_.step(120s);
  EXPECT_FALSE(exists("k")) << "3 s left, 120 s passed on the server's clock";
  EXPECT_EQ(pttl("k"), -2);
  EXPECT_EQ(srv_.command({"DBSIZE"}), ":0");
}

TEST_F(clock_shim, a_backward_step_keeps_a_key_past_its_ttl) {
  ASSERT_EQ(srv_.command({"SET", "k", "v", "PX", "500"}), "+OK");
  clock_.step(-1h);
  const auto left = pttl("k");
  EXPECT_GE(left, 3'600'000);
  EXPECT_LE(left, 3'600'500);
  std::this_thread::sleep_for(800ms);  // not ordering: past the key's 500 ms in real time
  EXPECT_TRUE(exists("k")) << "the server's clock has an hour to go";
}

TEST_F(clock_shim, at_rate_one_and_a_half_a_3_s_key_expires_after_about_2_s) {
  clock_.set_rate(1.5);
  const auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(srv_.command({"SET", "k", "v", "PX", "3000"}), "+OK");
  ASSERT_TRUE(dlock::test::wait_until([&] { return !exists("k"); }, 5s));
  const auto took = std::chrono::steady_clock::now() - start;
  // 2 s by the formula; the bounds only tell 1.5x from 1x (a 3 s expiry), with load's slop.
  EXPECT_GE(took, 1900ms);
  EXPECT_LE(took, 2800ms);
  std::cout << "[ measured ] 3 s key at rate 1.5 expired after "
            << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms\n";
}

}  // namespace
