// The contracts of the fair lock's scripts (fair_acquire.lua, fair_release.lua, their header
// comments) against a real server, in Redisson's RFairLock layout: holds and their resends,
// fencing tokens, the queue with server-time deadlines, stale heads, the head's wake-up on its
// own channel; and mutex_force_unlock.lua for fair and read-write locks. The read-write scripts
// and lock_renew.lua: family_scripts_rw_test.cpp.
#include <gtest/gtest.h>

#include "family_lab.hpp"

using namespace std::chrono_literals;

namespace family_fair_scripts {

using dlock::test::code;
using dlock::test::listener;
using dlock::test::show;
using dlock::test::value;

class family_scripts_fair : public testing::Test {
 protected:
  std::string queue() const { return f_.cmd({"LRANGE", f_.fair.queue, "0", "-1"}); }
  std::string timeouts() const { return f_.cmd({"ZRANGE", f_.fair.records, "0", "-1"}); }
  std::int64_t deadline(const std::string& owner) const { return f_.score(f_.fair.records, owner); }
  // A subscriber to the lock's channel and to the head channels of `owners`.
  std::unique_ptr<listener> waiters(const std::vector<std::string>& owners) const {
    std::vector<std::string> channels{f_.fair.channel};
    for (const auto& o : owners) channels.push_back(f_.head_channel(o));
    return std::make_unique<listener>(srv_, channels);
  }

