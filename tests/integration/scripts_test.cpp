// Embedded scripts: EVALSHA with transparent reload after SCRIPT FLUSH, and the contracts of the
// mutex scripts against a real server.
#include <gtest/gtest.h>

#include <future>
#include <map>
#include <thread>

#include "dlock/client.hpp"
#include "dlock/keys.hpp"
#include "dlock/mutex.hpp"
#include "runtime/client_impl.hpp"
#include "scripts/script.hpp"
#include "sync/mutex_ops.hpp"
#include "support/child_process.hpp"
#include "support/redis_server.hpp"
#include "test_util.hpp"

using namespace std::chrono_literals;

namespace {

struct result {
  std::error_code ec;
  dlock::reply r;
};

result eval(dlock::client& c, const dlock::scripts::script& s, std::vector<std::string_view> keys,
            std::vector<std::string_view> args) {
  std::promise<result> p;
  c.impl().scripts().eval(s, keys, args, 5s, [&](std::error_code ec, dlock::reply r) {
    p.set_value({ec, std::move(r)});
  });
  auto f = p.get_future();
  EXPECT_EQ(f.wait_for(10s), std::future_status::ready);
  return f.get();
}

TEST(scripts, embedded_sha1_matches_what_redis_computes) {
  dlock::test::redis_server srv;
  dlock::client c{dlock::config::from_uri(srv.url())};
  for (const auto* s : {&dlock::scripts::mutex_acquire, &dlock::scripts::mutex_release,
                        &dlock::scripts::mutex_renew, &dlock::scripts::mutex_force_unlock}) {
    auto sha = c.execute({"SCRIPT", "LOAD", std::string(s->text)});
    EXPECT_EQ(sha.str(), s->sha1) << s->name;
  }
}

// The hand-off and grant fields are spelled in the Lua scripts and in keys.hpp (for inspect and
// the CLI): the two must not drift apart.
TEST(scripts, the_scripts_use_the_handoff_and_grant_fields_keys_hpp_names) {
  const std::string handoff = "'" + std::string{dlock::keys::handoff_field} + "'";
  const std::string grant = "'" + std::string{dlock::keys::grant_field} + "'";
  for (const auto* s : {&dlock::scripts::mutex_acquire, &dlock::scripts::mutex_release}) {
    const std::string text{s->text};
    EXPECT_NE(text.find(handoff), std::string::npos) << s->name;
    EXPECT_NE(text.find(grant), std::string::npos) << s->name;
    std::size_t at = 0, quoted = 0;
    while ((at = text.find("'dlock:", at)) != std::string::npos) {
      EXPECT_TRUE(text.compare(at, handoff.size(), handoff) == 0 || text.compare(at, grant.size(), grant) == 0)
          << s->name << ": another dlock: field at " << at;
      ++at;
      ++quoted;
    }
    EXPECT_GT(quoted, 0u);
  }
}

TEST(scripts, reloads_after_script_flush) {
  dlock::test::redis_server srv;
  dlock::client c{dlock::config::from_uri(srv.url())};
  const auto name = dlock::test::unique_name("lock");
  const auto token = "redisson_lock_token:{" + name + "}";
  auto first = eval(c, dlock::scripts::mutex_acquire, {name, token}, {"30000", "owner:1", "0"});
  ASSERT_FALSE(first.ec) << first.ec.message();
  EXPECT_EQ(c.impl().scripts().reloads(), 1u) << "a fresh server has no scripts";
  for (int i = 0; i < 3; ++i) {
    srv.command({"SCRIPT", "FLUSH"});
    auto again = eval(c, dlock::scripts::mutex_acquire, {name, token}, {"30000", "owner:1", "0"});
    EXPECT_FALSE(again.ec) << again.ec.message();
    EXPECT_EQ(c.impl().scripts().reloads(), 2u + static_cast<unsigned>(i));
  }
  // Cached now: no reload.
  auto cached = eval(c, dlock::scripts::mutex_acquire, {name, token}, {"30000", "owner:1", "0"});
  EXPECT_FALSE(cached.ec);
  EXPECT_EQ(c.impl().scripts().reloads(), 4u);
}

TEST(scripts, mutex_acquire_and_release_follow_the_redisson_layout) {
  dlock::test::redis_server srv;
  dlock::client c{dlock::config::from_uri(srv.url())};
  const auto name = dlock::test::unique_name("lock");
  const std::string token{dlock::keys::shared_fencing_counter};
  const auto channel = "redisson_lock__channel:{" + name + "}";
  auto acquire = [&](const char* owner, const char* have) {
    return eval(c, dlock::scripts::mutex_acquire, {name, token}, {"30000", owner, have});
  };
  auto release = [&](const char* owner, const char* have) {
    return eval(c, dlock::scripts::mutex_release, {name, channel}, {"0", "30000", owner, have});
  };

  auto a = acquire("A:1", "0");
  ASSERT_FALSE(a.ec);
  ASSERT_EQ(a.r.elements().size(), 2u);
  EXPECT_EQ(a.r.elements()[0].integer(), 0);
  const auto first = a.r.elements()[1].integer();
  // max(counter + 1, server time in us): a fresh counter starts at the server's clock.
  const auto server_us = [&] {
    auto t = c.execute({"TIME"});
    return std::stoll(t.elements()[0].str()) * 1000000 + std::stoll(t.elements()[1].str());
  };
  EXPECT_GT(first, server_us() - 60'000'000) << "first fencing token: the server's time in us";
  EXPECT_LE(first, server_us());
  EXPECT_EQ(c.execute({"GET", token}).str(), std::to_string(first));
  EXPECT_EQ(c.execute({"HGET", name, "A:1"}).str(), "1");
  EXPECT_GT(c.execute({"PTTL", name}).integer(), 29000);

  // Resent after a lost reply: reported again, not counted twice, and the lease restarts (the
  // caller trusts it from the resend); a new token, as the first never reached the caller.
  c.execute({"PEXPIRE", name, "1000"});
  auto resent = acquire("A:1", "0");
  const auto second = resent.r.elements()[1].integer();
  EXPECT_GT(second, first);
  EXPECT_EQ(c.execute({"GET", token}).str(), std::to_string(second));
  EXPECT_EQ(c.execute({"HGET", name, "A:1"}).str(), "1");
  EXPECT_GT(c.execute({"PTTL", name}).integer(), 29000);

  auto again = acquire("A:1", "1");
  EXPECT_EQ(again.r.elements()[1].integer(), 0) << "a re-entry keeps its first token: none issued";
  EXPECT_EQ(c.execute({"GET", token}).str(), std::to_string(second)) << "counter untouched";
  EXPECT_EQ(c.execute({"HGET", name, "A:1"}).str(), "2");

  auto b = acquire("B:1", "0");
  ASSERT_EQ(b.r.elements().size(), 1u) << "held by A: B gets the pttl";
  EXPECT_GT(b.r.elements()[0].integer(), 0);
  auto stale = acquire("A:1", "5");
  EXPECT_EQ(stale.r.elements()[0].integer(), -1) << "a count A does not expect";

  EXPECT_TRUE(release("B:1", "1").r.is_nil()) << "not the owner: nothing changes";
  EXPECT_EQ(c.execute({"HGET", name, "A:1"}).str(), "2");

  EXPECT_EQ(release("A:1", "2").r.integer(), 0);
  EXPECT_EQ(release("A:1", "2").r.integer(), -1) << "resent release is not applied twice";
  EXPECT_EQ(c.execute({"HGET", name, "A:1"}).str(), "1");
  EXPECT_EQ(release("A:1", "1").r.integer(), 1);
  EXPECT_EQ(c.execute({"EXISTS", name}).integer(), 0);
  EXPECT_TRUE(release("A:1", "1").r.is_nil());

  auto b2 = acquire("B:1", "0");
  EXPECT_GT(b2.r.elements()[1].integer(), second) << "tokens strictly increase";
  release("B:1", "1");
  // A counter ahead of the clock (a clock that went back, or Redisson's RFencedLock INCRing a
  // per-lock counter) goes on by one.
  c.execute({"SET", token, "9000000000000000"});
  EXPECT_EQ(acquire("C:1", "0").r.elements()[1].integer(), 9000000000000001);
  // The shared counter: another lock's first acquisition goes on from there too.
  const auto other = dlock::test::unique_name("lock");
  auto o = eval(c, dlock::scripts::mutex_acquire, {other, token}, {"30000", "D:1", "0"});
  EXPECT_EQ(o.r.elements()[1].integer(), 9000000000000002);
  // Written as its digits, zeros inside included (the scripts print integers in two parts).
  EXPECT_EQ(c.execute({"GET", token}).str(), "9000000000000002");
  c.execute({"SET", token, "9007199254740989"});  // the last that goes on: 2^53 - 1 is refused
  auto top = eval(c, dlock::scripts::mutex_acquire, {dlock::test::unique_name("lock"), token}, {"30000", "E:1", "0"});
  EXPECT_EQ(top.r.elements()[1].integer(), 9007199254740990);
  EXPECT_EQ(c.execute({"GET", token}).str(), "9007199254740990");
}


// A server, a client, a lock name with its keys, and both fencing counters' names.
struct counter_lab {
  dlock::test::redis_server srv;
  dlock::client c{dlock::config::from_uri(srv.url())};
  std::string name = dlock::test::unique_name("lock");
  dlock::detail::lock_keys k{name};
  std::string shared{dlock::keys::shared_fencing_counter};
  std::string own = dlock::keys::fencing_counter(name);
};
// A counter is read as digits below 2^53 - 1 (the check compares the digits, before any
// conversion): 2^53 - 2 goes on to 2^53 - 1, which is issued; from there, and from anything
// longer or not a number, an acquisition is refused with nothing written. Leading zeros are
// digits like any other, and shorter digits are below the limit whatever they sort as.
TEST(scripts, a_fencing_counter_is_read_as_digits_below_two_to_the_53) {
  counter_lab lab;
  auto& [srv, c, name, k, shared, own] = lab;
  auto acquire = [&c = c, &shared = shared] {
    return eval(c, dlock::scripts::mutex_acquire, {dlock::test::unique_name("lock"), shared}, {"30000", "A:1", "0"});
  };
  c.execute({"SET", shared, "9007199254740990"});
  auto last = acquire();
  ASSERT_FALSE(last.ec) << last.ec.message();
  EXPECT_EQ(last.r.elements()[1].integer(), 9007199254740991);
  EXPECT_EQ(c.execute({"GET", shared}).str(), "9007199254740991");
  for (const char* bad : {"9007199254740991", "9999999999999999", "10000000000000000", "12a", "-5", ""}) {
    c.execute({"SET", shared, bad});
    const auto lock = dlock::test::unique_name("lock");
    auto r = eval(c, dlock::scripts::mutex_acquire, {lock, shared}, {"30000", "A:1", "0"});
    EXPECT_EQ(r.ec, dlock::errc::server_error) << "counter '" << bad << "': " << r.ec.message();
    EXPECT_EQ(c.execute({"EXISTS", lock}).integer(), 0) << "counter '" << bad << "': no lock left held";
    EXPECT_EQ(c.execute({"GET", shared}).str(), bad) << "counter untouched";
  }
  // Shorter digits that sort after the limit as text, and sixteen digits with leading zeros:
  // small numbers, below the clock.
  for (const char* small : {"95", "901", "0000000000000005"}) {
    c.execute({"SET", shared, small});
    auto r = acquire();
    ASSERT_FALSE(r.ec) << "counter '" << small << "': " << r.ec.message();
    EXPECT_GT(r.r.elements()[1].integer(), 1000000000000000) << "the clock's microseconds";
    EXPECT_EQ(c.execute({"GET", shared}).str(), std::to_string(r.r.elements()[1].integer()));
  }
}

// KEYS[5], the other kind of counter, is checked like KEYS[2] before anything is written.
TEST(scripts, a_bad_other_fencing_counter_is_refused_before_any_write) {
  counter_lab lab;
  auto& [srv, c, name, k, shared, own] = lab;
  c.execute({"SET", own, "not a number"});
  auto r = eval(c, dlock::scripts::mutex_acquire, {name, shared, k.queue, k.expiry, own}, {"30000", "A:1", "0"});
  EXPECT_EQ(r.ec, dlock::errc::server_error) << r.ec.message();
  EXPECT_EQ(c.execute({"EXISTS", name}).integer(), 0) << "no lock left held";
  EXPECT_EQ(c.execute({"EXISTS", shared}).integer(), 0);
  c.execute({"SET", own, "41"});
  r = eval(c, dlock::scripts::mutex_acquire, {name, shared, k.queue, k.expiry, own}, {"30000", "A:1", "0"});
  ASSERT_FALSE(r.ec) << r.ec.message();
  EXPECT_EQ(c.execute({"GET", own}).str(), std::to_string(r.r.elements()[1].integer())) << "advanced";
}

// The other counter is read in the same MGET as the advanced one, which reads a key of another
// type as missing: such a key issued no token and is never written, so it is left alone.
TEST(scripts, an_other_fencing_counter_of_another_type_is_left_alone) {
  counter_lab lab;
  auto& [srv, c, name, k, shared, own] = lab;
  c.execute({"HSET", own, "f", "v"});
  auto r = eval(c, dlock::scripts::mutex_acquire, {name, shared, k.queue, k.expiry, own}, {"30000", "A:1", "0"});
  ASSERT_FALSE(r.ec) << r.ec.message();
  EXPECT_EQ(c.execute({"GET", shared}).str(), std::to_string(r.r.elements()[1].integer()));
  EXPECT_EQ(c.execute({"TYPE", own}).str(), "hash");
  EXPECT_EQ(c.execute({"HGET", own, "f"}).str(), "v");
}

// What a lock+unlock pair costs the server, in the commands its scripts run: the hot path of
// every uncontended user. A waiter's first acquisition of a free lock (ARGV[7] '3': its ticket
// cannot be queued yet) runs six — EXISTS, MGET of both counters, HINCRBY, PEXPIRE, TIME, SET —
// and its release four: HGET, DEL, ZPOPMIN of the (missing) queue, PUBLISH.
TEST(scripts, an_uncontended_pair_runs_ten_commands_and_a_later_attempt_one_more) {
  counter_lab lab;
  auto& [srv, c, name, k, shared, own] = lab;
  const auto id = c.impl().id();
  auto pair = [&](const char* attempt) {
    srv.command({"CONFIG", "RESETSTAT"});
    auto a = eval(c, dlock::scripts::mutex_acquire, {name, shared, k.queue, k.expiry, own},
                  {"30000", "A:1", "0", "4242", "4000", "1", attempt, id, "s", "12345"});
    EXPECT_FALSE(a.ec) << a.ec.message();
    EXPECT_EQ(a.r.elements()[0].integer(), 0) << "acquired";
    auto r = eval(c, dlock::scripts::mutex_release, {name, k.channel, k.queue, k.expiry, shared, own},
                  {"0", "30000", "A:1", "1", "100", "", "s"});
    EXPECT_FALSE(r.ec) << r.ec.message();
    EXPECT_EQ(r.r.integer(), 1) << "released";
    std::map<std::string, long long> ran;
    for (const char* cmd : {"exists", "hget", "get", "mget", "hincrby", "pexpire", "time", "set", "zrem",
                            "hdel", "del", "zpopmin", "publish"}) {
      if (const auto n = dlock::test::command_stat(srv, cmd)) ran[cmd] = n;
    }
    return ran;
  };
  pair("3");  // the shared counter exists from here on
  const std::map<std::string, long long> first{{"exists", 1}, {"mget", 1}, {"hincrby", 1}, {"pexpire", 1},
                                               {"time", 1}, {"set", 1}, {"hget", 1}, {"del", 1},
                                               {"zpopmin", 1}, {"publish", 1}};
  EXPECT_EQ(pair("3"), first);
  // A later attempt of the same ticket may have queued: it takes itself out (a ZREM).
  auto later = first;
  later["zrem"] = 1;
  EXPECT_EQ(pair("0"), later);
  // The client marks a waiter's first attempt: lock() of a free lock runs no ZREM.
  dlock::mutex m{c, name};
  srv.command({"CONFIG", "RESETSTAT"});
  m.lock();
  m.unlock();
  EXPECT_EQ(dlock::test::command_stat(srv, "evalsha"), 2);
  EXPECT_EQ(dlock::test::command_stat(srv, "zrem"), 0);
  EXPECT_EQ(dlock::test::command_stat(srv, "hget"), 1) << "the release's";
}

// With fencing off the client passes the lock hash as the counter key: the script touches it
// only as the lock, and the token is 0.
TEST(scripts, mutex_acquire_without_fencing_touches_no_counter) {
  dlock::test::redis_server srv;
  dlock::client c{dlock::config::from_uri(srv.url())};
  const auto name = dlock::test::unique_name("lock");
  auto a = eval(c, dlock::scripts::mutex_acquire, {name, name}, {"30000", "A:1", "0", "", "0", "0"});
  ASSERT_FALSE(a.ec) << a.ec.message();
  EXPECT_EQ(a.r.elements()[1].integer(), 0);
  EXPECT_EQ(c.execute({"HGETALL", name}).elements().size(), 2u) << "the hold alone";
  EXPECT_EQ(c.execute({"DBSIZE"}).integer(), 1);
}

// A lock, the keys its scripts touch beside it, and the mutex scripts called with the
// arguments dlock's client sends (4 keys; a 5000 ms queue validity unless given).
class lock_scripts : public testing::Test {
 protected:
  result acquire(const std::string& owner, const std::string& ticket, const char* named = "0",
                 const char* valid_ms = "5000") {
    return eval(c_, dlock::scripts::mutex_acquire, {k_.name, counter_, k_.queue, k_.expiry},
                {"30000", owner, "0", ticket, valid_ms, "1", named});
  }
  result release(const std::string& owner, const char* window) {
    return eval(c_, dlock::scripts::mutex_release, {k_.name, k_.channel, k_.queue, k_.expiry},
                {"0", "30000", owner, "1", window});
  }
  result leave(const std::string& ticket) {  // the release script's leave form
    return eval(c_, dlock::scripts::mutex_release, {k_.name, k_.channel, k_.queue, k_.expiry},
                {"0", "0", "", "0", "5000", ticket});
  }

