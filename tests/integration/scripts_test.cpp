// Embedded scripts: EVALSHA with transparent reload after SCRIPT FLUSH, and the contracts of the
// mutex scripts against a real server.
#include <gtest/gtest.h>

#include <future>

#include "dlock/client.hpp"
#include "runtime/client_impl.hpp"
#include "scripts/script.hpp"
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
  const auto token = "redisson_lock_token:{" + name + "}";
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

  // Resent after a lost reply: reported again, not counted twice, no new token, and the
  // lease restarts (the caller trusts it from the resend).
  c.execute({"PEXPIRE", name, "1000"});
  auto resent = acquire("A:1", "0");
  EXPECT_EQ(resent.r.elements()[1].integer(), first);
  EXPECT_EQ(c.execute({"HGET", name, "A:1"}).str(), "1");
  EXPECT_GT(c.execute({"PTTL", name}).integer(), 29000);

  auto again = acquire("A:1", "1");
  EXPECT_EQ(again.r.elements()[1].integer(), first) << "re-entry keeps the token";
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
  EXPECT_GT(b2.r.elements()[1].integer(), first) << "tokens strictly increase";
  release("B:1", "1");
  // A counter ahead of the clock (Redisson's RFencedLock INCRs the same key) goes on by one.
  c.execute({"SET", token, "9000000000000000"});
  EXPECT_EQ(acquire("C:1", "0").r.elements()[1].integer(), 9000000000000001);
}

// The waiter queue: a caller that finds the lock held enters it (score: when its entry goes
// stale); a release pops the head and names it before its 0; a named caller that finds the lock
// taken again goes back to the front; acquiring leaves the queue.
TEST(scripts, waiter_queue_orders_wake_ups_and_keeps_a_named_waiters_place) {
  dlock::test::redis_server srv;
  dlock::client c{dlock::config::from_uri(srv.url())};
  const auto name = dlock::test::unique_name("lock");
  const auto token = "redisson_lock_token:{" + name + "}";
  const auto queue = "dlock_lock_waiters:{" + name + "}";
  const auto channel = "redisson_lock__channel:{" + name + "}";
  auto acquire = [&](const std::string& owner, const std::string& ticket, const char* named) {
    return eval(c, dlock::scripts::mutex_acquire, {name, token, queue},
                {"30000", owner, "0", ticket, "5000", "1", named});
  };
  ASSERT_EQ(acquire("A:1", "", "0").r.elements().size(), 2u);
  EXPECT_EQ(acquire("B:1", "4294967297", "0").r.elements().size(), 1u) << "held: B queued";
  EXPECT_EQ(acquire("C:1", "4294967298", "0").r.elements().size(), 1u) << "held: C queued";
  EXPECT_EQ(srv.command({"ZRANGE", queue, "0", "-1"}), "[4294967297, 4294967298]");
  EXPECT_GT(std::stoll(srv.command({"PTTL", queue}).substr(1)), 4000) << "the queue expires with its entries";
  EXPECT_EQ(eval(c, dlock::scripts::mutex_release, {name, channel, queue}, {"0", "30000", "A:1", "1"}).r.integer(), 1);
  EXPECT_EQ(srv.command({"ZRANGE", queue, "0", "-1"}), "[4294967298]") << "B was popped and named";
  // D barges in before B's attempt; B, named, finds it held and keeps its place ahead of C.
  ASSERT_EQ(acquire("D:1", "", "0").r.elements().size(), 2u);
  EXPECT_EQ(acquire("B:1", "4294967297", "1").r.elements().size(), 1u);
  EXPECT_EQ(srv.command({"ZRANGE", queue, "0", "-1"}), "[4294967297, 4294967298]");
  EXPECT_EQ(eval(c, dlock::scripts::mutex_release, {name, channel, queue}, {"0", "30000", "D:1", "1"}).r.integer(), 1);
  EXPECT_EQ(acquire("B:1", "4294967297", "1").r.elements().size(), 2u) << "B acquires";
  EXPECT_EQ(srv.command({"ZRANGE", queue, "0", "-1"}), "[4294967298]");
  EXPECT_EQ(acquire("C:1", "4294967298", "0").r.elements().size(), 1u);
  EXPECT_EQ(eval(c, dlock::scripts::mutex_release, {name, channel, queue}, {"0", "30000", "B:1", "1"}).r.integer(), 1);
  EXPECT_EQ(acquire("C:1", "4294967298", "1").r.elements().size(), 2u);
  EXPECT_EQ(srv.command({"EXISTS", queue}), ":0") << "the last waiter left: no key";
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
