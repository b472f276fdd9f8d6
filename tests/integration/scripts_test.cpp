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
  for (const auto* s : {&dlock::scripts::mutex_acquire, &dlock::scripts::mutex_release}) {
    auto sha = c.execute({"SCRIPT", "LOAD", std::string(s->text)});
    EXPECT_EQ(sha.str(), s->sha1) << s->name;
  }
}

TEST(scripts, reloads_after_script_flush) {
  dlock::test::redis_server srv;
  dlock::client c{dlock::config::from_uri(srv.url())};
  const auto name = dlock::test::unique_name("lock");
  const auto token = "redisson_lock_token:{" + name + "}";
  auto first = eval(c, dlock::scripts::mutex_acquire, {name, token}, {"30000", "owner:1"});
  ASSERT_FALSE(first.ec) << first.ec.message();
  EXPECT_EQ(c.impl().scripts().reloads(), 1u) << "a fresh server has no scripts";
  for (int i = 0; i < 3; ++i) {
    srv.command({"SCRIPT", "FLUSH"});
    auto again = eval(c, dlock::scripts::mutex_acquire, {name, token}, {"30000", "owner:1"});
    EXPECT_FALSE(again.ec) << again.ec.message();
    EXPECT_EQ(c.impl().scripts().reloads(), 2u + static_cast<unsigned>(i));
  }
  // Cached now: no reload.
  auto cached = eval(c, dlock::scripts::mutex_acquire, {name, token}, {"30000", "owner:1"});
  EXPECT_FALSE(cached.ec);
  EXPECT_EQ(c.impl().scripts().reloads(), 4u);
}

TEST(scripts, mutex_acquire_and_release_follow_the_redisson_layout) {
  dlock::test::redis_server srv;
  dlock::client c{dlock::config::from_uri(srv.url())};
  const auto name = dlock::test::unique_name("lock");
  const auto token = "redisson_lock_token:{" + name + "}";
  const auto channel = "redisson_lock__channel:{" + name + "}";

  auto a = eval(c, dlock::scripts::mutex_acquire, {name, token}, {"30000", "A:1"});
  ASSERT_FALSE(a.ec);
  ASSERT_EQ(a.r.elements().size(), 2u);
  EXPECT_EQ(a.r.elements()[0].integer(), 0);
  EXPECT_EQ(a.r.elements()[1].integer(), 1) << "first fencing token";
  EXPECT_EQ(c.execute({"HGET", name, "A:1"}).str(), "1");
  auto pttl = c.execute({"PTTL", name}).integer();
  EXPECT_GT(pttl, 29000);

  auto again = eval(c, dlock::scripts::mutex_acquire, {name, token}, {"30000", "A:1"});
  EXPECT_EQ(again.r.elements()[1].integer(), 1) << "re-entry keeps the token";
  EXPECT_EQ(c.execute({"HGET", name, "A:1"}).str(), "2");

  auto b = eval(c, dlock::scripts::mutex_acquire, {name, token}, {"30000", "B:1"});
  ASSERT_EQ(b.r.elements().size(), 1u) << "held by A: B gets the pttl";
  EXPECT_GT(b.r.elements()[0].integer(), 0);

  auto not_owner = eval(c, dlock::scripts::mutex_release, {name, channel}, {"0", "30000", "B:1"});
  EXPECT_TRUE(not_owner.r.is_nil());
  EXPECT_EQ(c.execute({"HGET", name, "A:1"}).str(), "2");

  EXPECT_EQ(eval(c, dlock::scripts::mutex_release, {name, channel}, {"0", "30000", "A:1"}).r.integer(), 0);
  EXPECT_EQ(c.execute({"EXISTS", name}).integer(), 1);
  EXPECT_EQ(eval(c, dlock::scripts::mutex_release, {name, channel}, {"0", "30000", "A:1"}).r.integer(), 1);
  EXPECT_EQ(c.execute({"EXISTS", name}).integer(), 0);

  auto b2 = eval(c, dlock::scripts::mutex_acquire, {name, token}, {"30000", "B:1"});
  EXPECT_EQ(b2.r.elements()[1].integer(), 2) << "tokens strictly increase";
}

TEST(scripts, wrong_type_lock_key_is_reported_not_waited_on) {
  dlock::test::redis_server srv;
  dlock::client c{dlock::config::from_uri(srv.url())};
  const auto name = dlock::test::unique_name("lock");
  c.execute({"SET", name, "not a hash"});
  auto r = eval(c, dlock::scripts::mutex_acquire, {name, "redisson_lock_token:{" + name + "}"},
                {"30000", "A:1"});
  // EXISTS is 1, HEXISTS on a string fails inside the script: WRONGTYPE, not "held".
  EXPECT_EQ(r.ec, dlock::errc::wrong_type);
}

}  // namespace