  dlock::test::redis_server srv_;
  dlock::client c_{dlock::config::from_uri(srv_.url())};
  const std::string name = dlock::test::unique_name("lock");
  const dlock::detail::lock_keys k_{name};
  const std::string counter_{dlock::keys::shared_fencing_counter};
  const std::string& queue = k_.queue;
  const std::string& expiry = k_.expiry;
};

// The waiter queue: a caller that finds the lock held enters it (score: when it first
// queued); a release pops the head and names it before its 0; a named caller that finds the lock
// taken again goes back to the front; acquiring leaves the queue.
TEST_F(lock_scripts, waiter_queue_orders_wake_ups_and_keeps_a_named_waiters_place) {
  ASSERT_EQ(acquire("A:1", "", "0").r.elements().size(), 2u);
  EXPECT_EQ(acquire("B:1", "4294967297", "0").r.elements().size(), 1u) << "held: B queued";
  EXPECT_EQ(acquire("C:1", "4294967298", "0").r.elements().size(), 1u) << "held: C queued";
  EXPECT_EQ(srv_.command({"ZRANGE", queue, "0", "-1"}), "[4294967297, 4294967298]");
  EXPECT_GT(std::stoll(srv_.command({"PTTL", queue}).substr(1)), 4000) << "the queue expires with its entries";
  EXPECT_EQ(release("A:1", "0").r.integer(), 1);
  EXPECT_EQ(srv_.command({"ZRANGE", queue, "0", "-1"}), "[4294967298]") << "B was popped and named";
  // D barges in before B's attempt; B, named, finds it held and keeps its place ahead of C.
  ASSERT_EQ(acquire("D:1", "", "0").r.elements().size(), 2u);
  EXPECT_EQ(acquire("B:1", "4294967297", "1").r.elements().size(), 1u);
  EXPECT_EQ(srv_.command({"ZRANGE", queue, "0", "-1"}), "[4294967297, 4294967298]");
  EXPECT_EQ(release("D:1", "0").r.integer(), 1);
  EXPECT_EQ(acquire("B:1", "4294967297", "1").r.elements().size(), 2u) << "B acquires";
  EXPECT_EQ(srv_.command({"ZRANGE", queue, "0", "-1"}), "[4294967298]");
  EXPECT_EQ(acquire("C:1", "4294967298", "0").r.elements().size(), 1u);
  EXPECT_EQ(release("B:1", "0").r.integer(), 1);
  EXPECT_EQ(acquire("C:1", "4294967298", "1").r.elements().size(), 2u);
  EXPECT_EQ(srv_.command({"EXISTS", queue}), ":0") << "the last waiter left: no key";
  EXPECT_EQ(srv_.command({"EXISTS", expiry}), ":0");
}

// The queue is ordered by arrival, not by how long each waiter's entry stays valid (a waiter
// with a short deadline does not overtake one that waits longer), later attempts keep a
// waiter's place, and an unlock skips the entries of waiters that stopped renewing them.
TEST_F(lock_scripts, waiter_queue_serves_by_arrival_and_skips_stale_entries) {
  auto named_by_release = [&](const std::string& owner) {
    EXPECT_EQ(release(owner, "5000").r.integer(), 1);
    return srv_.command({"HGET", name, "dlock:handoff"});
  };
  ASSERT_EQ(acquire("A:1", "", "0", "5000").r.elements().size(), 2u);
  // Z queues first with a long validity, B later with a short one, D later still (arrival
  // order Z, B, D; by validity it would be B first). Z and B try again: they keep their places.
  ASSERT_EQ(acquire("Z:1", "4294967299", "0", "9000").r.elements().size(), 1u);
  std::this_thread::sleep_for(5ms);
  ASSERT_EQ(acquire("B:1", "4294967297", "0", "1000").r.elements().size(), 1u);
  std::this_thread::sleep_for(5ms);
  ASSERT_EQ(acquire("D:1", "4294967300", "0", "40").r.elements().size(), 1u);
  ASSERT_EQ(acquire("Z:1", "4294967299", "0", "9000").r.elements().size(), 1u);
  ASSERT_EQ(acquire("B:1", "4294967297", "0", "1000").r.elements().size(), 1u);
  EXPECT_EQ(srv_.command({"ZRANGE", queue, "0", "-1"}), "[4294967299, 4294967297, 4294967300]");
  EXPECT_GT(std::stoll(srv_.command({"PTTL", expiry}).substr(1)), 8000) << "as long as its longest entry";

  EXPECT_EQ(named_by_release("A:1"), "4294967299") << "the longest-waiting first";
  ASSERT_EQ(acquire("Z:1", "4294967299", "0", "9000").r.elements().size(), 2u);
  EXPECT_EQ(named_by_release("Z:1"), "4294967297");
  ASSERT_EQ(acquire("B:1", "4294967297", "0", "1000").r.elements().size(), 2u);
  // D's entry was valid for 40 ms and D never came back: skipped, the lock is simply free.
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(named_by_release("B:1"), "$-1") << "no live waiter to keep it for";
  EXPECT_EQ(srv_.command({"EXISTS", name}), ":0");
  EXPECT_EQ(srv_.command({"ZCARD", queue}), ":0") << "the stale entry is gone";
  EXPECT_EQ(srv_.command({"HLEN", expiry}), ":0");

  // A stale entry ahead of a live one: skipped, the live one named.
  ASSERT_EQ(acquire("A:1", "", "0", "5000").r.elements().size(), 2u);
  ASSERT_EQ(acquire("S:1", "4294967301", "0", "40").r.elements().size(), 1u);
  std::this_thread::sleep_for(5ms);
  ASSERT_EQ(acquire("L:1", "4294967302", "0", "5000").r.elements().size(), 1u);
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(named_by_release("A:1"), "4294967302") << "the stale head skipped";
  EXPECT_EQ(srv_.command({"ZCARD", queue}), ":0");
}

// Hand-off (config::handoff_window): a release that names a waiter keeps the lock for it —
// held to every other acquire, dlock's and Redisson's — until that waiter takes it, leaves
// (passing it on to the next), or the window ends.
TEST_F(lock_scripts, an_unlock_keeps_the_lock_for_the_waiter_it_names) {
  const std::string b_ticket = "4294967297", c_ticket = "4294967298";
  // Redisson's tryLockInnerAsync (tests/integration/redisson_client.py): nil when acquired.
  const std::string redisson_try =
      "if (redis.call('exists', KEYS[1]) == 0) then redis.call('hincrby', KEYS[1], ARGV[2], 1); "
      "redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; "
      "if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then redis.call('hincrby', KEYS[1], ARGV[2], 1); "
      "redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; return redis.call('pttl', KEYS[1]);";
  auto is_kept = [](const result& r) {
    return !r.ec && r.r.elements().size() == 1u && r.r.elements()[0].integer() == -1;
  };

  ASSERT_EQ(acquire("A:1", "").r.elements().size(), 2u);
  ASSERT_EQ(acquire("B:1", b_ticket).r.elements().size(), 1u);
  ASSERT_EQ(acquire("C:1", c_ticket).r.elements().size(), 1u);
  ASSERT_EQ(release("A:1", "5000").r.integer(), 1);
  EXPECT_EQ(srv_.command({"HGETALL", name}), "[dlock:handoff, " + b_ticket + "]") << "kept for B";
  const auto kept_pttl = std::stoll(srv_.command({"PTTL", name}).substr(1));
  EXPECT_GT(kept_pttl, 4000);
  EXPECT_LE(kept_pttl, 5000) << "for the window, not a lease";

  EXPECT_TRUE(is_kept(acquire("D:1", ""))) << "a try without waiting does not take it";
  EXPECT_TRUE(is_kept(acquire("C:1", c_ticket))) << "nor does another waiter";
  EXPECT_TRUE(is_kept(acquire("C:1", c_ticket, "1"))) << "nor a waiter named by an earlier unlock";
  auto redisson = c_.execute({"EVAL", redisson_try, "1", name, "30000", "R:1"});
  EXPECT_TRUE(redisson.is_integer() && redisson.integer() > 0) << "Redisson sees it held";
  EXPECT_EQ(release("dlock:handoff", "5000").r.is_nil(), true)
      << "the reservation is no hold to release";

  auto b = acquire("B:1", b_ticket, "1");
  ASSERT_EQ(b.r.elements().size(), 2u) << "B takes what was kept for it";
  EXPECT_EQ(srv_.command({"HGETALL", name}), "[B:1, 1]") << "an ordinary hold, Redisson's layout";
  EXPECT_GT(std::stoll(srv_.command({"PTTL", name}).substr(1)), 29000) << "with B's lease";
  EXPECT_EQ(srv_.command({"ZRANGE", queue, "0", "-1"}), "[" + c_ticket + "]");

  // C is named next, but leaves: what was kept for C is passed on (nobody else waits: freed).
  ASSERT_EQ(acquire("E:1", "4294967299").r.elements().size(), 1u);
  ASSERT_EQ(release("B:1", "5000").r.integer(), 1);
  EXPECT_EQ(srv_.command({"HGET", name, "dlock:handoff"}), c_ticket);
  EXPECT_TRUE(leave("4294967299").r.is_nil()) << "E leaves: nothing kept for it";
  EXPECT_EQ(srv_.command({"ZCARD", queue}), ":0");
  EXPECT_EQ(srv_.command({"HLEN", expiry}), ":0");
  EXPECT_EQ(srv_.command({"HGET", name, "dlock:handoff"}), c_ticket) << "untouched";
  // F queues; C, named, leaves instead of taking it: passed on to F.
  ASSERT_EQ(acquire("F:1", "4294967303").r.elements().size(), 1u);
  EXPECT_EQ(leave(c_ticket).r.integer(), 1) << "C leaves and passes it on";
  EXPECT_EQ(srv_.command({"HGET", name, "dlock:handoff"}), "4294967303") << "kept for F now";
  EXPECT_EQ(acquire("F:1", "4294967303", "1").r.elements().size(), 2u) << "F takes it";
  ASSERT_EQ(release("F:1", "5000").r.integer(), 1);
  EXPECT_EQ(srv_.command({"EXISTS", name}), ":0") << "nobody left to keep it for: free";
  EXPECT_EQ(acquire("D:1", "").r.elements().size(), 2u);

  // Window 0: no hand-off, the lock is free at once (the behaviour before hand-offs).
  ASSERT_EQ(acquire("F:1", "4294967300").r.elements().size(), 1u);
  ASSERT_EQ(release("D:1", "0").r.integer(), 1);
  EXPECT_EQ(srv_.command({"EXISTS", name}), ":0");
  EXPECT_EQ(acquire("G:1", "").r.elements().size(), 2u) << "anyone may take it";

  // A waiter that never comes holds the others up for the window only.
  ASSERT_EQ(acquire("H:1", "4294967301").r.elements().size(), 1u);
  ASSERT_EQ(release("G:1", "50").r.integer(), 1);
  EXPECT_TRUE(is_kept(acquire("D:1", "")));
  std::this_thread::sleep_for(120ms);
  EXPECT_EQ(acquire("D:1", "").r.elements().size(), 2u) << "the window ended";
}

// An unlock names the waiter it keeps the lock for on that waiter's own client channel
// (keys::waiter_channel, from the id its acquire recorded): one process hears it, and no `0`
// follows on the lock's channel (the lock is kept: nobody else could take it). The next in
// line hears its stand-by on its own channel too. Otherwise the waiter is named on the lock's
// channel, followed by `0` (which dlock clients skip after a ticket): without a hand-off
// (window 0: the lock is free to all), for an entry without a client id (a dlock from before
// the channel), and when nobody listens on the waiter's channel (its client died, or this
// user may not publish there).
TEST_F(lock_scripts, an_unlock_names_a_waiter_on_its_own_clients_channel_only) {
  struct heard {
    std::string channel, payload;
  };
  dlock::test::recorder<heard> rec;
  const std::string x = "client-x", y = "client-y";
  const auto x_channel = dlock::keys::waiter_channel(x), y_channel = dlock::keys::waiter_channel(y);
  auto& sub = c_.impl().subscriber();
  for (const auto& ch : {x_channel, y_channel, k_.channel}) {
    sub.listen(ch, [&rec](const dlock::transport::pubsub_event& ev) {
      if (ev.what == dlock::transport::pubsub_event::type::message) {
        rec.push({std::string(ev.channel), std::string(ev.payload)});
      }
    });
  }
  ASSERT_TRUE(dlock::test::wait_until([&] { return dlock::test::numsub(srv_, k_.channel) == 1 &&
                                                   dlock::test::numsub(srv_, x_channel) == 1 &&
                                                   dlock::test::numsub(srv_, y_channel) == 1; }, 5s));
  auto acquire_by = [&](const std::string& client, const std::string& owner, const std::string& ticket) {
    return eval(c_, dlock::scripts::mutex_acquire, {k_.name, counter_, k_.queue, k_.expiry},
                {"30000", owner, "0", ticket, "5000", "1", "0", client});
  };
  auto heard_after = [&](std::size_t before, std::size_t n) {
    EXPECT_TRUE(rec.wait_for(5s, [&](auto& v) { return v.size() >= before + n; }));
    std::this_thread::sleep_for(50ms);  // and nothing more
    auto all = rec.items();
    std::string out;
    for (auto i = before; i < all.size(); ++i) out += all[i].channel + "=" + all[i].payload + " ";
    return out;
  };
  const std::string b_ticket = "4294967297", c_ticket = "4294967298", d_ticket = "4294967299";

  ASSERT_EQ(acquire("A:1", "").r.elements().size(), 2u);
  ASSERT_EQ(acquire_by(x, "B:1", b_ticket).r.elements().size(), 1u);
  ASSERT_EQ(acquire_by(y, "C:1", c_ticket).r.elements().size(), 1u);
  EXPECT_EQ(srv_.command({"HGET", expiry, b_ticket}).find(" client-x"), 13u) << "'<ms> <client id>'";
  ASSERT_EQ(release("A:1", "5000").r.integer(), 1);
  EXPECT_EQ(heard_after(0, 2), x_channel + "=" + b_ticket + " " + y_channel + "=-" + c_ticket + " ")
      << "B named on X's channel, C stands by on Y's; nothing on the lock's channel";

  ASSERT_EQ(acquire_by(x, "B:1", b_ticket).r.elements().size(), 2u);
  ASSERT_EQ(release("B:1", "0").r.integer(), 1);
  EXPECT_EQ(heard_after(2, 2), k_.channel + "=" + c_ticket + " " + k_.channel + "=0 ")
      << "no hand-off kept: C named, and the lock is free to everyone";

  ASSERT_EQ(acquire("A:1", "").r.elements().size(), 2u);
  ASSERT_EQ(acquire("D:1", d_ticket).r.elements().size(), 1u) << "queued without a client id";
  ASSERT_EQ(acquire_by(y, "C:1", c_ticket).r.elements().size(), 1u);
  ASSERT_EQ(release("A:1", "5000").r.integer(), 1);
  EXPECT_EQ(heard_after(4, 3), k_.channel + "=" + d_ticket + " " + y_channel + "=-" + c_ticket + " " +
                                   k_.channel + "=0 ")
      << "D named on the lock's channel and the 0 that such clients skip follows";

  // Z's client listens nowhere (it died, or this user may not publish on its channel).
  ASSERT_EQ(acquire("D:1", d_ticket, "1").r.elements().size(), 2u) << "D takes what was kept";
  ASSERT_EQ(acquire_by("client-gone", "Z:1", "4294967300").r.elements().size(), 1u);
  ASSERT_EQ(release("D:1", "5000").r.integer(), 1);
  EXPECT_EQ(heard_after(7, 2), y_channel + "=" + c_ticket + " " + k_.channel + "=-4294967300 ")
      << "Z's stand-by, unheard on its channel, goes to the lock's; C was heard: no 0";
  ASSERT_EQ(acquire_by(y, "C:1", c_ticket).r.elements().size(), 2u);
  ASSERT_EQ(release("C:1", "5000").r.integer(), 1);
  EXPECT_EQ(heard_after(9, 2), k_.channel + "=4294967300 " + k_.channel + "=0 ")
      << "nobody listens on Z's channel: named on the lock's, and Redisson's waiters told";
  EXPECT_EQ(srv_.command({"HGET", name, "dlock:handoff"}), "4294967300") << "still kept for Z";
}

TEST(scripts, renew_extends_held_leases_and_reports_lost_ones) {
  dlock::test::redis_server srv;
  dlock::client c{dlock::config::from_uri(srv.url())};
  const auto held = dlock::test::unique_name("lock"), gone = dlock::test::unique_name("lock");
  const auto other = dlock::test::unique_name("lock");
  eval(c, dlock::scripts::mutex_acquire, {held, "redisson_lock_token:{" + held + "}"}, {"1000", "A:1", "0"});
  eval(c, dlock::scripts::mutex_acquire, {other, "redisson_lock_token:{" + other + "}"}, {"1000", "B:1", "0"});
  c.execute({"SET", gone + "x", "string"});
  auto r = eval(c, dlock::scripts::mutex_renew, {held, gone, other, gone + "x"},
                {"60000", "A:1", "A:1", "A:1", "A:1"});
  ASSERT_FALSE(r.ec) << r.ec.message();
  ASSERT_EQ(r.r.elements().size(), 4u);
  EXPECT_EQ(r.r.elements()[0].integer(), 1);
  EXPECT_EQ(r.r.elements()[1].integer(), 0) << "no such lock";
  EXPECT_EQ(r.r.elements()[2].integer(), 0) << "held by someone else";
  EXPECT_EQ(r.r.elements()[3].integer(), 0) << "another type counts as not held";
  EXPECT_GT(c.execute({"PTTL", held}).integer(), 59000);
  EXPECT_LE(c.execute({"PTTL", other}).integer(), 1000) << "others' leases untouched";
  // Lease "0": only checks (after a reconnect), leases untouched.
  auto check = eval(c, dlock::scripts::mutex_renew, {held, gone}, {"0", "A:1", "A:1"});
  ASSERT_EQ(check.r.elements().size(), 2u);
  EXPECT_EQ(check.r.elements()[0].integer(), 1);
  EXPECT_EQ(check.r.elements()[1].integer(), 0);
  EXPECT_LE(c.execute({"PTTL", held}).integer(), 60000);
  EXPECT_GT(c.execute({"PTTL", held}).integer(), 50000) << "not set to 0 or expired";
}

TEST(scripts, force_unlock_deletes_and_publishes) {
  dlock::test::redis_server srv;
  dlock::client c{dlock::config::from_uri(srv.url())};
  const auto name = dlock::test::unique_name("lock");
  const auto channel = "redisson_lock__channel:{" + name + "}";
  eval(c, dlock::scripts::mutex_acquire, {name, "redisson_lock_token:{" + name + "}"}, {"30000", "A:1", "0"});
  EXPECT_EQ(eval(c, dlock::scripts::mutex_force_unlock, {name, channel}, {"0"}).r.integer(), 1);
  EXPECT_EQ(c.execute({"EXISTS", name}).integer(), 0);
  EXPECT_EQ(eval(c, dlock::scripts::mutex_force_unlock, {name, channel}, {"0"}).r.integer(), 0);
}

TEST(scripts, wrong_type_lock_key_is_reported_not_waited_on) {
  dlock::test::redis_server srv;
  dlock::client c{dlock::config::from_uri(srv.url())};
  const auto name = dlock::test::unique_name("lock");
  c.execute({"SET", name, "not a hash"});
  auto r = eval(c, dlock::scripts::mutex_acquire, {name, "redisson_lock_token:{" + name + "}"},
                {"30000", "A:1", "0"});
  // HGET on a string fails inside the script: WRONGTYPE, not "held".
  EXPECT_EQ(r.ec, dlock::errc::wrong_type);
}

}  // namespace