  dlock::test::redis_server srv_;
  dlock::test::family_lab f_{srv_};
  const std::string& name = f_.name;
};

TEST(family_scripts, embedded_sha1_matches_what_redis_computes) {
  dlock::test::redis_server srv;
  for (const auto* s : {&dlock::scripts::fair_acquire, &dlock::scripts::fair_release,
                        &dlock::scripts::read_acquire, &dlock::scripts::read_release,
                        &dlock::scripts::write_acquire, &dlock::scripts::write_release}) {
    EXPECT_EQ(srv.command({"SCRIPT", "LOAD", std::string(s->text)}), s->sha1) << s->name;
  }
}

// A first acquisition, its resend, re-entries and theirs, a lost hold, and the hashes that are
// not a fair lock's hold counts.
TEST_F(family_scripts_fair, holds_tokens_and_resends) {
  const auto before_us = f_.base.server_ms() * 1000;
  const auto a = f_.fair_acquire({.owner = "A:1"});
  ASSERT_EQ(code(a), 0) << show(a);
  const auto t1 = value(a);
  EXPECT_GE(t1, before_us);
  EXPECT_EQ(f_.base.counter(), t1);
  EXPECT_EQ(f_.cmd({"HGETALL", name}), "[A:1, 1]");
  EXPECT_GT(f_.pttl(name), 29000);
  EXPECT_EQ(f_.cmd({"EXISTS", f_.fair.queue, f_.fair.records, f_.base.k.lock_counter}), ":0");

  // have=0 applied twice: one hold, a new token, the lease set again.
  f_.cmd({"PEXPIRE", name, "1000"});
  const auto resent = f_.fair_acquire({.owner = "A:1"});
  EXPECT_EQ(code(resent), 0) << show(resent);
  EXPECT_GT(value(resent), t1);
  EXPECT_EQ(f_.base.counter(), value(resent));
  EXPECT_EQ(f_.cmd({"HGETALL", name}), "[A:1, 1]");
  EXPECT_GT(f_.pttl(name), 29000);

  // have=1 applied twice: count 2, not 3; no token.
  EXPECT_EQ(show(f_.fair_acquire({.owner = "A:1", .have = 1})), "[0, 0]");
  f_.cmd({"PEXPIRE", name, "1000"});
  EXPECT_EQ(show(f_.fair_acquire({.owner = "A:1", .have = 1})), "[0, 0]");
  EXPECT_EQ(f_.cmd({"HGETALL", name}), "[A:1, 2]");
  EXPECT_GT(f_.pttl(name), 29000);
  EXPECT_EQ(f_.base.counter(), value(resent)) << "re-entries draw no token";
  EXPECT_EQ(show(f_.fair_acquire({.owner = "A:1", .have = 5})), "[3, 2]") << "hold lost";
  EXPECT_EQ(show(f_.fair_acquire({.owner = "B:1", .have = 1})), "[3, 0]");
  EXPECT_EQ(f_.cmd({"HGETALL", name}), "[A:1, 2]");

  for (const char* bad : {"x", "-1", "1234567890"}) {
    f_.cmd({"HSET", name, "A:1", bad});
    const auto r = f_.fair_acquire({.owner = "A:1", .have = 1});
    EXPECT_EQ(r.ec, dlock::errc::server_error) << "field '" << bad << "': " << show(r);
    EXPECT_EQ(f_.cmd({"HGET", name, "A:1"}), bad) << "untouched";
  }
  f_.cmd({"DEL", name});
  EXPECT_EQ(show(f_.fair_acquire({.owner = "A:1", .have = 1})), "[3, 0]") << "the hash is gone";
  f_.cmd({"HSET", name, "mode", "read", "A:1", "1"});
  EXPECT_EQ(show(f_.fair_acquire({.owner = "A:1", .have = 1})), "[5, 0]");
  EXPECT_EQ(show(f_.fair_acquire({.owner = "B:1", .waits = true})), "[5, 0]");
  EXPECT_EQ(f_.cmd({"HGETALL", name}), "[mode, read, A:1, 1]");
  EXPECT_EQ(f_.cmd({"EXISTS", f_.fair.queue}), ":0") << "not queued behind a read-write lock";

  // RFencedLock's counter of the name (KEYS[5]) is read and advanced.
  f_.cmd({"DEL", name});
  f_.cmd({"SET", f_.base.k.lock_counter, "9000000000000000"});
  EXPECT_EQ(show(f_.fair_acquire({.owner = "C:1"})), "[0, 9000000000000001]");
  EXPECT_EQ(f_.cmd({"GET", f_.base.k.lock_counter}), "9000000000000001");
  EXPECT_EQ(f_.base.counter(), 9000000000000001);

  // Fencing off: token 0, no counter touched.
  f_.cmd({"DEL", name});
  const auto last = f_.base.counter();
  f_.base.fenced = false;
  EXPECT_EQ(show(f_.fair_acquire({.owner = "C:1"})), "[0, 0]");
  EXPECT_EQ(show(f_.fair_acquire({.owner = "C:1"})), "[0, 0]") << "its resend";
  EXPECT_EQ(f_.cmd({"HGETALL", name}), "[C:1, 1]");
  EXPECT_EQ(f_.base.counter(), last);
}

// Waiters queue in arrival order with a deadline of the server's TIME + ARGV[5]; a single try
// never queues; only the head takes the lock once it is free, and is told on its own channel.
TEST_F(family_scripts_fair, waiters_queue_in_order_and_the_head_alone_takes_a_free_lock) {
  ASSERT_EQ(code(f_.fair_acquire({.owner = "A:1"})), 0);
  const auto single = f_.fair_acquire({.owner = "B:1"});
  EXPECT_EQ(code(single), 1) << show(single);
  EXPECT_GT(value(single), 29000) << "the lock's PTTL";
  EXPECT_LE(value(single), 30000);
  EXPECT_EQ(f_.cmd({"EXISTS", f_.fair.queue, f_.fair.records}), ":0") << "a single try";

  auto before = f_.base.server_ms();
  const auto b = f_.fair_acquire({.owner = "B:1", .waits = true, .valid = "5000"});
  auto after = f_.base.server_ms();
  EXPECT_EQ(code(b), 1) << show(b);
  EXPECT_GT(value(b), 29000);
  EXPECT_EQ(queue(), "[B:1]");
  EXPECT_GE(deadline("B:1"), before + 5000);
  EXPECT_LE(deadline("B:1"), after + 5000);
  ASSERT_EQ(code(f_.fair_acquire({.owner = "C:1", .waits = true, .valid = "9000"})), 1);
  EXPECT_EQ(queue(), "[B:1, C:1]");

  // B's next attempts keep its place; its deadline moves later, never earlier.
  before = f_.base.server_ms();
  ASSERT_EQ(code(f_.fair_acquire({.owner = "B:1", .waits = true, .valid = "7000"})), 1);
  after = f_.base.server_ms();
  EXPECT_GE(deadline("B:1"), before + 7000);
  EXPECT_LE(deadline("B:1"), after + 7000);
  const auto b_deadline = deadline("B:1");
  ASSERT_EQ(code(f_.fair_acquire({.owner = "B:1", .waits = true, .valid = "10"})), 1);
  EXPECT_EQ(deadline("B:1"), b_deadline);
  EXPECT_EQ(queue(), "[B:1, C:1]");
  EXPECT_EQ(code(f_.fair_acquire({.owner = "B:1", .waits = true})), 1) << "the head waits too";

  auto w = waiters({"A:1", "B:1", "C:1"});
  EXPECT_EQ(show(f_.fair_release({.owner = "A:1"})), "1");
  EXPECT_EQ(w->heard(), f_.head_channel("B:1") + "=0 ") << "the head alone";
  EXPECT_EQ(f_.cmd({"EXISTS", name}), ":0");

  // Free, but B's turn: C (queued) and D (not) wait until B's deadline at most.
  for (const char* owner : {"C:1", "D:1"}) {
    const auto now = f_.base.server_ms();
    const auto r = f_.fair_acquire({.owner = owner, .waits = std::string(owner) == "C:1"});
    EXPECT_EQ(code(r), 1) << owner << ": " << show(r);
    EXPECT_LE(value(r), b_deadline - now) << owner;
    EXPECT_GE(value(r), b_deadline - f_.base.server_ms()) << owner;
  }
  EXPECT_EQ(f_.cmd({"EXISTS", name}), ":0");
  EXPECT_EQ(queue(), "[B:1, C:1]") << "D's single try not queued";

  const auto taken = f_.fair_acquire({.owner = "B:1", .waits = true});
  EXPECT_EQ(code(taken), 0) << show(taken);
  EXPECT_EQ(value(taken), f_.base.counter());
  EXPECT_EQ(f_.cmd({"HGETALL", name}), "[B:1, 1]");
  EXPECT_EQ(queue(), "[C:1]");
  EXPECT_EQ(timeouts(), "[C:1]");
  EXPECT_EQ(w->heard(), "");
}

// Heads whose deadline passed (≤ the server's time) or that have none are purged by an attempt
// and by a release; entries behind the head stay until they become it.
TEST_F(family_scripts_fair, stale_heads_are_purged) {
  ASSERT_EQ(code(f_.fair_acquire({.owner = "A:1"})), 0);
  for (const char* o : {"X:1", "Y:1", "C:1", "Z:1"}) {
    ASSERT_EQ(code(f_.fair_acquire({.owner = o, .waits = true, .valid = "5000"})), 1);
  }
  f_.cmd({"ZADD", f_.fair.records, std::to_string(f_.base.server_ms() - 1), "X:1"});
  f_.cmd({"ZREM", f_.fair.records, "Y:1"});
  f_.cmd({"ZADD", f_.fair.records, "1", "Z:1"});  // stale, but not a head
  auto purged = waiters({"X:1", "Y:1"});
  const auto held = f_.fair_acquire({.owner = "B:1", .waits = true, .valid = "9000"});
  EXPECT_EQ(code(held), 1) << show(held);
  EXPECT_EQ(queue(), "[C:1, Z:1, B:1]") << "X (deadline passed) and Y (none) purged";
  EXPECT_EQ(purged->heard(), f_.head_channel("X:1") + "=0 " + f_.head_channel("Y:1") + "=0 ");
  EXPECT_EQ(timeouts(), "[Z:1, C:1, B:1]");

  // The release purges too, and tells the purged (in case one is alive after all: it tries
  // again and queues anew) and the live head.
  f_.cmd({"ZADD", f_.fair.records, "1", "C:1"});
  auto w = waiters({"C:1", "Z:1", "B:1"});
  EXPECT_EQ(show(f_.fair_release({.owner = "A:1"})), "1");
  EXPECT_EQ(w->heard(), f_.head_channel("C:1") + "=0 " + f_.head_channel("Z:1") + "=0 " +
                            f_.head_channel("B:1") + "=0 ");
  EXPECT_EQ(queue(), "[B:1]");
  EXPECT_EQ(timeouts(), "[B:1]");

  // An attempt on a free lock whose only waiter went stale takes it.
  f_.cmd({"ZADD", f_.fair.records, std::to_string(f_.base.server_ms()), "B:1"});
  EXPECT_EQ(code(f_.fair_acquire({.owner = "E:1"})), 0);
  EXPECT_EQ(f_.cmd({"EXISTS", f_.fair.queue, f_.fair.records}), ":0");
  EXPECT_EQ(f_.cmd({"HGETALL", name}), "[E:1, 1]");
}

// Releases: the owner check, a partial release with its lease, resends, the last one waking the
// head, a waiter that leaves, and a release after the lock went.
TEST_F(family_scripts_fair, release_checks_the_owner_and_wakes_the_head_alone) {
  ASSERT_EQ(code(f_.fair_acquire({.owner = "A:1"})), 0);
  ASSERT_EQ(code(f_.fair_acquire({.owner = "A:1", .have = 1})), 0);
  ASSERT_EQ(code(f_.fair_acquire({.owner = "B:1", .waits = true})), 1);
  ASSERT_EQ(code(f_.fair_acquire({.owner = "C:1", .waits = true})), 1);
  auto w = waiters({"A:1", "B:1", "C:1"});

  EXPECT_EQ(show(f_.fair_release({.owner = "B:1"})), "nil") << "not the owner";
  EXPECT_EQ(show(f_.fair_release({.owner = "A:1", .have = 4})), "nil") << "a count it lacks";
  EXPECT_EQ(f_.cmd({"HGETALL", name}), "[A:1, 2]");
  f_.cmd({"PEXPIRE", name, "1000"});
  EXPECT_EQ(show(f_.fair_release({.owner = "A:1", .have = 2, .lease = "20000"})), "0");
  EXPECT_EQ(f_.cmd({"HGETALL", name}), "[A:1, 1]");
  EXPECT_GT(f_.pttl(name), 19000) << "the lease set again";
  EXPECT_LE(f_.pttl(name), 20000);
  EXPECT_EQ(show(f_.fair_release({.owner = "A:1", .have = 2})), "-1") << "its resend";
  EXPECT_EQ(f_.cmd({"HGETALL", name}), "[A:1, 1]");
  EXPECT_EQ(w->heard(), "") << "held throughout";

  EXPECT_EQ(show(f_.fair_release({.owner = "A:1"})), "1");
  EXPECT_EQ(f_.cmd({"EXISTS", name}), ":0");
  EXPECT_EQ(w->heard(), f_.head_channel("B:1") + "=0 ");
  EXPECT_EQ(queue(), "[B:1, C:1]") << "the release leaves the queue to the waiters";
  EXPECT_EQ(show(f_.fair_release({.owner = "A:1"})), "nil") << "resent after the lock went";
  EXPECT_EQ(w->heard(), f_.head_channel("B:1") + "=0 ") << "the head is told again";

  // B gives up: it leaves list and deadlines, and C, now the head of a free lock, is told.
  EXPECT_EQ(show(f_.fair_release({.owner = "B:1", .leaving = true})), "nil");
  EXPECT_EQ(queue(), "[C:1]");
  EXPECT_EQ(timeouts(), "[C:1]");
  EXPECT_EQ(w->heard(), f_.head_channel("C:1") + "=0 ");

  // Leaving a held lock: nobody is told.
  ASSERT_EQ(code(f_.fair_acquire({.owner = "C:1", .waits = true})), 0);
  ASSERT_EQ(code(f_.fair_acquire({.owner = "A:1", .waits = true})), 1);
  ASSERT_EQ(code(f_.fair_acquire({.owner = "B:1", .waits = true})), 1);
  EXPECT_EQ(show(f_.fair_release({.owner = "A:1", .leaving = true})), "nil");
  EXPECT_EQ(queue(), "[B:1]");
  EXPECT_EQ(timeouts(), "[B:1]");
  EXPECT_EQ(f_.cmd({"HGETALL", name}), "[C:1, 1]");
  EXPECT_EQ(w->heard(), "");

  // A waiter whose acquisition was applied gives up: its hold is released, the head told.
  ASSERT_EQ(show(f_.fair_release({.owner = "C:1"})), "1");
  EXPECT_EQ(w->heard(), f_.head_channel("B:1") + "=0 ");
  ASSERT_EQ(code(f_.fair_acquire({.owner = "B:1", .waits = true})), 0);
  ASSERT_EQ(code(f_.fair_acquire({.owner = "C:1", .waits = true})), 1);
  EXPECT_EQ(show(f_.fair_release({.owner = "B:1", .leaving = true})), "1");
  EXPECT_EQ(f_.cmd({"EXISTS", name}), ":0");
  EXPECT_EQ(w->heard(), f_.head_channel("C:1") + "=0 ");
  EXPECT_EQ(queue(), "[C:1]");
}

// mutex_force_unlock.lua on a fair lock (KEYS[2] its queue: `0` to the head's channel alone) and
// on a read-write lock (the message of ARGV[3] on its channel).
TEST_F(family_scripts_fair, force_unlock_wakes_the_fair_head_or_every_rw_waiter) {
  auto force = [&](std::vector<std::string_view> keys, const std::string& channel,
                   std::string_view message) {
    return show(dlock::test::eval(f_.base.c, dlock::scripts::mutex_force_unlock, std::move(keys),
                                  {channel, "0", message}));
  };
  auto w = waiters({"A:1", "B:1", "C:1"});
  ASSERT_EQ(code(f_.fair_acquire({.owner = "A:1"})), 0);
  EXPECT_EQ(force({name, f_.fair.queue, f_.fair.records}, f_.fair.channel, "0"), "1")
      << "nobody queued";
  EXPECT_EQ(f_.cmd({"EXISTS", name}), ":0");
  EXPECT_EQ(w->heard(), "") << "nobody to tell";

  ASSERT_EQ(code(f_.fair_acquire({.owner = "A:1"})), 0);
  ASSERT_EQ(code(f_.fair_acquire({.owner = "B:1", .waits = true})), 1);
  ASSERT_EQ(code(f_.fair_acquire({.owner = "C:1", .waits = true})), 1);
  EXPECT_EQ(force({name, f_.fair.queue, f_.fair.records}, f_.fair.channel, "0"), "1");
  EXPECT_EQ(f_.cmd({"EXISTS", name}), ":0");
  EXPECT_EQ(queue(), "[B:1, C:1]");
  EXPECT_EQ(w->heard(), f_.head_channel("B:1") + "=0 ");
  EXPECT_EQ(force({name, f_.fair.queue, f_.fair.records}, f_.fair.channel, "0"), "0")
      << "free already";
  EXPECT_EQ(w->heard(), "");
  // A stale head is purged first: the live one behind it hears.
  f_.cmd({"HSET", name, "A:1", "1"});  // held (the queue's head is B, so no acquire)
  f_.cmd({"ZADD", f_.fair.records, "1", "B:1"});
  EXPECT_EQ(force({name, f_.fair.queue, f_.fair.records}, f_.fair.channel, "0"), "1");
  EXPECT_EQ(queue(), "[C:1]");
  EXPECT_EQ(w->heard(), f_.head_channel("B:1") + "=0 " + f_.head_channel("C:1") + "=0 ");

  const auto rw = f_.rw("W:1");
  listener all{srv_, {rw.channel}};
  ASSERT_EQ(code(f_.write_acquire({.owner = "W:1"})), 0);
  EXPECT_EQ(force({name}, rw.channel, "1"), "1");
  EXPECT_EQ(f_.cmd({"EXISTS", name}), ":0");
  EXPECT_EQ(all.heard(), rw.channel + "=1 ");
  EXPECT_EQ(force({name}, rw.channel, "1"), "0");
  EXPECT_EQ(all.heard(), "");
}

}  // namespace family_fair_scripts
