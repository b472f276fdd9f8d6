// The contracts of the read-write lock's scripts (read_acquire.lua, read_release.lua,
// write_acquire.lua, write_release.lua, their header comments) against a real server, in
// Redisson's RReadWriteLock layout: read holds and their keys, writer preference, downgrades and
// refused upgrades, the hash's expiry, the messages; and lock_renew.lua's three kinds of hold.
#include <gtest/gtest.h>

#include "family_lab.hpp"

using namespace std::chrono_literals;

namespace family_rw_scripts {

using dlock::test::code;
using dlock::test::listener;
using dlock::test::show;
using dlock::test::value;

class family_scripts_rw : public testing::Test {
 protected:
  std::string exists(const std::string& key) const { return f_.cmd({"EXISTS", key}); }

  dlock::test::redis_server srv_;
  dlock::test::family_lab f_{srv_};
  const std::string& name = f_.name;
  const std::string writers = f_.rw("").queue;
  const std::string channel = f_.rw("").channel;
};

TEST_F(family_scripts_rw, a_read_hold_has_its_own_key_and_lease) {
  const auto a = f_.read_acquire({.owner = "R:1"});
  ASSERT_EQ(code(a), 0) << show(a);
  const auto t1 = value(a);
  EXPECT_EQ(f_.base.counter(), t1);
  EXPECT_EQ(f_.cmd({"HGETALL", name}), "[mode, read, R:1, 1]");
  EXPECT_EQ(f_.hold("R:1", 1), "{" + name + "}:R:1:rwlock_timeout:1");
  EXPECT_EQ(f_.cmd({"GET", f_.hold("R:1", 1)}), "1");
  EXPECT_GT(f_.pttl(f_.hold("R:1", 1)), 29000);
  EXPECT_LE(f_.pttl(f_.hold("R:1", 1)), 30000);
  EXPECT_GT(f_.pttl(name), 29000);

  // have=0 applied twice: one hold, a new token, its key's lease again.
  f_.cmd({"PEXPIRE", f_.hold("R:1", 1), "1000"});
  const auto resent = f_.read_acquire({.owner = "R:1"});
  EXPECT_EQ(code(resent), 0) << show(resent);
  EXPECT_GT(value(resent), t1);
  EXPECT_EQ(f_.cmd({"HGETALL", name}), "[mode, read, R:1, 1]");
  EXPECT_GT(f_.pttl(f_.hold("R:1", 1)), 29000);

  // A re-entry: hold 2, the lease of hold 1 set again (shorter); the hash is not shortened.
  EXPECT_EQ(show(f_.read_acquire({.owner = "R:1", .have = 1, .lease = "10000"})), "[0, 0]");
  f_.cmd({"PEXPIRE", f_.hold("R:1", 2), "1000"});
  EXPECT_EQ(show(f_.read_acquire({.owner = "R:1", .have = 1, .lease = "10000"})), "[0, 0]");
  EXPECT_EQ(f_.cmd({"HGET", name, "R:1"}), "2");
  EXPECT_GT(f_.pttl(f_.hold("R:1", 2)), 9000);
  EXPECT_LE(f_.pttl(f_.hold("R:1", 2)), 10000);
  EXPECT_GT(f_.pttl(f_.hold("R:1", 1)), 9000) << "the owner's holds end together";
  EXPECT_LE(f_.pttl(f_.hold("R:1", 1)), 10000);
  EXPECT_EQ(exists(f_.hold("R:1", 3)), ":0");
  EXPECT_GT(f_.pttl(name), 28000);
  EXPECT_EQ(f_.base.counter(), value(resent)) << "re-entries draw no token";
  EXPECT_EQ(show(f_.read_acquire({.owner = "R:1", .have = 5})), "[3, 2]") << "hold lost";

  // Other readers: the hash lasts at least as long as the longest lease.
  ASSERT_EQ(code(f_.read_acquire({.owner = "S:1", .lease = "60000"})), 0);
  EXPECT_GT(f_.pttl(name), 59000);
  ASSERT_EQ(code(f_.read_acquire({.owner = "T:1", .lease = "1000"})), 0);
  EXPECT_GT(f_.pttl(name), 59000);
  EXPECT_LE(f_.pttl(f_.hold("T:1", 1)), 1000);

  f_.cmd({"HSET", name, "R:1", "x"});
  const auto bad = f_.read_acquire({.owner = "R:1", .have = 2});
  EXPECT_EQ(bad.ec, dlock::errc::server_error) << show(bad);
  f_.cmd({"DEL", name});
  f_.cmd({"HSET", name, "A:1", "1"});  // a mutex's or fair lock's hash
  EXPECT_EQ(show(f_.read_acquire({.owner = "R:1"})), "[5, 0]");
  EXPECT_EQ(show(f_.read_acquire({.owner = "A:1", .have = 1})), "[5, 0]");
  EXPECT_EQ(f_.cmd({"HGETALL", name}), "[A:1, 1]");

  f_.cmd({"DEL", name});
  f_.cmd({"SET", f_.base.k.lock_counter, "9000000000000000"});  // RFencedLock's (KEYS[4])
  EXPECT_EQ(show(f_.read_acquire({.owner = "R:1"})), "[0, 9000000000000001]");
  EXPECT_EQ(f_.cmd({"GET", f_.base.k.lock_counter}), "9000000000000001");
  EXPECT_EQ(f_.base.counter(), 9000000000000001);

  f_.cmd({"DEL", name});
  const auto last = f_.base.counter();
  f_.base.fenced = false;
  EXPECT_EQ(show(f_.read_acquire({.owner = "R:1"})), "[0, 0]");
  EXPECT_EQ(f_.cmd({"HGETALL", name}), "[mode, read, R:1, 1]");
  EXPECT_EQ(f_.base.counter(), last);
}

// A waiting writer (a live entry of the waiting writers) holds back new readers, not the
// re-entries of readers in; an entry whose deadline passed is purged and holds back nobody.
TEST_F(family_scripts_rw, a_waiting_writer_holds_back_new_readers_only) {
  ASSERT_EQ(code(f_.read_acquire({.owner = "R:1"})), 0);
  const auto single = f_.write_acquire({.owner = "W:1"});
  EXPECT_EQ(code(single), 1) << show(single);
  EXPECT_GT(value(single), 29000) << "the hash's PTTL";
  EXPECT_EQ(exists(writers), ":0") << "a single try announces nothing";
  ASSERT_EQ(code(f_.read_acquire({.owner = "S:1"})), 0) << "no writer waits";

  auto before = f_.base.server_ms();
  const auto w = f_.write_acquire({.owner = "W:1", .waits = true, .valid = "5000"});
  auto after = f_.base.server_ms();
  EXPECT_EQ(code(w), 1) << show(w);
  EXPECT_GT(value(w), 29000);
  EXPECT_LE(value(w), 30000);
  EXPECT_GE(f_.score(writers, "W:1"), before + 5000);
  EXPECT_LE(f_.score(writers, "W:1"), after + 5000);
  EXPECT_GT(f_.pttl(writers), 4000);
  EXPECT_LE(f_.pttl(writers), 5000);
  // ZADD GT: an attempt moves the deadline later, never earlier; the key lasts as long.
  const auto first = f_.score(writers, "W:1");
  ASSERT_EQ(code(f_.write_acquire({.owner = "W:1", .waits = true, .valid = "100"})), 1);
  EXPECT_EQ(f_.score(writers, "W:1"), first);
  EXPECT_GT(f_.pttl(writers), 3000) << "not shortened";
  before = f_.base.server_ms();
  ASSERT_EQ(code(f_.write_acquire({.owner = "W:1", .waits = true, .valid = "9000"})), 1);
  EXPECT_GE(f_.score(writers, "W:1"), before + 9000);
  EXPECT_GT(f_.pttl(writers), 8000);

  const auto held_back = f_.read_acquire({.owner = "T:1"});
  EXPECT_EQ(code(held_back), 1) << show(held_back);
  EXPECT_GE(value(held_back), f_.pttl(name)) << "the hash's PTTL";
  EXPECT_LE(value(held_back), 30000);
  EXPECT_EQ(f_.cmd({"HEXISTS", name, "T:1"}), ":0");
  EXPECT_EQ(show(f_.read_acquire({.owner = "R:1", .have = 1})), "[0, 0]") << "a re-entry";
  EXPECT_EQ(f_.cmd({"HGET", name, "R:1"}), "2");

  f_.cmd({"ZADD", writers, std::to_string(f_.base.server_ms()), "W:1"});  // ≤ now: stale
  ASSERT_EQ(code(f_.read_acquire({.owner = "T:1"})), 0);
  EXPECT_EQ(exists(writers), ":0") << "purged";

  // A free lock with a live waiting writer: a new reader waits until the writer's deadline.
  f_.cmd({"DEL", name});
  const auto deadline = f_.base.server_ms() + 3000;
  f_.cmd({"ZADD", writers, std::to_string(deadline), "W:1"});
  before = f_.base.server_ms();
  const auto free = f_.read_acquire({.owner = "U:1"});
  EXPECT_EQ(code(free), 1) << show(free);
  EXPECT_LE(value(free), deadline - before);
  EXPECT_GE(value(free), deadline - f_.base.server_ms());
  EXPECT_EQ(exists(name), ":0");
}

// A writer: exclusive, re-entries that keep a longer TTL, its own read holds allowed (a
// downgrade), a reader's write attempt refused (an upgrade), its waiting entry removed when it
// takes the lock.
TEST_F(family_scripts_rw, a_writer_excludes_others_but_may_take_its_own_read_holds) {
  ASSERT_EQ(code(f_.read_acquire({.owner = "R:1"})), 0);
  ASSERT_EQ(code(f_.read_acquire({.owner = "S:1"})), 0);
  EXPECT_EQ(show(f_.write_acquire({.owner = "R:1", .waits = true})), "[4, 0]");
  EXPECT_EQ(exists(writers), ":0") << "refused, not announced";
  EXPECT_EQ(f_.cmd({"HGETALL", name}), "[mode, read, R:1, 1, S:1, 1]");
  ASSERT_EQ(code(f_.write_acquire({.owner = "W:1", .waits = true})), 1);
  ASSERT_EQ(show(f_.read_release({.owner = "R:1"})), "1");
  ASSERT_EQ(show(f_.read_release({.owner = "S:1"})), "1");
  EXPECT_EQ(exists(name), ":0");

  const auto w = f_.write_acquire({.owner = "W:1", .waits = true});
  ASSERT_EQ(code(w), 0) << show(w);
  EXPECT_EQ(value(w), f_.base.counter());
  EXPECT_EQ(exists(writers), ":0") << "its entry removed";
  EXPECT_EQ(f_.cmd({"HGETALL", name}), "[mode, write, W:1:write, 1]");
  EXPECT_GT(f_.pttl(name), 29000);
  const auto resent = f_.write_acquire({.owner = "W:1"});
  EXPECT_GT(value(resent), value(w)) << "a resend: a new token";
  EXPECT_EQ(f_.cmd({"HGET", name, "W:1:write"}), "1");

  const auto excluded = f_.read_acquire({.owner = "R:1"});
  EXPECT_EQ(code(excluded), 1) << show(excluded);
  EXPECT_GT(value(excluded), 28000) << "the hash's PTTL";
  EXPECT_EQ(code(f_.write_acquire({.owner = "V:1"})), 1);
  ASSERT_EQ(code(f_.write_acquire({.owner = "V:1", .waits = true})), 1);
  const auto down = f_.read_acquire({.owner = "W:1"});
  EXPECT_EQ(code(down), 0) << "its own read hold, though mode=write and V waits: " << show(down);
  EXPECT_GT(value(down), value(resent));
  EXPECT_EQ(f_.cmd({"HGETALL", name}), "[mode, write, W:1:write, 1, W:1, 1]");
  EXPECT_EQ(exists(f_.hold("W:1", 1)), ":1");

  // Re-entries and their resends: a shorter lease keeps the longer TTL, a longer one raises it.
  EXPECT_EQ(show(f_.write_acquire({.owner = "W:1", .have = 1, .lease = "1000"})), "[0, 0]");
  EXPECT_EQ(show(f_.write_acquire({.owner = "W:1", .have = 1, .lease = "1000"})), "[0, 0]");
  EXPECT_EQ(f_.cmd({"HGET", name, "W:1:write"}), "2");
  EXPECT_GT(f_.pttl(name), 28000);
  EXPECT_EQ(show(f_.write_acquire({.owner = "W:1", .have = 2, .lease = "60000"})), "[0, 0]");
  EXPECT_GT(f_.pttl(name), 59000);
  EXPECT_EQ(show(f_.write_acquire({.owner = "W:1", .have = 7})), "[3, 3]") << "hold lost";
  f_.cmd({"HSET", name, "W:1:write", "3x"});
  EXPECT_EQ(f_.write_acquire({.owner = "W:1", .have = 3}).ec, dlock::errc::server_error);

  f_.cmd({"DEL", name, writers});
  f_.cmd({"HSET", name, "A:1", "1"});
  EXPECT_EQ(show(f_.write_acquire({.owner = "A:1", .waits = true})), "[5, 0]");
  EXPECT_EQ(exists(writers), ":0");
  f_.cmd({"DEL", name});
  f_.cmd({"SET", f_.base.k.lock_counter, "9000000000000000"});  // RFencedLock's (KEYS[4])
  EXPECT_EQ(show(f_.write_acquire({.owner = "W:1"})), "[0, 9000000000000001]");
  EXPECT_EQ(f_.cmd({"GET", f_.base.k.lock_counter}), "9000000000000001");
  f_.cmd({"DEL", name});
  f_.base.fenced = false;
  EXPECT_EQ(show(f_.write_acquire({.owner = "W:1"})), "[0, 0]");
  EXPECT_EQ(f_.base.counter(), 9000000000000001);
}

// A read release: its key, HDEL at 0, the hash as long as the longest remaining hold key of any
// reader; deleted (and `0` published) when no live hold is left, but not while mode=write.
TEST_F(family_scripts_rw, a_read_release_keeps_the_hash_as_long_as_the_longest_hold) {
  listener all{srv_, {channel}};
  ASSERT_EQ(code(f_.read_acquire({.owner = "R:1", .lease = "60000"})), 0);
  ASSERT_EQ(code(f_.read_acquire({.owner = "R:1", .have = 1, .lease = "60000"})), 0);
  ASSERT_EQ(code(f_.read_acquire({.owner = "S:1", .lease = "20000"})), 0);
  EXPECT_EQ(show(f_.read_release({.owner = "T:1"})), "nil") << "not a reader";
  EXPECT_EQ(show(f_.read_release({.owner = "R:1", .have = 4})), "nil") << "a count it lacks";

  f_.cmd({"PEXPIRE", f_.hold("R:1", 1), "1000"});
  EXPECT_EQ(show(f_.read_release({.owner = "R:1", .have = 2, .lease = "60000"})), "0");
  EXPECT_EQ(exists(f_.hold("R:1", 2)), ":0");
  EXPECT_GT(f_.pttl(f_.hold("R:1", 1)), 59000) << "the remaining hold's lease set again";
  EXPECT_EQ(f_.cmd({"HGET", name, "R:1"}), "1");
  EXPECT_GT(f_.pttl(name), 59000);
  EXPECT_EQ(show(f_.read_release({.owner = "R:1", .have = 2})), "-1") << "its resend";
  EXPECT_EQ(exists(f_.hold("R:1", 1)), ":1");

  EXPECT_EQ(show(f_.read_release({.owner = "R:1"})), "1");
  EXPECT_EQ(exists(f_.hold("R:1", 1)), ":0");
  EXPECT_EQ(f_.cmd({"HGETALL", name}), "[mode, read, S:1, 1]");
  EXPECT_GT(f_.pttl(name), 19000) << "S's key now the longest";
  EXPECT_LE(f_.pttl(name), 20000);
  EXPECT_EQ(all.heard(), "");

  f_.cmd({"HSET", name, "D:1", "2"});  // a dead reader: no key left
  EXPECT_EQ(show(f_.read_release({.owner = "S:1"})), "1");
  EXPECT_EQ(exists(name), ":0");
  EXPECT_EQ(all.heard(), channel + "=0 ");
  EXPECT_EQ(show(f_.read_release({.owner = "S:1"})), "nil") << "resent after the hash went";
  EXPECT_EQ(all.heard(), "");

  // The writer's own read hold goes: the write hold stays, nothing is published.
  ASSERT_EQ(code(f_.write_acquire({.owner = "W:1"})), 0);
  ASSERT_EQ(code(f_.read_acquire({.owner = "W:1"})), 0);
  EXPECT_EQ(show(f_.read_release({.owner = "W:1"})), "1");
  EXPECT_EQ(f_.cmd({"HGETALL", name}), "[mode, write, W:1:write, 1]");
  EXPECT_EQ(exists(f_.hold("W:1", 1)), ":0");
  EXPECT_EQ(all.heard(), "");
  // Two read holds of the writer, one released: the write hold's lease is not cut to the read
  // holds' keys (a writer with a long lease would end early).
  f_.cmd({"PEXPIRE", name, "60000"});
  ASSERT_EQ(code(f_.read_acquire({.owner = "W:1", .lease = "5000"})), 0);
  ASSERT_EQ(code(f_.read_acquire({.owner = "W:1", .have = 1, .lease = "5000"})), 0);
  EXPECT_EQ(show(f_.read_release({.owner = "W:1", .have = 2, .lease = "5000"})), "0");
  EXPECT_GT(f_.pttl(name), 59000);
}

// A write release: partial, last (DEL when only `mode` is left), a downgrade to the owner's read
// holds, `1` published either way; a writer leaving the waiting writers, `1` once none is left.
TEST_F(family_scripts_rw, a_write_release_frees_or_downgrades_and_publishes_1) {
  listener all{srv_, {channel}};
  ASSERT_EQ(code(f_.write_acquire({.owner = "W:1"})), 0);
  ASSERT_EQ(code(f_.write_acquire({.owner = "W:1", .have = 1})), 0);
  EXPECT_EQ(show(f_.write_release({.owner = "V:1"})), "nil") << "not the writer";
  EXPECT_EQ(show(f_.write_release({.owner = "W:1", .have = 4})), "nil");
  f_.cmd({"PEXPIRE", name, "1000"});
  EXPECT_EQ(show(f_.write_release({.owner = "W:1", .have = 2, .lease = "20000"})), "0");
  EXPECT_EQ(f_.cmd({"HGET", name, "W:1:write"}), "1");
  EXPECT_GT(f_.pttl(name), 19000);
  EXPECT_EQ(show(f_.write_release({.owner = "W:1", .have = 2})), "-1") << "its resend";
  EXPECT_EQ(all.heard(), "");
  EXPECT_EQ(show(f_.write_release({.owner = "W:1"})), "1");
  EXPECT_EQ(exists(name), ":0") << "only `mode` was left";
  EXPECT_EQ(all.heard(), channel + "=1 ");
  EXPECT_EQ(show(f_.write_release({.owner = "W:1"})), "nil");
  EXPECT_EQ(all.heard(), "");

  // A downgrade: the owner's read holds remain, mode=read, every waiter woken.
  ASSERT_EQ(code(f_.write_acquire({.owner = "W:1"})), 0);
  ASSERT_EQ(code(f_.read_acquire({.owner = "W:1"})), 0);
  EXPECT_EQ(show(f_.write_release({.owner = "W:1"})), "1");
  EXPECT_EQ(f_.cmd({"HGETALL", name}), "[mode, read, W:1, 1]");
  EXPECT_EQ(exists(f_.hold("W:1", 1)), ":1");
  EXPECT_EQ(all.heard(), channel + "=1 ");
  ASSERT_EQ(code(f_.read_acquire({.owner = "R:1"})), 0) << "readers may enter";

  // Writers that give up leave the waiting writers; the last one out wakes the readers.
  ASSERT_EQ(code(f_.write_acquire({.owner = "X:1", .waits = true})), 1);
  ASSERT_EQ(code(f_.write_acquire({.owner = "Y:1", .waits = true})), 1);
  EXPECT_EQ(show(f_.write_release({.owner = "X:1", .leaving = true})), "nil");
  EXPECT_EQ(f_.score(writers, "X:1"), -1);
  EXPECT_EQ(all.heard(), "") << "Y still waits";
  EXPECT_EQ(show(f_.write_release({.owner = "Y:1", .leaving = true})), "nil");
  EXPECT_EQ(exists(writers), ":0");
  EXPECT_EQ(all.heard(), channel + "=1 ");
  EXPECT_EQ(show(f_.write_release({.owner = "Y:1", .leaving = true})), "nil");
  EXPECT_EQ(all.heard(), "") << "it had left already";
  // A dead writer's entry (its deadline passed) does not keep the last live one from waking
  // the readers.
  ASSERT_EQ(code(f_.write_acquire({.owner = "X:1", .waits = true})), 1);
  f_.cmd({"ZADD", writers, "1", "D:1"});
  EXPECT_EQ(show(f_.write_release({.owner = "X:1", .leaving = true})), "nil");
  EXPECT_EQ(all.heard(), channel + "=1 ");

  // One whose acquisition was applied gives up: its hold is released.
  ASSERT_EQ(show(f_.read_release({.owner = "R:1"})), "1");
  ASSERT_EQ(show(f_.read_release({.owner = "W:1"})), "1");
  EXPECT_EQ(all.heard(), channel + "=0 ");
  ASSERT_EQ(code(f_.write_acquire({.owner = "Z:1", .waits = true})), 0);
  EXPECT_EQ(show(f_.write_release({.owner = "Z:1", .leaving = true})), "1");
  EXPECT_EQ(exists(name), ":0");
  EXPECT_EQ(all.heard(), channel + "=1 ");
}

// lock_renew.lua: 'h' sets the lease, 'w' keeps a longer TTL, 'r' renews that owner's hold keys
// alone and raises the hash to the lease at least; -2 for a hold gone; '0' only checks.
TEST_F(family_scripts_rw, renew_sets_keeps_or_raises_each_kinds_lease) {
  dlock::test::family_lab fair{srv_};
  ASSERT_EQ(code(fair.fair_acquire({.owner = "A:1", .lease = "60000"})), 0);
  const auto h = fair.renew("10000", {"hA:1", "hB:1"});
  ASSERT_EQ(h.r.elements().size(), 2u) << show(h);
  EXPECT_GT(h.r.elements()[0].integer(), 9000) << "set, though shorter";
  EXPECT_LE(h.r.elements()[0].integer(), 10000);
  EXPECT_EQ(show(h.r.elements()[1]), "-2");

  ASSERT_EQ(code(f_.write_acquire({.owner = "W:1", .lease = "60000"})), 0);
  auto w = f_.renew("10000", {"wW:1:write", "wV:1:write", "hW:1:write"});
  ASSERT_EQ(w.r.elements().size(), 3u) << show(w);
  EXPECT_GT(w.r.elements()[0].integer(), 59000) << "kept";
  EXPECT_EQ(show(w.r.elements()[1]), "-2");
  EXPECT_LE(w.r.elements()[2].integer(), 10000) << "'h' sets it";
  w = f_.renew("90000", {"wW:1:write"});
  EXPECT_GT(w.r.elements().at(0).integer(), 89000) << "raised";
  ASSERT_EQ(show(f_.write_release({.owner = "W:1"})), "1");

  // Readers R (2 holds) and S, leases of 1 s.
  ASSERT_EQ(code(f_.read_acquire({.owner = "R:1", .lease = "1000"})), 0);
  ASSERT_EQ(code(f_.read_acquire({.owner = "R:1", .have = 1, .lease = "1000"})), 0);
  ASSERT_EQ(code(f_.read_acquire({.owner = "S:1", .lease = "1000"})), 0);
  const auto r = f_.renew("30000", {"rR:1"});
  ASSERT_EQ(r.r.elements().size(), 1u) << show(r);
  EXPECT_GT(r.r.elements()[0].integer(), 29000) << "the hash raised";
  EXPECT_GT(f_.pttl(name), 29000);
  EXPECT_GT(f_.pttl(f_.hold("R:1", 1)), 29000);
  EXPECT_GT(f_.pttl(f_.hold("R:1", 2)), 29000);
  EXPECT_LE(f_.pttl(f_.hold("S:1", 1)), 1000) << "another reader's left alone";
  f_.cmd({"PEXPIRE", name, "90000"});
  EXPECT_GT(f_.renew("30000", {"rR:1"}).r.elements().at(0).integer(), 89000) << "kept";

  // Check only: every TTL as it was.
  f_.cmd({"PEXPIRE", f_.hold("R:1", 2), "5000"});
  const auto check = f_.renew("0", {"rR:1", "rS:1", "rX:1"});
  ASSERT_EQ(check.r.elements().size(), 3u) << show(check);
  EXPECT_LE(check.r.elements()[0].integer(), 90000);
  EXPECT_GT(check.r.elements()[0].integer(), 80000);
  EXPECT_EQ(show(check.r.elements()[2]), "-2") << "no field";
  EXPECT_LE(f_.pttl(f_.hold("R:1", 2)), 5000);
  EXPECT_LE(f_.pttl(f_.hold("S:1", 1)), 1000);

  f_.cmd({"DEL", f_.hold("R:1", 2)});
  EXPECT_EQ(show(f_.renew("30000", {"rR:1"})), "[-2]") << "a hold's key gone";
  EXPECT_EQ(show(f_.renew("0", {"rR:1"})), "[-2]");

  // A name with a tag: the hold keys are `<name>:<owner>:rwlock_timeout:<n>`.
  const auto tagged = "pre{" + dlock::test::unique_name("tag") + "}post";
  dlock::test::family_lab t{srv_, tagged};
  ASSERT_EQ(code(t.read_acquire({.owner = "R:1", .lease = "1000"})), 0);
  ASSERT_EQ(t.hold("R:1", 1), tagged + ":R:1:rwlock_timeout:1");
  EXPECT_GT(t.renew("30000", {"rR:1"}).r.elements().at(0).integer(), 29000);
  EXPECT_GT(t.pttl(t.hold("R:1", 1)), 29000);
  ASSERT_EQ(code(t.read_acquire({.owner = "S:1", .lease = "5000"})), 0);
  EXPECT_EQ(show(t.read_release({.owner = "S:1"})), "1");
  EXPECT_GT(t.pttl(tagged), 28000) << "R's hold key found by its tagged name";
}

}  // namespace family_rw_scripts