namespace {

// A plain subscriber of `channels` (redis-cli SUBSCRIBE), standing in for a waiter's client.
class listener {
 public:
  listener(const dlock::test::redis_server& srv, std::vector<std::string> channels)
      : p_{args(srv, std::move(channels))} {}
  // The next message payload that starts with `prefix` (nullopt: none within 5 s).
  std::optional<std::string> next(const std::string& prefix) {
    while (auto line = p_.read_line(5s)) {
      if (line->rfind(prefix, 0) == 0) return line;
    }
    return std::nullopt;
  }

 private:
  static std::vector<std::string> args(const dlock::test::redis_server& srv, std::vector<std::string> channels) {
    std::vector<std::string> a{"/usr/bin/redis-cli", "-p", std::to_string(srv.port()), "SUBSCRIBE"};
    a.insert(a.end(), channels.begin(), channels.end());
    return a;
  }
  dlock::test::child_process p_;
};

}  // namespace

// Grants (config::grants): a release gives the lock straight to the queue's head when its entry
// takes grants fenced as the releaser fences and its client hears the message: the head's owner
// field (count 1), the marker with the grant's token, the hand-off window as its expiry, a token
// from the counter, and `=<ticket> <token> <ms> <sent> <window>` on its client's channel. To everyone
// else, Redisson too, the lock is held. The head's confirmation sets its lease and ends the
// marker; nobody else's confirms it.
class grant_scripts : public lock_scripts {
 protected:
  // An attempt that queues `owner` taking grants (mode), its client `id`, sent at `sent`.
  result queue_for_grant(const std::string& owner, const std::string& ticket, const std::string& id,
                         const char* mode = "s", const char* sent = "123456789012") {
    return eval(c_, dlock::scripts::mutex_acquire, {k_.name, counter_, k_.queue, k_.expiry, own_counter_},
                {"30000", owner, "0", ticket, "5000", "1", "0", id, mode, sent});
  }
  result release_granting(const std::string& owner, const char* mode = "s") {
    return eval(c_, dlock::scripts::mutex_release,
                {k_.name, k_.channel, k_.queue, k_.expiry, counter_, own_counter_},
                {"0", "30000", owner, "1", "100", "", mode});
  }
  result leave_granting(const std::string& ticket) {
    return eval(c_, dlock::scripts::mutex_release,
                {k_.name, k_.channel, k_.queue, k_.expiry, counter_, own_counter_},
                {"0", "0", "", "0", "100", ticket, "s"});
  }
  result confirm(const std::string& owner, const std::string& ticket) {
    return eval(c_, dlock::scripts::mutex_acquire, {k_.name, counter_, k_.queue, k_.expiry, own_counter_},
                {"30000", owner, "1", ticket, "0", "1", "2"});
  }
  std::string fields() { return srv_.command({"HGETALL", name}); }
  std::int64_t pttl() { return std::stoll(srv_.command({"PTTL", name}).substr(1)); }
  std::int64_t counter() { return std::stoll(srv_.command({"GET", counter_})); }

