// tools/dlock/status_scan.cpp without a server: which name a key found by SCAN stands for (every
// key keys.hpp derives from a name, for names with and without a hash tag of their own), and
// which SCAN MATCH patterns `dlock status --metrics` refuses.
#include "../../tools/dlock/status_scan.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "dlock/keys.hpp"

namespace status_scan_test {

using dlock_cli::name_of_key;
using dlock_cli::pattern_error;
namespace keys = dlock::keys;

const std::string owner = "0b9f4a2c-5d1e-4f3a-9c7b-2e8d6f1a3b5c:7";

class names : public testing::TestWithParam<std::string> {};

TEST_P(names, a_name_and_its_queues_stand_for_the_name) {
  const auto& n = GetParam();
  EXPECT_EQ(name_of_key(n), n);
  EXPECT_EQ(name_of_key(keys::fair_queue(n)), n);
  EXPECT_EQ(name_of_key(keys::waiter_queue(n)), n);
  EXPECT_EQ(name_of_key(keys::permit_timeouts(n)), n);
  EXPECT_EQ(name_of_key(keys::waiting_writers(n)), n);
}

TEST_P(names, the_keys_kept_beside_a_name_stand_for_nothing) {
  const auto& n = GetParam();
  for (const auto& key :
       {keys::fair_timeouts(n), keys::waiter_records(n), keys::holder_info(n),
        keys::fencing_counter(n), keys::slot_fencing_counter_of(n), keys::yield_marker(n),
        keys::counting_marker(n, owner), keys::read_hold_key(n, owner, 1),
        keys::read_hold_key(n, owner + ":write", 12)}) {
    EXPECT_EQ(name_of_key(key), std::nullopt) << key;
  }
}

INSTANTIATE_TEST_SUITE_P(status_scan, names,
                         testing::Values("orders:42", "{orders}:42", "a{b}c", "timeout",
                                         "x:dlock_yield:y", "redisson_lock_queue"));

TEST(status_scan, keys_of_the_user_stand_for_themselves) {
  for (const std::string key : {"x:timeout", "x:dlock_yield", "jobs", "redisson_lock_queue:x",
                                "{unclosed", "a}b:timeout"}) {
    if (key == "redisson_lock_queue:x") {
      EXPECT_EQ(name_of_key(key), std::nullopt) << "a queue of no name dlock writes";
    } else {
      EXPECT_EQ(name_of_key(key), key);
    }
  }
}

TEST(status_scan, patterns) {
  for (const std::string ok : {"*", "orders:*", "a[bc]d", "a\\[", "[\\]]x", "a\\\\", "[^a]?"}) {
    EXPECT_EQ(pattern_error(ok), "") << ok;
  }
  for (const std::string bad : {"", "a[b", "a\\", "[\\]", "x[a\\]"}) {
    EXPECT_NE(pattern_error(bad), "") << bad;
  }
}

}  // namespace status_scan_test
