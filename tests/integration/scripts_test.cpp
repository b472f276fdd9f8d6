// Embedded scripts: EVALSHA with transparent reload after SCRIPT FLUSH, and the contracts of the
// mutex scripts (their header comments) against a real server: one owner's holds, fencing
// tokens, renewals, force unlock and inspect. The queue and hand-offs: scripts_handoff_test.cpp.
#include <gtest/gtest.h>

#include <map>

#include "dlock/mutex.hpp"
#include "runtime/client_access.hpp"
#include "script_lab.hpp"

using namespace std::chrono_literals;
using dlock::test::lab;
using dlock::test::listener;
using dlock::test::show;

namespace {

class scripts_lab : public testing::Test {
 protected:
  dlock::test::redis_server srv_;
  lab l_{srv_};
  const std::string& name = l_.name;
  const dlock::detail::lock_keys& k = l_.k;
};

TEST(scripts, embedded_sha1_matches_what_redis_computes) {
  dlock::test::redis_server srv;
  for (const auto* s :
       {&dlock::scripts::mutex_acquire, &dlock::scripts::mutex_release, &dlock::scripts::lock_renew,
        &dlock::scripts::mutex_force_unlock, &dlock::scripts::lock_inspect}) {
    EXPECT_EQ(srv.command({"SCRIPT", "LOAD", std::string(s->text)}), s->sha1) << s->name;
  }
}

TEST_F(scripts_lab, reloads_after_script_flush) {
  auto first = l_.acquire({.owner = "A:1"});
  ASSERT_FALSE(first.ec) << first.ec.message();
  EXPECT_EQ(dlock::detail::client_access::impl(l_.c).scripts().reloads(), 1u)
      << "a fresh server has no scripts";
  for (unsigned i = 0; i < 3; ++i) {
    srv_.command({"SCRIPT", "FLUSH"});
    auto again = l_.acquire({.owner = "A:1"});  // a resend: adopted
    EXPECT_EQ(dlock::test::code(again), 0) << show(again);
    EXPECT_EQ(dlock::detail::client_access::impl(l_.c).scripts().reloads(), 2u + i);
  }
  EXPECT_FALSE(l_.acquire({.owner = "A:1"}).ec);
  EXPECT_EQ(dlock::detail::client_access::impl(l_.c).scripts().reloads(), 4u)
      << "cached now: no reload";
}

// A first acquisition, its resend, re-entries, a lost count, partial and last releases, and
// their resends, in Redisson's RLock layout.
TEST_F(scripts_lab, one_owners_holds_follow_the_redisson_layout) {
  const auto before_us = l_.server_ms() * 1000;
  const auto a = l_.acquire({.owner = "A:1"});
  ASSERT_EQ(dlock::test::code(a), 0) << show(a);
  const auto t1 = dlock::test::value(a);
  EXPECT_GE(t1, before_us) << "a fresh counter starts at the server's clock (µs)";
  EXPECT_LE(t1, (l_.server_ms() + 1) * 1000);
  EXPECT_EQ(l_.counter(), t1);
  EXPECT_EQ(l_.cmd({"HGETALL", name}), "[A:1, 1]");
  EXPECT_GT(l_.pttl(name), 29000);
  EXPECT_EQ(l_.cmd({"DBSIZE"}), ":2") << "the lock and the slot's counter; nothing else";
  EXPECT_EQ(l_.cmd({"EXISTS", k.lock_counter}), ":0") << "RFencedLock's counter never created";

  // Resent after a lost reply: adopted, not counted twice, the lease restarts, and a new token
  // (the first never reached the caller).
  l_.cmd({"PEXPIRE", name, "1000"});
  const auto resent = l_.acquire({.owner = "A:1"});
  const auto t2 = dlock::test::value(resent);
  EXPECT_EQ(show(resent), "[0, " + std::to_string(t2) + "]");
  EXPECT_GT(t2, t1) << "tokens strictly increase";
  EXPECT_EQ(l_.counter(), t2);
  EXPECT_EQ(l_.cmd({"HGETALL", name}), "[A:1, 1]");
  EXPECT_GT(l_.pttl(name), 29000);

  EXPECT_EQ(show(l_.acquire({.owner = "A:1", .have = 1})), "[0, 0]") << "re-entry: no token";
  EXPECT_EQ(l_.cmd({"HGETALL", name}), "[A:1, 2]");
  EXPECT_EQ(show(l_.acquire({.owner = "A:1", .have = 1})), "[0, 0]") << "its resend: adopted";
  EXPECT_EQ(l_.cmd({"HGETALL", name}), "[A:1, 2]");
  EXPECT_EQ(l_.counter(), t2) << "re-entries draw no token";
  EXPECT_EQ(show(l_.acquire({.owner = "A:1", .have = 5})), "[3, 2]") << "a count A did not expect";
  EXPECT_EQ(l_.cmd({"HGETALL", name}), "[A:1, 2]");

  EXPECT_EQ(show(l_.release({.owner = "B:1"})), "nil") << "not the owner: nothing changes";
  EXPECT_EQ(l_.cmd({"HGETALL", name}), "[A:1, 2]");

  l_.cmd({"PEXPIRE", name, "1000"});
  EXPECT_EQ(show(l_.release({.owner = "A:1", .have = 2})), "0") << "a hold remains";
  EXPECT_EQ(l_.cmd({"HGETALL", name}), "[A:1, 1]");
  EXPECT_GT(l_.pttl(name), 29000) << "the partial release set the lease again";
  EXPECT_EQ(show(l_.release({.owner = "A:1", .have = 2})), "-1") << "its resend: applied already";
  EXPECT_EQ(l_.cmd({"HGETALL", name}), "[A:1, 1]");

  // The last hold, nobody queued: the key goes and `0` wakes a waiter (here a dlock process on
  // both channels, as dlock waiters are: nobody left to yield to).
  listener w{srv_, {k.channel, k.dlock_channel}};
  EXPECT_EQ(show(l_.release({.owner = "A:1"})), "1");
  EXPECT_EQ(l_.cmd({"EXISTS", name}), ":0");
  EXPECT_EQ(w.heard(), k.channel + "=0 ");
  EXPECT_EQ(l_.cmd({"DBSIZE"}), ":1") << "the counter alone";
  EXPECT_EQ(show(l_.release({.owner = "A:1"})), "nil") << "resent after the key went";
  EXPECT_EQ(w.heard(), "") << "nothing published again";
  EXPECT_EQ(show(l_.acquire({.owner = "A:1", .have = 1})), "[3, 0]") << "a re-entry of a lost hold";
  EXPECT_EQ(l_.cmd({"EXISTS", name}), ":0");

  const auto b = l_.acquire({.owner = "B:1"});
  EXPECT_GT(dlock::test::value(b), t2) << "tokens strictly increase";
}

// A holder's re-entry that was applied but whose caller gave it up leaves the field above the
// count the caller knows: its next attempt or release settles it.
TEST_F(scripts_lab, abandoned_re_entries_heal) {
  l_.cmd({"HSET", name, "A:1", "3"});  // A knows of 1 hold; two re-entries were applied
  EXPECT_EQ(show(l_.acquire({.owner = "A:1", .have = 1})), "[0, 0]");
  EXPECT_EQ(l_.cmd({"HGET", name, "A:1"}), "2") << "have + 1";
  EXPECT_GT(l_.pttl(name), 29000);
  l_.cmd({"HSET", name, "A:1", "3"});  // A knows of 2
  EXPECT_EQ(show(l_.release({.owner = "A:1", .have = 2})), "0");
  EXPECT_EQ(l_.cmd({"HGET", name, "A:1"}), "1") << "have - 1";
  EXPECT_GT(l_.pttl(name), 29000);
  l_.cmd({"HSET", name, "A:1", "2"});  // A knows of 1
  EXPECT_EQ(show(l_.release({.owner = "A:1", .have = 1})), "1");
  EXPECT_EQ(l_.cmd({"EXISTS", name}), ":0") << "have - 1 = 0: freed";
}

// A counter is read as digits below 2^53 - 1 (the check compares the digits, before any
// conversion): 2^53 - 2 goes on to 2^53 - 1, which is issued; from there, and from anything
// longer or not a number, an acquisition is refused with nothing written. Leading zeros are
// digits like any other, and shorter digits are below the limit whatever they sort as.
TEST_F(scripts_lab, a_fencing_counter_is_read_as_digits_below_two_to_the_53) {
  auto acquire_free = [&] {
    l_.cmd({"DEL", name});
    return l_.acquire({.owner = "A:1"});
  };
  l_.cmd({"SET", k.slot_counter, "9007199254740990"});
  EXPECT_EQ(show(acquire_free()), "[0, 9007199254740991]");
  EXPECT_EQ(l_.cmd({"GET", k.slot_counter}), "9007199254740991");
  for (const char* bad :
       {"9007199254740991", "9999999999999999", "10000000000000000", "12a", "-5", ""}) {
    l_.cmd({"SET", k.slot_counter, bad});
    auto r = acquire_free();
    EXPECT_EQ(r.ec, dlock::errc::server_error) << "counter '" << bad << "': " << show(r);
    EXPECT_EQ(l_.cmd({"EXISTS", name}), ":0") << "counter '" << bad << "': no lock left held";
    EXPECT_EQ(l_.cmd({"GET", k.slot_counter}), bad) << "counter untouched";
  }
  for (const char* small : {"95", "901", "0000000000000005"}) {
    l_.cmd({"SET", k.slot_counter, small});
    auto r = acquire_free();
    ASSERT_EQ(dlock::test::code(r), 0) << "counter '" << small << "': " << show(r);
    EXPECT_GT(dlock::test::value(r), 1000000000000000) << "the clock's microseconds";
    EXPECT_EQ(l_.cmd({"GET", k.slot_counter}), std::to_string(dlock::test::value(r)));
  }
  // A counter of another type is refused, not overwritten.
  l_.cmd({"DEL", k.slot_counter});
  l_.cmd({"HSET", k.slot_counter, "f", "v"});
  EXPECT_EQ(acquire_free().ec, dlock::errc::wrong_type);
  EXPECT_EQ(l_.cmd({"EXISTS", name}), ":0");
  EXPECT_EQ(l_.cmd({"HGETALL", k.slot_counter}), "[f, v]");
}

// The slot's counter is shared by every lock of the slot, and RFencedLock's counter of the name
// is read beside it, advanced when it exists, never created; a bad one is refused before any
// write, one of another type is no counter and is left alone.
TEST_F(scripts_lab, tokens_stay_above_rfencedlocks_counter_and_the_slots_other_locks) {
  const auto tag = dlock::test::unique_name("tag");
  lab one{srv_, "one{" + tag + "}"}, two{srv_, "two{" + tag + "}"};
  ASSERT_EQ(one.k.slot_counter, two.k.slot_counter) << "one slot, one counter";
  const auto t1 = dlock::test::value(one.acquire({.owner = "A:1"}));
  const auto t2 = dlock::test::value(two.acquire({.owner = "A:1"}));
  EXPECT_GT(t2, t1);
  EXPECT_EQ(l_.cmd({"EXISTS", one.k.lock_counter, two.k.lock_counter}), ":0");

  // RFencedLock INCRed its counter ahead of the clock: dlock goes on from it, and advances both.
  l_.cmd({"SET", k.lock_counter, "9000000000000000"});
  EXPECT_EQ(show(l_.acquire({.owner = "A:1"})), "[0, 9000000000000001]");
  EXPECT_EQ(l_.cmd({"GET", k.lock_counter}), "9000000000000001");
  EXPECT_EQ(l_.cmd({"GET", k.slot_counter}), "9000000000000001");
  l_.cmd({"DEL", name});
  l_.cmd({"SET", k.lock_counter, "41"});  // behind: kept above all the same
  EXPECT_EQ(show(l_.acquire({.owner = "B:1"})), "[0, 9000000000000002]");
  EXPECT_EQ(l_.cmd({"GET", k.lock_counter}), "9000000000000002");

  l_.cmd({"DEL", name});
  l_.cmd({"SET", k.lock_counter, "not a number"});
  auto bad = l_.acquire({.owner = "C:1"});
  EXPECT_EQ(bad.ec, dlock::errc::server_error) << show(bad);
  EXPECT_EQ(l_.cmd({"EXISTS", name}), ":0") << "no lock left held";
  EXPECT_EQ(l_.cmd({"GET", k.slot_counter}), "9000000000000002") << "nothing written";

  l_.cmd({"DEL", k.lock_counter});
  l_.cmd({"HSET", k.lock_counter, "f", "v"});
  EXPECT_EQ(show(l_.acquire({.owner = "C:1"})), "[0, 9000000000000003]");
  EXPECT_EQ(l_.cmd({"HGETALL", k.lock_counter}), "[f, v]") << "left alone";
}

// Fencing off: four keys, no counter touched, token 0.
TEST_F(scripts_lab, without_fencing_no_counter_is_touched) {
  l_.fenced = false;
  EXPECT_EQ(show(l_.acquire({.owner = "A:1"})), "[0, 0]");
  EXPECT_EQ(show(l_.acquire({.owner = "A:1"})), "[0, 0]") << "a resend";
  EXPECT_EQ(l_.cmd({"HGETALL", name}), "[A:1, 1]");
  EXPECT_EQ(l_.cmd({"DBSIZE"}), ":1");
  EXPECT_EQ(show(l_.release({.owner = "A:1"})), "1");
  EXPECT_EQ(l_.cmd({"DBSIZE"}), ":0");
}

// A key of another type is never read as held (WRONGTYPE, reported), and a queue key of another
// type never fails the lock (the queue's commands are pcalls: the waiter re-checks instead).
TEST_F(scripts_lab, a_key_of_another_type_is_reported_never_waited_on) {
  l_.cmd({"SET", name, "not a hash"});
  EXPECT_EQ(l_.acquire({.owner = "A:1"}).ec, dlock::errc::wrong_type);
  EXPECT_EQ(l_.acquire({.owner = "A:1", .ticket = "7"}).ec, dlock::errc::wrong_type);
  EXPECT_EQ(l_.release({.owner = "A:1"}).ec, dlock::errc::wrong_type);
  EXPECT_EQ(l_.cmd({"GET", name}), "not a hash");
  EXPECT_EQ(l_.cmd({"EXISTS", k.queue}), ":0") << "not queued behind it";

  l_.cmd({"DEL", name});
  l_.cmd({"SET", k.queue, "x"});
  ASSERT_EQ(dlock::test::code(l_.acquire({.owner = "A:1"})), 0);
  const auto b = l_.acquire({.owner = "B:1", .ticket = "7", .id = "idB"});
  EXPECT_EQ(dlock::test::code(b), 1) << show(b);
  EXPECT_EQ(l_.cmd({"GET", k.queue}), "x");
  EXPECT_EQ(show(l_.release({.owner = "A:1"})), "1");
  EXPECT_EQ(l_.cmd({"EXISTS", name}), ":0");
}

// What a lock+unlock pair costs the server, in the commands its scripts run: the hot path of
// every uncontended user. Acquire: EXISTS of the lock and of the yield marker, MGET of both
// counters, HSET, PEXPIRE, TIME, SET; a waiter's attempt also takes its ticket out (ZREM).
// Release: HGET, DEL, PUBSUB NUMSUB, ZRANGE of the (missing) queue, PUBLISH (TIME only when a
// waiter is queued).
TEST_F(scripts_lab, an_uncontended_pair_runs_twelve_commands) {
  auto pair = [&](const std::string& ticket) {
    srv_.command({"CONFIG", "RESETSTAT"});
    EXPECT_EQ(dlock::test::code(l_.acquire({.owner = "A:1", .ticket = ticket})), 0);
    EXPECT_EQ(show(l_.release({.owner = "A:1"})), "1");
    std::map<std::string, long long> ran;
    for (const char* cmd : {"exists", "hget", "get", "mget", "hset", "hincrby", "pexpire", "time",
                            "set", "zrem", "hdel", "del", "zrange", "pubsub|numsub", "publish"}) {
      if (const auto n = dlock::test::command_stat(srv_, cmd)) ran[cmd] = n;
    }
    return ran;
  };
  pair("");  // the slot's counter exists from here on
  const std::map<std::string, long long> plain{
      {"exists", 2}, {"mget", 1},          {"hset", 1}, {"pexpire", 1}, {"time", 1},   {"set", 1},
      {"hget", 1},   {"pubsub|numsub", 1}, {"del", 1},  {"zrange", 1},  {"publish", 1}};
  EXPECT_EQ(pair(""), plain);
  auto waiter = plain;
  waiter["zrem"] = 1;
  EXPECT_EQ(pair("42"), waiter);
  // dlock::mutex runs the two scripts, nothing else.
  dlock::mutex m{l_.c, name};
  srv_.command({"CONFIG", "RESETSTAT"});
  m.lock();
  m.unlock();
  EXPECT_EQ(dlock::test::command_stat(srv_, "evalsha"), 2);
  EXPECT_EQ(dlock::test::command_stat(srv_, "hget"), 1) << "the release's";
}

TEST_F(scripts_lab, renew_reports_each_keys_pttl_or_minus_2) {
  const auto other = dlock::test::unique_name("lock"), missing = dlock::test::unique_name("lock");
  const auto wrong = dlock::test::unique_name("lock"), forever = dlock::test::unique_name("lock");
  ASSERT_EQ(dlock::test::code(l_.acquire({.owner = "A:1", .lease = "1000"})), 0);
  l_.cmd({"HSET", other, "B:1", "1"});
  l_.cmd({"PEXPIRE", other, "1000"});
  l_.cmd({"HSET", forever, "A:1", "1"});
  l_.cmd({"SET", wrong, "string"});
  auto r =
      dlock::test::eval(l_.c, dlock::scripts::lock_renew, {name, missing, other, wrong, forever},
                        {"60000", "hA:1", "hA:1", "hA:1", "hA:1", "hA:1"});
  ASSERT_EQ(r.r.elements().size(), 5u) << show(r);
  const auto renewed = r.r.elements()[0].integer();
  EXPECT_GT(renewed, 59000);
  EXPECT_LE(renewed, 60000);
  EXPECT_EQ(show(r.r.elements()[1]) + show(r.r.elements()[2]) + show(r.r.elements()[3]), "-2-2-2")
      << "missing, another owner's, another type";
  EXPECT_GT(r.r.elements()[4].integer(), 59000) << "a hold without expiry gets one";
  EXPECT_LE(l_.pttl(other), 1000) << "another owner's lease untouched";

  // Lease '0': only checks, every TTL as it is.
  l_.cmd({"PERSIST", forever});
  const auto before = l_.pttl(name);
  auto check = dlock::test::eval(l_.c, dlock::scripts::lock_renew, {name, missing, forever},
                                 {"0", "hA:1", "hA:1", "hA:1"});
  ASSERT_EQ(check.r.elements().size(), 3u) << show(check);
  EXPECT_LE(check.r.elements()[0].integer(), before);
  EXPECT_GT(check.r.elements()[0].integer(), 50000);
  EXPECT_EQ(show(check).substr(show(check).find(',')), ", -2, -1]");
  EXPECT_LE(l_.pttl(name), before) << "not renewed";
  EXPECT_EQ(l_.pttl(forever), -1);
}

TEST_F(scripts_lab, force_unlock_deletes_and_publishes) {
  listener w{srv_, {k.channel, k.dlock_channel}};
  ASSERT_EQ(dlock::test::code(l_.acquire({.owner = "A:1"})), 0);
  auto force = [&] {
    return show(dlock::test::eval(l_.c, dlock::scripts::mutex_force_unlock, {name}, {k.channel}));
  };
  EXPECT_EQ(force(), "1");
  EXPECT_EQ(l_.cmd({"EXISTS", name}), ":0");
  EXPECT_EQ(w.heard(), k.channel + "=0 ");
  EXPECT_EQ(force(), "0");
  EXPECT_EQ(w.heard(), "") << "nothing to wake";
}

TEST_F(scripts_lab, inspect_reads_a_consistent_snapshot) {
  const auto info = dlock::keys::holder_info(name);
  auto inspect = [&](std::string_view counter) {
    return dlock::test::eval(l_.c, dlock::scripts::lock_inspect, {name, counter, info, k.queue},
                             {});
  };
  EXPECT_EQ(show(inspect(k.slot_counter)), "[none, [], -2, nil, [], 0]") << "nil: false";
  const auto t = dlock::test::value(l_.acquire({.owner = "A:1"}));
  l_.acquire({.owner = "A:1", .have = 1});
  l_.acquire({.owner = "B:1", .ticket = "7", .id = "idB"});
  l_.acquire({.owner = "C:1", .ticket = "8", .id = "idC"});
  l_.cmd({"HSET", info, "A:1:host", "h"});
  auto r = inspect(k.slot_counter);
  ASSERT_EQ(r.r.elements().size(), 6u) << show(r);
  EXPECT_EQ(show(r.r.elements()[0]) + " " + show(r.r.elements()[1]), "hash [A:1, 2]");
  EXPECT_GT(r.r.elements()[2].integer(), 29000);
  EXPECT_EQ(show(r.r.elements()[3]), std::to_string(t));
  EXPECT_EQ(show(r.r.elements()[4]) + " " + show(r.r.elements()[5]), "[A:1:host, h] 2");
  EXPECT_EQ(show(inspect(name).r.elements()[3]), "nil") << "fencing off: no counter read";
  l_.cmd({"DEL", k.queue});
  l_.cmd({"SET", k.queue, "x"});
  EXPECT_EQ(show(inspect(name).r.elements()[5]), "0") << "a queue of another type: none";
}

}  // namespace
