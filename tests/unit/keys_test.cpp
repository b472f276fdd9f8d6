// dlock::keys: cluster slots (the Redis Cluster spec's CRC16 and hash-tag rules), the per-slot
// fencing counters' names, and Redisson's prefix/suffix rule that keeps every key of a lock in
// the lock's slot.
#include "dlock/keys.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace {

namespace keys = dlock::keys;

// Every key and channel dlock derives from a lock name.
std::vector<std::string> derived(std::string_view name) {
  return {keys::lock_channel(name),
          keys::dlock_channel(name),
          keys::waiter_channel(name, "c1d2"),
          keys::waiter_queue(name),
          keys::waiter_records(name),
          keys::yield_marker(name),
          keys::slot_fencing_counter_of(name),
          keys::fencing_counter(name),
          keys::holder_info(name)};
}

// ---------------------------------------------------------------------------------------------
// slot: the Redis Cluster specification's examples (and CLUSTER KEYSLOT's documented answers)

TEST(keys_slot, crc16_xmodem_test_vector) {
  // The spec: CRC16 (XMODEM) of "123456789" is 0x31C3; the slot is it mod 16384.
  EXPECT_EQ(keys::slot("123456789"), 0x31C3 % 16384);
  EXPECT_EQ(keys::slot("123456789"), 12739);
}

TEST(keys_slot, cluster_keyslot_answers) {
  EXPECT_EQ(keys::slot("somekey"), 11058);
  EXPECT_EQ(keys::slot("foo{hash_tag}"), 2515);
  EXPECT_EQ(keys::slot("foo"), 12182);
  EXPECT_EQ(keys::slot("bar"), 5061);
  EXPECT_EQ(keys::slot(""), 0);
}

TEST(keys_slot, hash_tags) {
  EXPECT_EQ(keys::slot("{user1000}.following"), keys::slot("{user1000}.followers"));
  EXPECT_EQ(keys::slot("{user1000}.following"), keys::slot("user1000"));
  EXPECT_EQ(keys::slot("user1000"), 3443);
  // An empty tag: the whole key is hashed.
  EXPECT_EQ(keys::slot("foo{}{bar}"), 0xE0AB % 16384);
  EXPECT_NE(keys::slot("foo{}{bar}"), keys::slot("bar"));
  // The tag runs from the first `{` to the first `}` after it.
  EXPECT_EQ(keys::slot("foo{{bar}}zap"), keys::slot("{bar"));
  EXPECT_EQ(keys::slot("{bar"), 0xCFAF % 16384);
  EXPECT_EQ(keys::slot("foo{bar}{zap}"), keys::slot("bar"));
  // No closing brace, or a `}` before any `{`: the whole key.
  EXPECT_NE(keys::slot("foo{bar"), keys::slot("bar"));
  EXPECT_EQ(keys::slot("}{bar}"), keys::slot("bar"));
  EXPECT_EQ(keys::slot("a}b{bar}c"), keys::slot("bar"));
}

TEST(keys_slot, bytes_are_hashed_unsigned) {
  // High bytes must not sign-extend into the CRC (it is over bytes).
  const std::string high = "\xff\x80\xc3\xa9";
  EXPECT_LT(keys::slot(high), 16384);
  EXPECT_EQ(keys::slot(high), keys::slot("{" + high + "}"));
  EXPECT_EQ(keys::slot("\xff"), 0x1EF0 % 16384);  // CRC16-XMODEM of 0xFF
}

// ---------------------------------------------------------------------------------------------
// same_slot

TEST(keys_same_slot, plain_and_tagged_names_keep_every_key_in_their_slot) {
  for (std::string_view name :
       {"orders", "orders{42}", "{orders}", "a:b:c", "x}{y}", "lock with spaces", "é",
        "{user1000}.following", "foo{bar}{zap}", "foo{{bar}}zap"}) {
    EXPECT_TRUE(keys::same_slot(name)) << name;
    for (const auto& k : derived(name)) {
      EXPECT_EQ(keys::slot(k), keys::slot(name)) << name << " -> " << k;
    }
  }
}

TEST(keys_same_slot, names_whose_keys_would_scatter_are_refused) {
  for (std::string_view name : {"a{b", "x{}y", "a}b", "{", "}", "{}", "foo{}{bar}", ""}) {
    EXPECT_FALSE(keys::same_slot(name)) << name;
  }
}

// ---------------------------------------------------------------------------------------------
// Derived names: Redisson's layout