  const std::string own_counter_ = dlock::keys::fencing_counter(name);
  const std::string b_ticket = "4294967297", c_ticket = "4294967298";
};

TEST_F(grant_scripts, a_release_grants_the_lock_to_a_head_that_takes_grants) {
  listener b_client{srv_, {dlock::keys::waiter_channel("idB")}};
  ASSERT_TRUE(dlock::test::wait_until([&] { return dlock::test::numsub(srv_, dlock::keys::waiter_channel("idB")) == 1; }, 5s));
  const auto a = acquire("A:1", "");
  ASSERT_EQ(a.r.elements().size(), 2u);
  const auto a_token = a.r.elements()[1].integer();
  ASSERT_EQ(queue_for_grant("B:1", b_ticket, "idB").r.elements().size(), 1u) << "held: B queued";
  ASSERT_EQ(queue_for_grant("C:1", c_ticket, "idC").r.elements().size(), 1u) << "held: C queued";
  EXPECT_EQ(release_granting("A:1").r.integer(), 1);

  const auto token = counter();
  EXPECT_GT(token, a_token) << "the grant issued a token";
  EXPECT_EQ(fields(), "[B:1, 1, dlock:grant, " + b_ticket + " " + std::to_string(token) + "]");
  EXPECT_LE(pttl(), 100) << "the window is the grant's first lease";
  EXPECT_GT(pttl(), 0);
  const auto message = b_client.next("=");
  ASSERT_TRUE(message);
  // `<ms>`: how long after B's attempt wrote its record (server time): a few ms at most here.
  const auto head = "=" + b_ticket + " " + std::to_string(token) + " ";
  ASSERT_EQ(message->rfind(head, 0), 0u) << *message;
  const auto ms = std::stoll(message->substr(head.size()));
  EXPECT_GE(ms, 0);
  EXPECT_LT(ms, 5000);
  EXPECT_EQ(message->substr(message->find(' ', head.size())), " 123456789012 100")
      << "B's own send time, echoed; the window";
  EXPECT_EQ(srv_.command({"ZRANGE", queue, "0", "-1"}), "[" + c_ticket + "]") << "B popped; C next";

  // Held to everyone else: dlock's acquire (C, still queued: told to wait to be woken, not to
  // sleep out the window, which is not the grantee's lease) and Redisson's.
  const auto c_try = queue_for_grant("C:1", c_ticket, "idC");
  ASSERT_EQ(c_try.r.elements().size(), 1u);
  EXPECT_EQ(c_try.r.elements()[0].integer(), -1);
  const auto redisson = c_.execute(
      {"EVAL",
       "if (redis.call('exists', KEYS[1]) == 0) then return nil end; "
       "if (redis.call('hexists', KEYS[1], ARGV[1]) == 1) then return nil end; return redis.call('pttl', KEYS[1]);",
       "1", name, "R:1"});
  EXPECT_TRUE(redisson.is_integer()) << "Redisson's tryLock finds it held";

  // A grant's marker is nobody's hold to release.
  EXPECT_TRUE(release_granting("dlock:grant").r.is_nil());
  // Only B's confirmation confirms it.
  auto wrong = confirm("B:1", c_ticket);
  ASSERT_EQ(wrong.r.elements().size(), 2u);
  EXPECT_EQ(wrong.r.elements()[0].integer(), -1);
  auto stranger = confirm("C:1", c_ticket);
  EXPECT_EQ(stranger.r.elements()[0].integer(), -1) << "C holds nothing";
  EXPECT_EQ(fields(), "[B:1, 1, dlock:grant, " + b_ticket + " " + std::to_string(token) + "]") << "untouched";
  auto ok = confirm("B:1", b_ticket);
  ASSERT_EQ(ok.r.elements().size(), 2u);
  EXPECT_EQ(ok.r.elements()[0].integer(), 0);
  EXPECT_EQ(ok.r.elements()[1].integer(), token) << "the grant's token";
  EXPECT_EQ(fields(), "[B:1, 1]") << "the marker ends; Redisson's layout";
  EXPECT_GT(pttl(), 29000) << "B's own lease";
  EXPECT_EQ(counter(), token) << "no token drawn by the confirmation";
  // B's leave now (a late one) releases nothing: the grant is B's hold.
  EXPECT_TRUE(leave_granting(b_ticket).r.is_nil());
  EXPECT_EQ(fields(), "[B:1, 1]");
}

