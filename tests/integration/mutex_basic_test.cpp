// dlock::mutex in one process against a real redis-server, the basics: reentrancy per thread,
// ownership (another thread can neither unlock nor enter), std lock guards, the slop of timed
// waits, and the typed errors: bad input, the server's refusals (NOPERM, OOM, READONLY) and the
// warning about an evicting maxmemory-policy. The rest of the in-process cases: the other
// mutex_*_test.cpp files (helpers in mutex_helpers.hpp); multi-process ones:
// mutex_process_test.cpp.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dlock/mutex.hpp"
#include "mutex_helpers.hpp"
#include "queued_waiter.hpp"
#include "support/redis_server.hpp"
#include "test_util.hpp"

using namespace std::chrono_literals;
using dlock::errc;
using steady = std::chrono::steady_clock;

namespace {

using namespace dlock::test;

TEST(mutex, is_reentrant_per_thread_and_frees_the_key_after_the_last_unlock) {
  dlock::test::redis_server srv;
  dlock::client c{config_for(srv)};
  dlock::mutex m{c, dlock::test::unique_name("lock")};
  m.lock();
  m.lock();
  m.lock();
  EXPECT_EQ(m.hold_count(), 3u);
  EXPECT_TRUE(m.is_held_by_current_thread());
  EXPECT_TRUE(m.is_locked());
  const auto token = m.fencing_token();
  EXPECT_GT(token, 0u);
  EXPECT_EQ(c.execute({"HGET", m.name(), c.id() + ":" + std::to_string(0)}).is_nil(), true)
      << "owner fields are <uuid>:<thread number>, numbers start at 1";
  m.unlock();
  EXPECT_EQ(m.hold_count(), 2u);
  m.unlock();
  EXPECT_EQ(exists(c, m.name()), 1);
  EXPECT_EQ(m.fencing_token(), token) << "re-entry keeps the token";
  m.unlock();
  EXPECT_EQ(exists(c, m.name()), 0);
  EXPECT_FALSE(m.is_locked());
  EXPECT_EQ(m.fencing_token(), 0u);
  std::error_code ec;
  m.unlock(ec);
  EXPECT_EQ(ec, errc::not_owner);
}

TEST(mutex, another_thread_cannot_unlock_or_enter) {
  dlock::test::redis_server srv;
  dlock::client c{config_for(srv)};
  dlock::mutex m{c, dlock::test::unique_name("lock")};
  m.lock();
  const auto before = c.execute({"HGETALL", m.name()});
  on_thread([&] {
    std::error_code ec;
    m.unlock(ec);
    EXPECT_EQ(ec, errc::not_owner);
    EXPECT_THROW(m.unlock(), dlock::lock_error);
    EXPECT_FALSE(m.try_lock()) << "reentrancy is per thread";
    EXPECT_FALSE(m.is_held_by_current_thread());
  }).get();
  EXPECT_EQ(c.execute({"HGETALL", m.name()}), before) << "a non-owner unlock changes nothing";
  m.unlock();
}

TEST(mutex, works_with_std_lock_guards_and_scoped_lock) {
  dlock::test::redis_server srv;
  dlock::client c{config_for(srv)};
  dlock::mutex a{c, dlock::test::unique_name("a")}, b{c, dlock::test::unique_name("b")};
  {
    std::lock_guard guard{a};
    std::unique_lock again{a};  // same thread: hold count 2
    EXPECT_EQ(a.hold_count(), 2u);
  }
  EXPECT_FALSE(a.is_locked());
  {
    std::scoped_lock both{a, b};
    EXPECT_TRUE(a.is_held_by_current_thread());
    EXPECT_TRUE(b.is_held_by_current_thread());
    // Another thread cannot take either meanwhile.
    on_thread([&] { EXPECT_FALSE(a.try_lock() || b.try_lock()); }).get();
  }
  EXPECT_FALSE(a.is_locked());
  EXPECT_FALSE(b.is_locked());
  std::unique_lock lk{a, std::defer_lock};
  EXPECT_TRUE(lk.try_lock_for(1s));
  EXPECT_TRUE(lk.owns_lock());
}

TEST(mutex, try_lock_for_returns_within_its_stated_slop) {
  dlock::test::holder_and_waiter l;
  auto& [srv, name, holder, waiter, h, w] = l;
  h.lock();
  for (auto wait : {0ms, 50ms, 300ms}) {
    const auto start = steady::now();
    EXPECT_FALSE(w.try_lock_for(wait));
    const auto took = steady::now() - start;
    EXPECT_GE(took, wait);
    EXPECT_LT(took, wait + 150ms) << "slop 150 ms: one round trip after the deadline";
  }
  const auto until = steady::now() + 100ms;
  EXPECT_FALSE(w.try_lock_until(until));
  EXPECT_GE(steady::now(), until);
  h.unlock();
}

TEST(mutex, bad_input_gets_typed_errors_at_once) {
  dlock::test::redis_server srv;
  dlock::client c{config_for(srv, "max_name=64")};
  std::error_code ec;
  dlock::mutex empty{c, ""};
  empty.lock(ec);
  EXPECT_EQ(ec, errc::invalid_argument);
  EXPECT_THROW(empty.lock(), dlock::lock_error);
  dlock::mutex long_name{c, std::string(65, 'x')};
  EXPECT_FALSE(long_name.try_lock(ec));
  EXPECT_EQ(ec, errc::invalid_argument);
  dlock::mutex ok{c, dlock::test::unique_name("lock")};
  ok.lock(0ms, ec);
  EXPECT_EQ(ec, errc::invalid_argument) << "a lease must be positive";
  ok.lock(-5ms, ec);
  EXPECT_EQ(ec, errc::invalid_argument);

  // A key of another type is a configuration error, reported at once (not waited on).
  const auto name = dlock::test::unique_name("lock");
  c.execute({"SET", name, "string"});
  dlock::mutex typed{c, name};
  const auto start = steady::now();
  typed.lock(ec);
  EXPECT_EQ(ec, errc::wrong_type);
  EXPECT_LT(steady::now() - start, 1s);
  EXPECT_EQ(c.execute({"GET", name}).str(), "string");

  // A sync call on the client's I/O thread.
  std::promise<std::error_code> io;
  c.async_execute({"PING"}, [&](std::error_code, dlock::reply) {
    std::error_code e;
    ok.lock(e);
    io.set_value(e);
  });
  EXPECT_EQ(io.get_future().get(), errc::would_deadlock);
}

TEST(mutex, server_refusals_are_typed_and_prompt) {
  // NOPERM: a user without access to the key.
  auto o = dlock::test::redis_server_options::with_app_user("pw", "~app:* &* +@all");
  dlock::test::redis_server acl{o};
  dlock::client app{
      dlock::config::from_uri("redis://app:pw@127.0.0.1:" + std::to_string(acl.port()))};
  std::error_code ec;
  dlock::mutex denied{app, "other:lock"};
  denied.lock(ec);
  EXPECT_EQ(ec, errc::no_permission);

  // OOM under maxmemory + noeviction.
  dlock::test::redis_server_options mem;
  mem.extra_args = {"--maxmemory-policy", "noeviction"};
  dlock::test::redis_server full{mem};
  dlock::client fc{config_for(full)};
  // Well over the limit (set afterwards), so that freeing a client's buffers cannot bring the
  // server back under it between commands.
  for (int i = 0; i < 64; ++i) {
    fc.execute({"SET", "filler:" + std::to_string(i), std::string(64 * 1024, 'x')});
  }
  full.command({"CONFIG", "SET", "maxmemory", "1mb"});
  dlock::mutex oom{fc, dlock::test::unique_name("lock")};
  const auto start = steady::now();
  oom.lock(ec);
  EXPECT_EQ(ec, errc::out_of_memory);
  EXPECT_LT(steady::now() - start, 1s);

  // READONLY: a replica.
  dlock::test::redis_server master;
  dlock::test::redis_server_options ro;
  ro.extra_args = {"--replicaof", "127.0.0.1", std::to_string(master.port())};
  dlock::test::redis_server replica{ro};
  dlock::client rc{config_for(replica)};
  dlock::mutex readonly{rc, dlock::test::unique_name("lock")};
  readonly.lock(ec);
  EXPECT_EQ(ec, errc::read_only);
}

TEST(mutex, an_evicting_maxmemory_policy_is_warned_about_once) {
  for (const std::string policy : {"allkeys-lru", "volatile-ttl", "noeviction"}) {
    dlock::test::redis_server srv{{.extra_args = {"--maxmemory-policy", policy}}};
    std::mutex mu;
    std::vector<std::pair<dlock::warning, std::string>> warnings;
    auto cfg = config_for(srv);
    cfg.on_warning = [&](dlock::warning w, std::string_view m) {
      std::lock_guard lock{mu};
      warnings.emplace_back(w, std::string{m});
    };
    dlock::client c{cfg};
    dlock::mutex m{c, dlock::test::unique_name("lock")};
    m.lock();  // the check runs in the background from the start; this waits for the link
    m.unlock();
    c.ping();  // after the check's reply (one connection, replies in order)
    std::lock_guard lock{mu};
    if (policy == "noeviction") {
      EXPECT_TRUE(warnings.empty()) << warnings.front().second;
    } else {
      ASSERT_EQ(warnings.size(), 1u) << policy;
      EXPECT_EQ(warnings[0].first, dlock::warning::evicting_policy);
      EXPECT_NE(warnings[0].second.find(policy), std::string::npos) << warnings[0].second;
    }
  }
}

}  // namespace
