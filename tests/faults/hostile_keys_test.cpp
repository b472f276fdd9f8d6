// Hostile data, through dlock::mutex against real servers: what Redis holds under the lock's
// names (a key of another type, a bad fencing counter, a hand-written owner field), what the
// ACL lets the user write, and what memory limits do (OOM under noeviction, an evicting policy).
// Every case asserts the typed errc the caller sees, that the call returns within its deadline,
// and that no lock is left held afterwards (checked with an admin command, not through the
// client under test). docs/safety.md lists each case with the test that covers it.
#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dlock/inspect.hpp"
#include "dlock/mutex.hpp"
#include "hostile_util.hpp"
#include "integration/test_util.hpp"
#include "support/redis_server.hpp"

using dlock::errc;

namespace {

using dlock::test::config_for;
using dlock::test::redis_server;
using dlock::test::redis_server_options;
using namespace dlock::test::hostile;  // since, exists, counter, slop, prompt, steady, ...

// ---- WRONGTYPE -----------------------------------------------------------------------------

TEST(hostile, wrong_type_lock_key_is_refused_at_once_on_every_path_and_left_untouched) {
  redis_server srv;
  dlock::client c{config_for(srv)};
  const auto name = dlock::test::unique_name("lock");
  srv.command({"SET", name, "not a lock"});
  dlock::mutex m{c, name};
  expect_refused_on_every_path(m, errc::wrong_type, 500ms, prompt, [&] {
    EXPECT_EQ(srv.command({"GET", name}), "not a lock");
    EXPECT_FALSE(exists(srv, counter(name))) << "no fencing token was drawn";
  });
  EXPECT_THROW(m.lock(), dlock::lock_error);
  std::error_code ec;
  m.unlock(ec);
  EXPECT_EQ(ec, errc::not_owner) << "nothing was acquired";
}

// The key is replaced by another type while held (another application reuses the name): the
// holder is told its lease is gone and its unlock touches nothing.
TEST(hostile, wrong_type_replacing_a_held_lock_signals_lease_lost_and_unlock_touches_nothing) {
  redis_server srv;
  dlock::client c{config_for(srv, "watchdog=900ms")};
  const auto name = dlock::test::unique_name("lock");
  dlock::mutex m{c, name};
  m.lock();
  auto lost = m.lease_lost();
  srv.command({"DEL", name});
  srv.command({"SET", name, "someone else's"});
  const auto replaced = steady::now();
  EXPECT_TRUE(dlock::test::wait_until([&] { return lost.stop_requested(); }, 2s))
      << "the next renewal (every 300 ms) finds no hold: lease lost";
  dlock::faults::measured("watchdog lease 900 ms: lease_lost() " +
                          std::to_string(since(replaced).count()) + " ms after the replacement");
  std::error_code ec;
  const auto start = steady::now();
  m.unlock(ec);
  EXPECT_LT(since(start), prompt);
  measured_call("unlock()", ec, since(start));
  EXPECT_EQ(ec, errc::lease_lost) << ec.message()
                                  << ": the hold was already lost, and nothing "
                                     "of this owner's is left to release";
  EXPECT_EQ(srv.command({"GET", name}), "someone else's");
  m.unlock(ec);
  EXPECT_EQ(ec, errc::not_owner) << ec.message()
                                 << ": the lost hold is dropped by the first unlock";
  // The name's next user in this thread is told about the key, not about the old hold.
  m.lock(ec);
  EXPECT_EQ(ec, errc::wrong_type) << ec.message();
  EXPECT_EQ(srv.command({"GET", name}), "someone else's");
}

// The fencing counter of the lock's slot (dlock_fencing:{<tag>}) holds another type, or a string
// that is not a number. The acquire script writes the lock before it sets the counter, and Redis
// does not roll a script back: the refusal must not leave the lock held.
TEST(hostile, wrong_type_fencing_counter_is_refused_and_leaves_no_lock_held) {
  redis_server srv;
  dlock::client c{config_for(srv)};
  const auto name = dlock::test::unique_name("lock");
  srv.command({"HSET", counter(name), "f", "v"});
  dlock::mutex m{c, name};
  std::error_code ec;
  const auto start = steady::now();
  EXPECT_FALSE(m.try_lock_for(500ms, ec));
  EXPECT_LT(since(start), 500ms + slop);
  measured_call("try_lock_for(500ms)", ec, since(start));
  EXPECT_EQ(ec, errc::wrong_type) << ec.message();
  EXPECT_FALSE(exists(srv, name)) << "lock left held after a refused acquire: PTTL "
                                  << srv.command({"PTTL", name});
}

TEST(hostile, non_numeric_fencing_counter_is_refused_and_leaves_no_lock_held) {
  redis_server srv;
  auto c = std::make_unique<dlock::client>(config_for(srv));
  const auto name = dlock::test::unique_name("lock");
  srv.command({"SET", counter(name), "abc"});
  dlock::mutex m{*c, name};
  std::error_code ec;
  const auto start = steady::now();
  EXPECT_FALSE(m.try_lock_for(500ms, ec));
  EXPECT_LT(since(start), 500ms + slop);
  measured_call("try_lock_for(500ms)", ec, since(start));
  EXPECT_TRUE(ec == errc::server_error || ec == errc::wrong_type) << ec.message();
  EXPECT_FALSE(exists(srv, name)) << "lock left held after a refused acquire: PTTL "
                                  << srv.command({"PTTL", name});
  // lock() without a deadline must report too, not spin on the half-written lock.
  auto t = std::async(std::launch::async, [&] {
    std::error_code e;
    m.lock(e);
    return e;
  });
  const bool returned = t.wait_for(3s) == std::future_status::ready;
  EXPECT_TRUE(returned) << "lock() did not return within 3 s";
  if (!returned) c->shutdown();  // ends the wait with errc::shutdown
  const auto e = t.get();
  EXPECT_TRUE(e == errc::server_error || e == errc::wrong_type) << e.message();
  srv.command({"DEL", name});
}

// The caller's own field in the lock hash holds something that is not a hold count (written by
// hand): reported at once as a server error, not taken for "held" and waited on.
TEST(hostile, a_non_numeric_own_field_is_reported_not_waited_on) {
  redis_server srv;
  dlock::client c{config_for(srv)};
  const auto name = dlock::test::unique_name("lock");
  dlock::mutex m{c, name};
  m.lock();
  const auto fields = srv.command({"HGETALL", name});  // "[<owner>, 1]"
  const auto owner = fields.substr(1, fields.find(',') - 1);
  m.unlock();
  srv.command({"HSET", name, owner, "abc"});
  std::error_code ec;
  const auto start = steady::now();
  EXPECT_FALSE(m.try_lock_for(2s, ec));
  EXPECT_EQ(ec, errc::server_error) << ec.message();
  EXPECT_LT(since(start), prompt) << "answered at once, not waited on";
  measured_call("try_lock_for(2s)", ec, since(start));
  EXPECT_EQ(srv.command({"HGET", name, owner}), "abc") << "nothing written";
}

// ---- ACL: keys ---------------------------------------------------------------------------------

// The user may write the lock key and dlock's other keys (the queue and records `dlock_lock_*`,
// the yield marker `{app:...}:dlock_yield`, RFencedLock's counter) but not the fencing counter
// (a common ACL mistake: the slot's counter is `dlock_fencing:{<tag>}`, outside `~app:*`).
TEST(hostile, no_permission_on_the_fencing_counter_leaves_no_lock_held) {
  auto o = redis_server_options::with_app_user(
      "pw", "~app:* ~{app:* ~dlock_lock_* ~redisson_lock_token:* &* +@all");
  redis_server srv{o};
  dlock::client c{
      dlock::config::from_uri("redis://app:pw@127.0.0.1:" + std::to_string(srv.port()))};
  const auto name = dlock::test::unique_name("app:lock");
  dlock::mutex m{c, name};
  expect_refused_on_every_path(m, errc::no_permission, 500ms, prompt, [&] {
    EXPECT_FALSE(exists(srv, name));
    EXPECT_FALSE(exists(srv, counter(name)));
  });
}

// With fencing off no counter is declared, so a user without a right to one can lock, unlock
// and inspect (dlock status) — and the same user is refused with fencing on.
TEST(hostile, fencing_off_needs_no_right_to_a_counter) {
  auto o = redis_server_options::with_app_user("pw", "~app:* ~{app:* ~dlock_lock_* &* +@all");
  redis_server srv{o};
  const auto url = "redis://app:pw@127.0.0.1:" + std::to_string(srv.port());
  const auto name = dlock::test::unique_name("app:lock");
  {
    dlock::client c{dlock::config::from_uri(url + "?fencing=off")};
    dlock::mutex m{c, name};
    std::error_code ec;
    EXPECT_TRUE(m.try_lock_for(500ms, ec)) << ec.message();
    EXPECT_EQ(m.fencing_token(), 0u);
    const auto status = dlock::inspect(c, name, ec);
    EXPECT_FALSE(ec) << ec.message();
    EXPECT_TRUE(status.held);
    EXPECT_EQ(status.fencing_counter, 0u);
    m.unlock(ec);
    EXPECT_FALSE(ec) << ec.message();
    EXPECT_FALSE(exists(srv, name));
  }
  dlock::client fenced{dlock::config::from_uri(url)};
  dlock::mutex m{fenced, name};
  std::error_code ec;
  EXPECT_FALSE(m.try_lock_for(500ms, ec));
  EXPECT_EQ(ec, errc::no_permission) << ec.message();
  EXPECT_FALSE(exists(srv, name));
}

// ---- OOM ---------------------------------------------------------------------------------------

// Over maxmemory under noeviction: acquiring is refused with out_of_memory on every path, and a
// holder can still release (Redis allows DEL over maxmemory): an unlock that fails would leave
// the lock held, renewed by the watchdog, for as long as the holder lives.
TEST(hostile, out_of_memory_refuses_acquire_and_lets_a_holder_release) {
  redis_server srv{{.extra_args = {"--maxmemory-policy", "noeviction"}}};
  dlock::client c{config_for(srv)};
  const auto held_name = dlock::test::unique_name("lock");
  dlock::mutex held{c, held_name};
  held.lock();
  srv.command({"DEBUG", "POPULATE", "4000", "filler", "1000"});  // ~4 MB
  srv.command({"CONFIG", "SET", "maxmemory", "1mb"});
  ASSERT_EQ(srv.command({"SET", "probe", "x"}).rfind("-OOM", 0), 0u)
      << "the server is over maxmemory";

  const auto name = dlock::test::unique_name("lock");
  dlock::mutex m{c, name};
  const auto last_token = srv.command({"GET", counter(name)});
  expect_refused_on_every_path(m, errc::out_of_memory, 500ms, prompt, [&] {
    EXPECT_FALSE(exists(srv, name));
    EXPECT_EQ(srv.command({"GET", counter(name)}), last_token) << "no token issued";
  });

  std::error_code ec;
  const auto start = steady::now();
  held.unlock(ec);
  EXPECT_LT(since(start), prompt);
  measured_call("the holder's unlock() over maxmemory", ec, since(start));
  EXPECT_FALSE(ec) << "unlock over maxmemory: " << ec.message();
  EXPECT_FALSE(exists(srv, held_name)) << "the holder could not release: the lock stays held";
  if (ec) {  // leave the server usable for the destructor's checks
    srv.command({"CONFIG", "SET", "maxmemory", "0"});
    held.unlock(ec);
    EXPECT_FALSE(ec) << ec.message();
  }
}

// ---- An evicting maxmemory-policy
// ----------------------------------------------------------------

// The user is warned once (here by an ACL user denied CONFIG, so the policy is read from INFO);
// when the policy then evicts the lock key, the holder is told by lease_lost(), and its unlock
// reports lease_lost without touching anything.
TEST(hostile, evicting_policy_is_warned_once_and_an_evicted_lock_is_reported_lost) {
  auto o = redis_server_options::with_app_user("pw", "~* &* +@all -config");
  o.extra_args = {"--maxmemory-policy", "volatile-ttl"};
  redis_server srv{o};
  std::mutex mu;
  std::vector<std::pair<dlock::warning, std::string>> warnings;
  auto cfg = dlock::config::from_uri("redis://app:pw@127.0.0.1:" + std::to_string(srv.port()) +
                                     "?watchdog=900ms");
  cfg.on_warning = [&](dlock::warning w, std::string_view text) {
    std::lock_guard lock{mu};
    warnings.emplace_back(w, std::string{text});
  };
  dlock::client c{cfg};
  const auto name = dlock::test::unique_name("lock");
  dlock::mutex m{c, name};
  m.lock();
  auto lost = m.lease_lost();
  c.ping();  // after the policy check's replies
  {
    std::lock_guard lock{mu};
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_EQ(warnings[0].first, dlock::warning::evicting_policy);
    EXPECT_NE(warnings[0].second.find("volatile-ttl"), std::string::npos) << warnings[0].second;
  }
  // The lock key is the only key with a TTL: volatile-ttl evicts it first.
  srv.command({"DEBUG", "POPULATE", "4000", "filler", "1000"});
  srv.command({"CONFIG", "SET", "maxmemory", "1mb"});
  srv.command({"SET", "probe", "x"});  // runs the eviction
  const auto evicted = steady::now();
  EXPECT_FALSE(exists(srv, name)) << "evicted";
  EXPECT_TRUE(dlock::test::wait_until([&] { return lost.stop_requested(); }, 2s))
      << "the next renewal (every 300 ms) finds the key gone";
  dlock::faults::measured("watchdog lease 900 ms: lease_lost() " +
                          std::to_string(since(evicted).count()) + " ms after the eviction");
  std::error_code ec;
  m.unlock(ec);
  EXPECT_EQ(ec, errc::lease_lost);
  srv.command({"CONFIG", "SET", "maxmemory", "0"});
  dlock::mutex again{c, dlock::test::unique_name("lock")};
  again.lock();
  again.unlock();
  std::lock_guard lock{mu};
  EXPECT_EQ(warnings.size(), 1u) << "once per client";
}

}  // namespace