// Without a listener on the head's client channel, or with another fencing mode, the release
// keeps the lock for the head instead (a reservation: the head acquires it itself).
TEST_F(grant_scripts, no_grant_without_a_listener_or_in_another_fencing_mode) {
  ASSERT_EQ(acquire("A:1", "").r.elements().size(), 2u);
  ASSERT_EQ(queue_for_grant("B:1", b_ticket, "nobody").r.elements().size(), 1u);
  const auto before = counter();
  EXPECT_EQ(release_granting("A:1").r.integer(), 1);
  EXPECT_EQ(fields(), "[dlock:handoff, " + b_ticket + "]") << "kept for B, not granted";
  EXPECT_GT(counter(), before) << "(the undone grant's token is used up: tokens need only increase)";

  listener b_client{srv_, {dlock::keys::waiter_channel("idB")}};
  ASSERT_TRUE(dlock::test::wait_until([&] { return dlock::test::numsub(srv_, dlock::keys::waiter_channel("idB")) == 1; }, 5s));
  ASSERT_EQ(acquire("B:1", b_ticket, "1").r.elements().size(), 2u) << "B takes the reservation";
  ASSERT_EQ(queue_for_grant("C:1", c_ticket, "idB", "l").r.elements().size(), 1u) << "per-lock fencing";
  EXPECT_EQ(release_granting("B:1", "s").r.integer(), 1);
  EXPECT_EQ(fields(), "[dlock:handoff, " + c_ticket + "]") << "another mode: kept, not granted";
  EXPECT_EQ(b_client.next(c_ticket), c_ticket) << "named on its client's channel as before";
}

