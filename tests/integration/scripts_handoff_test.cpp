// The waiter queue of the mutex scripts against a real server: queue records, hand-offs to the
// longest-waiting live dlock waiter (told on its waiter channel), waiters that give up, a free
// lock left to Redisson's waiters first, and every key and channel in the lock name's cluster
// slot (a single-node Redis Cluster runs them without CROSSSLOT).
#include <gtest/gtest.h>

#include "script_lab.hpp"

using namespace std::chrono_literals;
using dlock::test::code;
using dlock::test::dlock_process;
using dlock::test::lab;
using dlock::test::listener;
using dlock::test::show;
using dlock::test::value;

namespace {

class scripts_handoff : public testing::Test {
 protected:
  std::string record(const std::string& ticket) const {
    return l_.cmd({"HGET", k.records, ticket});
  }
  std::string queue() const { return l_.cmd({"ZRANGE", k.queue, "0", "-1"}); }

  dlock::test::redis_server srv_;
  lab l_{srv_};
  const std::string& name = l_.name;
  const dlock::detail::lock_keys& k = l_.k;
};

// Redisson's tryLockInnerAsync (tests/integration/redisson_client.py): nil when acquired, else
// the lock's PTTL.
const std::string redisson_try_lock =
    "if (redis.call('exists', KEYS[1]) == 0) then redis.call('hincrby', KEYS[1], ARGV[2], 1); "
    "redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; "
    "if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then "
    "redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); "
    "return nil; end; return redis.call('pttl', KEYS[1]);";

TEST_F(scripts_handoff, a_lock_held_by_another_queues_the_waiter_with_its_record) {
  ASSERT_EQ(code(l_.acquire({.owner = "A:1"})), 0);
  const auto before = l_.server_ms();
  const auto b = l_.acquire({.owner = "B:1", .ticket = "11", .lease = "7000", .id = "idB"});
  const auto after = l_.server_ms();
  ASSERT_EQ(code(b), 1) << show(b);
  EXPECT_GT(value(b), 29000) << "the holder's PTTL";
  EXPECT_LE(value(b), 30000);
  // The queue: ticket -> arrival (server µs); the record: `<stale-at ms> <id> <owner> <lease>
  // <fenced>`, stale once the validity passes without another attempt.
  const auto q = l_.cmd({"ZRANGE", k.queue, "0", "-1", "WITHSCORES"});
  ASSERT_EQ(q.rfind("[11, ", 0), 0u) << q;
  const auto arrived = std::stoll(q.substr(5));
  EXPECT_GE(arrived, before * 1000);
  EXPECT_LT(arrived, (after + 1) * 1000);
  const auto rec = record("11");
  const auto stale_at = std::stoll(rec);
  EXPECT_GE(stale_at, before + 5000);
  EXPECT_LE(stale_at, after + 5000);
  EXPECT_EQ(rec.substr(rec.find(' ')), " idB B:1 7000 1");
  for (const auto& key : {k.queue, k.records}) {
    EXPECT_GT(l_.pttl(key), 4000) << key << " expires with its entries";
    EXPECT_LE(l_.pttl(key), 5000) << key;
  }

  // C queues with a longer validity (the keys live as long as it); B's next attempt keeps its
  // place and renews its record; a caller without a ticket is not queued.
  ASSERT_EQ(code(l_.acquire({.owner = "C:1", .ticket = "12", .id = "idC", .valid = "9000"})), 1);
  EXPECT_GT(l_.pttl(k.records), 8000);
  ASSERT_EQ(code(l_.acquire({.owner = "B:1", .ticket = "11", .lease = "7000", .id = "idB"})), 1);
  EXPECT_EQ(l_.cmd({"ZSCORE", k.queue, "11"}), std::to_string(arrived));
  EXPECT_EQ(queue(), "[11, 12]");
  EXPECT_GE(std::stoll(record("11")), stale_at);
  EXPECT_EQ(code(l_.acquire({.owner = "D:1"})), 1);
  EXPECT_EQ(l_.cmd({"ZCARD", k.queue}), ":2");
  // Fencing off: the record says so (a fenced release may hand it the lock with token 0).
  lab off{srv_, name};
  off.fenced = false;
  ASSERT_EQ(code(off.acquire({.owner = "E:1", .ticket = "13", .id = "idE"})), 1);
  EXPECT_EQ(record("13").substr(record("13").find(' ')), " idE E:1 30000 0");
}

TEST_F(scripts_handoff, an_unlock_hands_the_lock_to_the_oldest_live_waiter) {
  auto b = dlock_process(l_, "idB");
  const auto ta = value(l_.acquire({.owner = "A:1"}));
  ASSERT_EQ(code(l_.acquire({.owner = "B:1", .ticket = "11", .lease = "7000", .id = "idB"})), 1);
  ASSERT_EQ(code(l_.acquire({.owner = "C:1", .ticket = "12", .id = "idC"})), 1);
  EXPECT_EQ(show(l_.release({.owner = "A:1"})), "1");
  const auto token = l_.counter();
  EXPECT_GT(token, ta) << "the hand-off issued a token";
  EXPECT_EQ(l_.cmd({"HGETALL", name}), "[B:1, 1]") << "B's hold, Redisson's layout";
  EXPECT_GT(l_.pttl(name), 6000) << "B's own lease at once";
  EXPECT_LE(l_.pttl(name), 7000);
  EXPECT_EQ(record("11"), "g " + std::to_string(token));
  EXPECT_EQ(queue(), "[12]");
  EXPECT_EQ(b->heard(), l_.waiter_channel("idB") + "=11 ")
      << "the ticket on B's waiter channel; nothing on the lock's channels";

  // Held to everyone else, dlock's and Redisson's callers alike.
  EXPECT_EQ(code(l_.acquire({.owner = "D:1"})), 1);
  EXPECT_EQ(code(l_.acquire({.owner = "C:1", .ticket = "12", .id = "idC"})), 1);
  EXPECT_GT(l_.c.execute({"EVAL", redisson_try_lock, "1", name, "30000", "R:1"}).integer(), 0);
  EXPECT_EQ(show(l_.release({.owner = "C:1"})), "nil");

  // B's attempt takes it with the hand-off's token; the record goes.
  const auto taken = l_.acquire({.owner = "B:1", .ticket = "11", .lease = "7000", .id = "idB"});
  EXPECT_EQ(show(taken), "[0, " + std::to_string(token) + "]");
  EXPECT_EQ(l_.cmd({"HEXISTS", k.records, "11"}), ":0");
  EXPECT_EQ(l_.counter(), token) << "no new token";
  EXPECT_EQ(l_.cmd({"HGETALL", name}), "[B:1, 1]");
  EXPECT_LE(l_.pttl(name), 7000);
  // Its resend (the reply was lost): adopted as a first acquisition's, with a new token.
  const auto resent = l_.acquire({.owner = "B:1", .ticket = "11", .lease = "7000", .id = "idB"});
  EXPECT_EQ(code(resent), 0);
  EXPECT_GT(value(resent), token);
  EXPECT_EQ(l_.cmd({"HGETALL", name}), "[B:1, 1]");
  EXPECT_EQ(b->heard(), "");
}

// A waiter whose process does not hear its waiter channel (it died) is skipped, its entry and
// record removed, and so is one whose record went stale (it stopped trying) or is missing; the
// next live one gets the lock. With nobody live the lock is free and `0` wakes the waiters.
TEST_F(scripts_handoff, an_unlock_skips_waiters_nobody_hears_and_stale_records) {
  auto s = dlock_process(l_, "idS");
  auto live = dlock_process(l_, "idL");
  ASSERT_EQ(code(l_.acquire({.owner = "A:1"})), 0);
  ASSERT_EQ(code(l_.acquire({.owner = "X:1", .ticket = "11", .id = "gone"})), 1);
  ASSERT_EQ(code(l_.acquire({.owner = "S:1", .ticket = "12", .id = "idS"})), 1);
  ASSERT_EQ(code(l_.acquire({.owner = "L:1", .ticket = "13", .id = "idL"})), 1);
  l_.cmd({"HSET", k.records, "12", std::to_string(l_.server_ms() - 1) + " idS S:1 30000 1"});
  const auto before = l_.counter();
  EXPECT_EQ(show(l_.release({.owner = "A:1"})), "1");
  EXPECT_EQ(l_.cmd({"HGETALL", name}), "[L:1, 1]");
  EXPECT_GT(l_.counter(), before);
  EXPECT_EQ(l_.cmd({"HGETALL", k.records}), "[13, g " + std::to_string(l_.counter()) + "]")
      << "X's and S's records removed";
  EXPECT_EQ(l_.cmd({"EXISTS", k.queue}), ":0");
  EXPECT_EQ(live->heard(), l_.waiter_channel("idL") + "=13 ");
  EXPECT_EQ(s->heard(), "") << "S's stale record: neither handed the lock nor told";

  ASSERT_EQ(code(l_.acquire({.owner = "L:1", .ticket = "13", .id = "idL"})), 0);
  ASSERT_EQ(code(l_.acquire({.owner = "Y:1", .ticket = "14", .id = "gone"})), 1);
  ASSERT_EQ(code(l_.acquire({.owner = "Z:1", .ticket = "15", .id = "idS"})), 1);
  l_.cmd({"HSET", k.records, "15", std::to_string(l_.server_ms() - 1) + " idS Z:1 30000 1"});
  l_.cmd({"ZADD", k.queue, "1", "16"});  // an entry without a record
  EXPECT_EQ(show(l_.release({.owner = "L:1"})), "1");
  EXPECT_EQ(l_.cmd({"EXISTS", name, k.queue, k.records}), ":0") << "free; the queue cleared";
  EXPECT_EQ(live->heard(), k.channel + "=0 ");
  EXPECT_EQ(s->heard(), k.channel + "=0 ");

  // A fenced waiter and a release without fencing: it cannot be given a token, so the lock is
  // left free and its entry kept (its re-check takes it).
  lab off{srv_, name};
  off.fenced = false;
  ASSERT_EQ(code(off.acquire({.owner = "G:1"})), 0);
  ASSERT_EQ(code(l_.acquire({.owner = "F:1", .ticket = "17", .id = "idL"})), 1);
  EXPECT_EQ(show(off.release({.owner = "G:1"})), "1");
  EXPECT_EQ(l_.cmd({"EXISTS", name}), ":0");
  EXPECT_EQ(queue(), "[17]");
  EXPECT_EQ(live->heard(), k.channel + "=0 ");
}

// A waiter that gives up sends release with its count + 1 (0 + 1) and its ticket: a hand-off
// (or an acquisition) that reached it is released and handed on; otherwise it only leaves.
TEST_F(scripts_handoff, a_waiter_that_gives_up_releases_what_it_was_handed) {
  auto b = dlock_process(l_, "idB");
  auto c = dlock_process(l_, "idC");
  ASSERT_EQ(code(l_.acquire({.owner = "A:1"})), 0);
  ASSERT_EQ(code(l_.acquire({.owner = "B:1", .ticket = "11", .id = "idB"})), 1);
  ASSERT_EQ(code(l_.acquire({.owner = "C:1", .ticket = "12", .id = "idC"})), 1);
  ASSERT_EQ(show(l_.release({.owner = "A:1"})), "1");
  ASSERT_EQ(b->heard(), l_.waiter_channel("idB") + "=11 ");

  EXPECT_EQ(show(l_.release({.owner = "B:1", .have = 1, .ticket = "11"})), "1");
  EXPECT_EQ(l_.cmd({"HGETALL", name}), "[C:1, 1]") << "handed on to C";
  EXPECT_EQ(l_.cmd({"HGETALL", k.records}), "[12, g " + std::to_string(l_.counter()) + "]");
  EXPECT_EQ(l_.cmd({"EXISTS", k.queue}), ":0");
  EXPECT_EQ(c->heard(), l_.waiter_channel("idC") + "=12 ");
  EXPECT_EQ(b->heard(), "");

  ASSERT_EQ(code(l_.acquire({.owner = "D:1", .ticket = "13", .id = "idD"})), 1);
  EXPECT_EQ(show(l_.release({.owner = "D:1", .have = 1, .ticket = "13"})), "nil")
      << "nothing reached D: it only leaves the queue";
  EXPECT_EQ(l_.cmd({"EXISTS", k.queue}), ":0");
  EXPECT_EQ(l_.cmd({"HEXISTS", k.records, "13"}), ":0");
  EXPECT_EQ(l_.cmd({"HGETALL", name}), "[C:1, 1]");

  // C's attempt took it, but its caller had given up meanwhile: the give-up releases it.
  ASSERT_EQ(code(l_.acquire({.owner = "C:1", .ticket = "12", .id = "idC"})), 0);
  EXPECT_EQ(show(l_.release({.owner = "C:1", .have = 1, .ticket = "12"})), "1");
  EXPECT_EQ(l_.cmd({"EXISTS", name, k.queue, k.records}), ":0");
  EXPECT_EQ(c->heard(), k.channel + "=0 ");
}

// When Redisson processes wait too (NUMSUB of the Redisson channel above the dlock channel's),
// a last release leaves the lock free to them: the yield marker for the window, `y` on the dlock
// channel, then `0` on the Redisson channel. dlock attempts keep off it unless a Redisson `0`
// woke them.
TEST_F(scripts_handoff, a_free_lock_is_left_to_redisson_waiters_first) {
  auto redisson = std::make_unique<listener>(srv_, std::vector<std::string>{k.channel});
  auto d = dlock_process(l_, "idD");
  ASSERT_EQ(code(l_.acquire({.owner = "A:1"})), 0);
  ASSERT_EQ(code(l_.acquire({.owner = "D:1", .ticket = "11", .id = "idD"})), 1);
  const auto d_record = record("11");
  EXPECT_EQ(show(l_.release({.owner = "A:1", .window = "5000"})), "1");
  EXPECT_EQ(l_.cmd({"EXISTS", name}), ":0");
  EXPECT_GT(l_.pttl(k.yield), 0);
  EXPECT_LE(l_.pttl(k.yield), 5000) << "the window";
  EXPECT_EQ(d->heard(), k.dlock_channel + "=y " + k.channel + "=0 ");
  EXPECT_EQ(redisson->heard(), k.channel + "=0 ");
  EXPECT_EQ(queue(), "[11]") << "not handed to D";
  EXPECT_EQ(record("11"), d_record);

  const auto kept_off = l_.acquire({.owner = "D:1", .ticket = "11", .id = "idD"});
  EXPECT_EQ(code(kept_off), 2) << show(kept_off);
  EXPECT_GT(value(kept_off), 0);
  EXPECT_LE(value(kept_off), 5000) << "the marker's PTTL";
  EXPECT_EQ(code(l_.acquire({.owner = "E:1"})), 2);
  EXPECT_EQ(l_.cmd({"EXISTS", name}), ":0");
  const auto woken = l_.acquire({.owner = "D:1", .ticket = "11", .id = "idD", .foreign = true});
  EXPECT_EQ(show(woken), "[0, " + std::to_string(l_.counter()) + "]");
  EXPECT_EQ(l_.cmd({"EXISTS", k.yield}), ":0") << "taken: the marker ends";
  EXPECT_EQ(l_.cmd({"HGETALL", name}), "[D:1, 1]");
  EXPECT_EQ(l_.cmd({"EXISTS", k.queue, k.records}), ":0");

  // No Redisson process waits any more: the one dlock process, on both channels, is handed it.
  redisson.reset();
  ASSERT_TRUE(
      dlock::test::wait_until([&] { return dlock::test::numsub(srv_, k.channel) == 1; }, 5s));
  ASSERT_EQ(code(l_.acquire({.owner = "G:1", .ticket = "12", .id = "idD"})), 1);
  EXPECT_EQ(show(l_.release({.owner = "D:1", .window = "5000"})), "1");
  EXPECT_EQ(l_.cmd({"HGETALL", name}), "[G:1, 1]");
  EXPECT_EQ(l_.cmd({"EXISTS", k.yield}), ":0");
  EXPECT_EQ(d->heard(), l_.waiter_channel("idD") + "=12 ");
}

// Runs every path of the scripts on `l` — hand-off, `0`, yield — and checks what they wrote
// and published; `keys_in_slot`: every key in the server is in the name's slot.
void run_every_path(lab& l, bool keys_in_slot) {
  const auto& k = l.k;
  auto b = dlock_process(l, "idB");
  const auto a = l.acquire({.owner = "A:1"});
  ASSERT_EQ(code(a), 0) << show(a);
  ASSERT_EQ(code(l.acquire({.owner = "B:1", .ticket = "11", .id = "idB"})), 1);
  ASSERT_EQ(show(l.release({.owner = "A:1"})), "1");
  EXPECT_EQ(b->heard(), l.waiter_channel("idB") + "=11 ");
  const auto handed = l.acquire({.owner = "B:1", .ticket = "11", .id = "idB"});
  EXPECT_EQ(show(handed), "[0, " + std::to_string(l.counter()) + "]");
  const auto renew = dlock::test::eval(l.c, dlock::scripts::lock_renew, {l.name}, {"9000", "hB:1"});
  // The PTTL read after the PEXPIRE may be a millisecond or so below the lease.
  const auto left = std::stol(show(renew).substr(1));
  EXPECT_TRUE(left > 8000 && left <= 9000) << show(renew);
  const auto inspect =
      dlock::test::eval(l.c, dlock::scripts::lock_inspect,
                        {l.name, k.slot_counter, dlock::keys::holder_info(l.name), k.queue}, {});
  EXPECT_EQ(show(inspect.r.elements().at(1)), "[B:1, 1]") << show(inspect);
  listener redisson{l.srv, {k.channel}};
  ASSERT_EQ(code(l.acquire({.owner = "C:1", .ticket = "12", .id = "idB"})), 1);
  EXPECT_EQ(show(l.release({.owner = "B:1", .window = "5000"})), "1");
  EXPECT_EQ(b->heard(), k.dlock_channel + "=y " + k.channel + "=0 ");
  EXPECT_EQ(code(l.acquire({.owner = "C:1", .ticket = "12", .id = "idB"})), 2);
  if (keys_in_slot) {
    const auto all = l.cmd({"KEYS", "*"});  // "[a, b, ...]": lock names hold no ", "
    std::size_t n = 0;
    for (std::size_t at = 1; at < all.size(); ++n) {
      const auto end = std::min(all.find(", ", at), all.size() - 1);
      const auto key = all.substr(at, end - at);
      EXPECT_EQ(dlock::keys::slot(key), dlock::keys::slot(l.name)) << key;
      at = end + 2;
    }
    EXPECT_EQ(n, 4u) << all << ": the queue, its records, the marker and the counter";
  }
  const auto woken = l.acquire({.owner = "C:1", .ticket = "12", .id = "idB", .foreign = true});
  EXPECT_EQ(show(woken), "[0, " + std::to_string(l.counter()) + "]");
  EXPECT_EQ(show(dlock::test::eval(l.c, dlock::scripts::mutex_force_unlock, {l.name}, {k.channel})),
            "1");
  EXPECT_EQ(b->heard(), k.channel + "=0 ");
}

TEST(scripts_layout, every_key_and_channel_is_in_the_names_slot) {
  dlock::test::redis_server srv;
  const auto tag = dlock::test::unique_name("tag");
  for (const auto& name : {dlock::test::unique_name("lock"), "pre{" + tag + "}post"}) {
    SCOPED_TRACE(name);
    srv.command({"FLUSHALL"});
    lab l{srv, name};
    const auto& k = l.k;
    const auto slot = dlock::keys::slot(name);
    for (const auto& key :
         {k.queue, k.records, k.yield, k.channel, k.dlock_channel, k.slot_counter, k.lock_counter,
          l.waiter_channel("idB"), dlock::keys::holder_info(name)}) {
      EXPECT_EQ(dlock::keys::slot(key), slot) << key;
    }
    if (name.find('{') != std::string::npos) {
      EXPECT_EQ(dlock::keys::slot(name), dlock::keys::slot(tag));
      EXPECT_EQ(k.queue, "dlock_lock_queue:" + name) << "the name's own tag kept";
      EXPECT_EQ(k.yield, name + ":dlock_yield");
      EXPECT_EQ(l.waiter_channel("idB"), "dlock_lock__channel:" + name + ":idB");
    } else {
      EXPECT_EQ(k.channel, "redisson_lock__channel:{" + name + "}");
      EXPECT_EQ(k.yield, "{" + name + "}:dlock_yield");
    }
    run_every_path(l, true);
  }
}

// A single-node Redis Cluster checks that a script's keys share one slot (CROSSSLOT otherwise).
TEST(scripts_layout, the_scripts_run_in_one_slot_of_a_cluster) {
  const auto node = dlock::test::start_cluster_node();
  auto& srv = *node;
  const auto tag = dlock::test::unique_name("tag");
  for (const auto& name : {dlock::test::unique_name("lock"), "pre{" + tag + "}post"}) {
    SCOPED_TRACE(name);
    lab l{srv, name};
    run_every_path(l, false);
  }
  // The check is on: keys of two slots in one call are refused.
  lab l{srv};
  auto keys = l.keys();
  keys[3] = "elsewhere";
  ASSERT_NE(dlock::keys::slot("elsewhere"), dlock::keys::slot(l.name));
  const auto r = dlock::test::eval(l.c, dlock::scripts::mutex_acquire, keys,
                                   {"30000", "A:1", "0", "", "5000", "id", "0"});
  EXPECT_EQ(r.ec, dlock::errc::cross_slot) << show(r);
}

}  // namespace