TEST(keys_names, redissons_prefix_and_suffix_rule) {
  EXPECT_EQ(keys::prefixed("p", "orders"), "p:{orders}");
  EXPECT_EQ(keys::prefixed("p", "orders{42}"), "p:orders{42}");
  EXPECT_EQ(keys::prefixed("p", "a{b"), "p:a{b") << "any `{` keeps the name as it is";
  EXPECT_EQ(keys::prefixed("p", "a}b"), "p:{a}b}");
  EXPECT_EQ(keys::suffixed("orders", "s"), "{orders}:s");
  EXPECT_EQ(keys::suffixed("orders{42}", "s"), "orders{42}:s");
  EXPECT_EQ(keys::suffixed("a}b", "s"), "{a}b}:s");
}

TEST(keys_names, the_layout_of_one_lock) {
  EXPECT_EQ(keys::lock_channel("orders"), "redisson_lock__channel:{orders}");
  EXPECT_EQ(keys::dlock_channel("orders"), "dlock_lock__channel:{orders}");
  EXPECT_EQ(keys::waiter_channel("orders", "c1d2"), "dlock_lock__channel:{orders}:c1d2");
  EXPECT_EQ(keys::waiter_queue("orders"), "dlock_lock_queue:{orders}");
  EXPECT_EQ(keys::waiter_records("orders"), "dlock_lock_records:{orders}");
  EXPECT_EQ(keys::yield_marker("orders"), "{orders}:dlock_yield");
  EXPECT_EQ(keys::fencing_counter("orders"), "redisson_lock_token:{orders}");
  EXPECT_EQ(keys::holder_info("orders"), "dlock_lock_info:{orders}");
  EXPECT_EQ(keys::lock_channel("orders{42}"), "redisson_lock__channel:orders{42}");
  EXPECT_EQ(keys::waiter_channel("orders{42}", "c"), "dlock_lock__channel:orders{42}:c");
  EXPECT_EQ(keys::yield_marker("orders{42}"), "orders{42}:dlock_yield");
  EXPECT_EQ(keys::unlock_message, "0");
  EXPECT_EQ(keys::read_unlock_message, "1");
}

// ---------------------------------------------------------------------------------------------
// Per-slot fencing counters

TEST(keys_slot_fencing_counter, every_slot_has_a_short_counter_in_that_slot) {
  std::unordered_set<std::string> seen;
  std::size_t longest = 0;
  for (std::uint32_t s = 0; s < 16384; ++s) {
    const auto slot = static_cast<std::uint16_t>(s);
    const auto counter = keys::slot_fencing_counter(slot);
    ASSERT_EQ(keys::slot(counter), slot) << counter;
    ASSERT_LE(counter.size(), 24u) << counter;
    ASSERT_TRUE(counter.starts_with("dlock_fencing:{") && counter.ends_with("}")) << counter;
    ASSERT_TRUE(seen.insert(counter).second) << "two slots share " << counter;
    longest = std::max(longest, counter.size());
  }
  EXPECT_EQ(seen.size(), 16384u);
  RecordProperty("longest_counter_name", static_cast<int>(longest));
}

// Every client (and every version that keeps this table) must name a slot's counter alike: the
// tag is the first string over [0-9a-z], shortest first, that hashes to the slot.
TEST(keys_slot_fencing_counter, names_are_deterministic) {
  EXPECT_EQ(keys::slot_fencing_counter(0), "dlock_fencing:{1bz}");
  EXPECT_EQ(keys::slot_fencing_counter(1), "dlock_fencing:{emj}");
  EXPECT_EQ(keys::slot_fencing_counter(5061), "dlock_fencing:{bar}");
  EXPECT_EQ(keys::slot_fencing_counter(12739), "dlock_fencing:{za2}");
  EXPECT_EQ(keys::slot_fencing_counter(16383), "dlock_fencing:{hia}");
  for (std::uint16_t s :
       {std::uint16_t{0}, std::uint16_t{7}, std::uint16_t{3443}, std::uint16_t{16383}}) {
    EXPECT_EQ(keys::slot_fencing_counter(s), keys::slot_fencing_counter(s));
  }
}

TEST(keys_slot_fencing_counter, of_a_name_is_its_slots) {
  EXPECT_EQ(keys::slot_fencing_counter_of("123456789"), keys::slot_fencing_counter(12739));
  EXPECT_EQ(keys::slot_fencing_counter_of("{user1000}.following"),
            keys::slot_fencing_counter_of("user1000"));
  EXPECT_EQ(keys::slot_fencing_counter_of("orders{42}"), keys::slot_fencing_counter_of("42"));
}

}  // namespace