// A granted waiter that leaves (it gave up before the message came) releases the grant and
// passes it on; an attempt of the granted owner takes the grant as its own, with its token.
TEST_F(grant_scripts, a_leave_passes_a_grant_on_and_an_attempt_adopts_one) {
  listener clients{srv_, {dlock::keys::waiter_channel("idB"), dlock::keys::waiter_channel("idC")}};
  ASSERT_TRUE(dlock::test::wait_until([&] { return dlock::test::numsub(srv_, dlock::keys::waiter_channel("idC")) == 1; }, 5s));
  ASSERT_EQ(acquire("A:1", "").r.elements().size(), 2u);
  ASSERT_EQ(queue_for_grant("B:1", b_ticket, "idB").r.elements().size(), 1u);
  ASSERT_EQ(queue_for_grant("C:1", c_ticket, "idC").r.elements().size(), 1u);
  EXPECT_EQ(release_granting("A:1").r.integer(), 1);
  ASSERT_TRUE(clients.next("=" + b_ticket));
  EXPECT_EQ(leave_granting(c_ticket).r.is_nil(), true) << "C was not granted: its leave passes nothing on";
  ASSERT_EQ(queue_for_grant("C:1", c_ticket, "idC").r.elements().size(), 1u);
  EXPECT_EQ(leave_granting(b_ticket).r.integer(), 1) << "B's grant, passed on";
  const auto c_token = counter();
  EXPECT_EQ(fields(), "[C:1, 1, dlock:grant, " + c_ticket + " " + std::to_string(c_token) + "]") << "granted to C";
  ASSERT_TRUE(clients.next("=" + c_ticket));
  // C's attempt (an attempt in flight when the grant came) takes it: the grant's token, no new one.
  const auto adopt = queue_for_grant("C:1", c_ticket, "idC");
  ASSERT_EQ(adopt.r.elements().size(), 2u);
  EXPECT_EQ(adopt.r.elements()[0].integer(), 0);
  EXPECT_EQ(adopt.r.elements()[1].integer(), c_token);
  EXPECT_EQ(counter(), c_token);
  EXPECT_EQ(fields(), "[C:1, 1]");
  EXPECT_GT(pttl(), 29000);
  EXPECT_TRUE(leave_granting(c_ticket).r.is_nil()) << "a late leave: the hold is C's now";
  EXPECT_EQ(fields(), "[C:1, 1]");
  // The confirmation that follows (the grant message came too) still confirms: C holds it.
  const auto late = confirm("C:1", c_ticket);
  EXPECT_EQ(late.r.elements()[0].integer(), 0);
}
