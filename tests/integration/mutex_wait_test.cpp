// Waiting on a dlock::mutex against a real redis-server: a Redisson unlock wakes a dlock waiter
// whenever it comes, a wake-up a leaving waiter could not answer is passed on, the waiter queue
// (a key of another type fails nothing; waiters that give up or whose client is destroyed leave
// it), a lost unlock message costs latency and not a hang, and the channel rights of ACL users
// (re-checks when channels are denied; an unlock skips a waiter that cannot hear it, and wakes
// one when the unlocker cannot publish on dlock's channels). (Helpers: mutex_helpers.hpp.)
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "dlock/keys.hpp"
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

// A Redisson unlock (DEL and a plain `0`: no hand-off, the holder is no dlock) wakes a dlock
// waiter whenever it comes — before the waiter's first attempt, between that attempt and the
// confirmation of its subscription (whose re-check covers a message it could not hear yet), or
// after. The waiter's re-check is 20 s away; the `0` comes a little later each round (the pause
// only moves it across the waiter's steps: the test holds whatever the order).
TEST(mutex, a_redisson_unlock_wakes_a_waiter_whenever_it_comes) {
  dlock::test::redis_server srv;
  dlock::client waiter{config_for(srv, "recheck=20s")};
  const auto name = dlock::test::unique_name("lock");
  const auto channel = dlock::keys::lock_channel(name);
  dlock::mutex w{waiter, name};
  for (int round = 0; round < 20; ++round) {
    srv.command({"HSET", name, "someone:1", "1"});  // held, no expiry, by no dlock
    auto t = on_thread([&] {
      const auto start = steady::now();
      const bool got = w.try_lock_for(10s);
      if (got) w.unlock();
      return std::pair{got, steady::now() - start};
    });
    std::this_thread::sleep_for(std::chrono::microseconds{250 * round});
    srv.command({"DEL", name});
    srv.command({"PUBLISH", channel, "0"});
    ASSERT_EQ(t.wait_for(10s), std::future_status::ready) << "round " << round;
    const auto [got, took] = t.get();
    EXPECT_TRUE(got);
    EXPECT_LT(took, 2s) << "round " << round << ": woken by the unlock, not the 20 s re-check";
  }
}

// A waiter woken by an unlock whose attempts then meet only a transient error (BUSY: a script
// runs long) until its deadline passes must pass the wake-up on as it leaves: the lock is free,
// and the next waiter, whose re-check is 20 s away, would otherwise sleep through it.
TEST(mutex, a_waiter_leaving_after_a_wake_up_it_could_not_answer_passes_it_on) {
  dlock::test::redis_server srv;
  srv.command({"CONFIG", "SET", "busy-reply-threshold", "100"});  // BUSY after 100 ms of script
  dlock::client c{config_for(srv, "recheck=20s")};
  const auto name = dlock::test::unique_name("lock");
  const auto channel = dlock::keys::lock_channel(name);
  const auto queue = dlock::keys::waiter_queue(name);
  srv.command({"HSET", name, "someone:1", "1"});  // held, no expiry, by no dlock (names nobody)
  const auto start = steady::now();
  auto first = on_thread([&] {
    dlock::mutex m{c, name};
    std::error_code ec;
    return m.try_lock_until(start + 1500ms, ec);  // ends while the script still runs
  });
  ASSERT_TRUE(dlock::test::wait_until([&] { return srv.command({"ZCARD", queue}) == ":1"; }, 5s));
  auto second = on_thread([&] {
    dlock::mutex m{c, name};
    const bool got = m.try_lock_for(15s);
    const auto at = steady::now();
    if (got) m.unlock();
    return std::pair{got, at};
  });
  ASSERT_TRUE(dlock::test::wait_until([&] { return srv.command({"ZCARD", queue}) == ":2"; }, 5s));
  ASSERT_TRUE(dlock::test::wait_until([&] { return numsub(srv, channel) == 1; }, 5s));
  // Free the lock, wake one waiter (the first: FIFO), and keep the server busy for 2 s: every
  // attempt until then is answered BUSY.
  const std::string script =
      "redis.call('del', KEYS[1]) redis.call('publish', KEYS[2], '0') "
      "local t0 = redis.call('time') local t = t0 "
      "while (t[1] - t0[1]) * 1000000 + (t[2] - t0[2]) < 2000000 do t = redis.call('time') end "
      "return 1";
  const auto busy_end = steady::now() + 2s;
  srv.command({"EVAL", script, "2", name, channel}, dlock::test::command_options{.timeout = 10s});
  ASSERT_EQ(first.wait_for(10s), std::future_status::ready);
  EXPECT_FALSE(first.get()) << "the first waiter's deadline passed while the server was busy";
  ASSERT_EQ(second.wait_for(20s), std::future_status::ready);
  const auto [got, at] = second.get();
  EXPECT_TRUE(got);
  EXPECT_LT(at - busy_end, 5s) << "woken by the passed-on wake-up, not the 20 s re-check";
}

// The waiter queue only speeds wake-ups up: a queue key of another type (or one the server
// refuses to grow) fails no lock call, leaves nothing held and is never touched.
TEST(mutex, a_queue_key_of_another_type_fails_nothing) {
  dlock::test::redis_server srv;
  dlock::client holder{config_for(srv)}, waiter{config_for(srv, "recheck=300ms")};
  const auto name = dlock::test::unique_name("lock");
  const auto queue = dlock::keys::waiter_queue(name);
  srv.command({"SET", queue, "not a zset"});
  dlock::mutex h{holder, name}, w{waiter, name};
  h.lock();
  auto t = on_thread([&] {
    std::error_code ec;
    const bool got = w.try_lock_for(5s, ec);
    if (got) w.unlock();
    return std::pair{got, ec};
  });
  ASSERT_TRUE(dlock::test::wait_until([&] { return impl(waiter).waiters().names() == 1; }, 5s));
  h.unlock();
  ASSERT_EQ(t.wait_for(5s), std::future_status::ready);
  const auto [got, ec] = t.get();
  EXPECT_TRUE(got) << ec.message();
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_EQ(srv.command({"GET", queue}), "not a zset");
  EXPECT_EQ(srv.command({"EXISTS", name}), ":0");
}

// A client destroyed while one of its threads waits takes that waiter out of the queue before
// it closes: the next unlock names the waiter behind it, which acquires at once, not at its
// next re-check (20 s here).
TEST(mutex, a_client_destroyed_while_waiting_leaves_the_queue) {
  dlock::test::redis_server srv;
  dlock::client holder{config_for(srv)}, patient{config_for(srv, "recheck=20s")};
  const auto name = dlock::test::unique_name("lock");
  const auto queue = dlock::keys::waiter_queue(name);
  dlock::mutex h{holder, name};
  h.lock();
  auto doomed = std::make_unique<dlock::client>(config_for(srv, "recheck=20s"));
  auto first = on_thread([&] {
    dlock::mutex m{*doomed, name};
    std::error_code ec;
    m.try_lock_for(30s, ec);
    return ec;
  });
  ASSERT_TRUE(dlock::test::wait_until([&] { return srv.command({"ZCARD", queue}) == ":1"; }, 5s));
  timed_waiter second{patient, name, 30s};
  ASSERT_TRUE(dlock::test::wait_until([&] { return srv.command({"ZCARD", queue}) == ":2"; }, 5s));
  doomed.reset();
  ASSERT_EQ(first.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(first.get(), errc::shutdown);
  EXPECT_EQ(srv.command({"ZCARD", queue}), ":1")
      << "the destroyed client's waiter left before it closed";
  h.unlock();
  const auto released = steady::now();
  ASSERT_EQ(second.result.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(second.result.get());
  EXPECT_LT(second.returned.load() - released, 1s)
      << "named by the unlock, not found by a re-check";
}

// A waiter that gives up leaves the queue at once, so no unlock names it.
TEST(mutex, a_waiter_that_times_out_leaves_the_queue) {
  dlock::test::holder_and_waiter l;
  auto& [srv, name, holder, waiter, h, w] = l;
  const auto queue = dlock::keys::waiter_queue(name);
  h.lock();
  EXPECT_FALSE(w.try_lock_for(300ms));
  EXPECT_TRUE(dlock::test::wait_until([&] { return srv.command({"EXISTS", queue}) == ":0"; }, 1s));
  EXPECT_FALSE(w.try_lock()) << "a try without waiting does not enter the queue";
  EXPECT_EQ(srv.command({"EXISTS", queue}), ":0");
  h.unlock();
}

// The unlock message is published while the waiter's subscriber connection is down: the waiter
// still acquires, by the re-check after resubscribing.
TEST(mutex, lost_unlock_message_costs_latency_not_a_hang) {
  dlock::test::holder_and_waiter l{"", "recheck=500ms"};
  auto& [srv, name, holder, waiter, h, w] = l;
  h.lock();
  auto t = on_thread([&] { return w.try_lock_for(20s); });
  ASSERT_TRUE(dlock::test::wait_until(
      [&] { return numsub(srv, "redisson_lock__channel:{" + name + "}") == 1; }, 5s));
  srv.command({"CLIENT", "KILL", "TYPE", "pubsub"});
  h.unlock();  // nobody is subscribed right now: the message is lost
  ASSERT_EQ(t.wait_for(5s), std::future_status::ready) << "re-check bounds the wait";
  EXPECT_TRUE(t.get());
}

// Redis 7 ACL users have no channels by default: SUBSCRIBE fails with NOPERM. Waiting still
// works, by bounded re-checks.
TEST(mutex, waits_by_rechecks_when_channels_are_denied) {
  auto o = dlock::test::redis_server_options::with_app_user("pw", "~* resetchannels +@all");
  dlock::test::redis_server srv{o};
  const auto url = "redis://app:pw@127.0.0.1:" + std::to_string(srv.port()) + "?recheck=200ms";
  std::mutex mu;
  std::vector<std::pair<dlock::warning, std::string>> warnings;
  auto cfg = dlock::config::from_uri(url);
  cfg.on_warning = [&](dlock::warning w, std::string_view m) {
    std::lock_guard lock{mu};
    warnings.emplace_back(w, std::string{m});
  };
  dlock::client holder{dlock::config::from_uri(url)}, waiter{cfg};
  const auto name = dlock::test::unique_name("lock");
  dlock::mutex h{holder, name}, w{waiter, name};
  for (int round = 0; round < 2; ++round) {
    h.lock();
    auto t = on_thread([&] {
      const bool got = w.try_lock_for(10s);
      if (got) w.unlock();
      return got;
    });
    ASSERT_TRUE(dlock::test::wait_until([&] { return impl(waiter).waiters().names() == 1; }, 5s));
    ASSERT_TRUE(dlock::test::wait_until(
        [&] { return impl(waiter).waiters().refused() > static_cast<std::uint64_t>(round); }, 5s));
    h.unlock();
    const auto released = steady::now();
    ASSERT_EQ(t.wait_for(5s), std::future_status::ready);
    EXPECT_TRUE(t.get());
    EXPECT_LT(steady::now() - released, 1s) << "one re-check interval (200 ms) plus slop";
  }
  std::lock_guard lock{mu};
  ASSERT_EQ(warnings.size(), 1u) << "one warning per client, not one per wait";
  EXPECT_EQ(warnings[0].first, dlock::warning::channels_denied);
  EXPECT_NE(warnings[0].second.find("re-check every 200 ms"), std::string::npos)
      << warnings[0].second;
}

// A client without channel rights cannot hear a hand-off, yet it queues like any other waiter:
// an unlock that hands the lock to it finds nobody listening on its client's waiter channel
// (dlock_lock__channel:{name}:<client id>; rights to Redisson's channels alone are not enough),
// undoes the hand-off and hands the lock to the next waiter, at once. The refused waiter gets the
// lock by its re-checks. (With Redisson's channels allowed, the refused client counts as a
// Redisson process waiting: the unlock leaves the lock free to it for a moment instead, and the
// permitted waiter takes it after that.)
class mutex_channel_rights : public testing::TestWithParam<const char*> {};
INSTANTIATE_TEST_SUITE_P(acl, mutex_channel_rights,
                         testing::Values("resetchannels",
                                         "resetchannels &redisson_lock__channel:*"));

TEST_P(mutex_channel_rights, an_unlock_skips_a_waiter_that_cannot_hear_it) {
  auto o = dlock::test::redis_server_options::with_app_user(
      "pw", std::string{"~* "} + GetParam() + " +@all");
  dlock::test::redis_server srv{o};
  const auto port = std::to_string(srv.port());
  auto denied_cfg = dlock::config::from_uri("redis://app:pw@127.0.0.1:" + port + "?recheck=2s");
  denied_cfg.on_warning = [](dlock::warning, std::string_view) {};
  dlock::client holder{config_for(srv)}, denied{denied_cfg},
      permitted{dlock::config::from_uri("redis://127.0.0.1:" + port + "?recheck=20s")};
  const auto name = dlock::test::unique_name("lock");
  const auto queue = dlock::keys::waiter_queue(name);
  dlock::mutex h{holder, name}, d{denied, name};
  h.lock();
  auto waiting_denied = on_thread([&] {
    const bool got = d.try_lock_for(15s);
    if (got) d.unlock();
    return got;
  });
  ASSERT_TRUE(dlock::test::wait_until([&] { return impl(denied).waiters().refused() > 0; }, 5s));
  ASSERT_TRUE(dlock::test::wait_until([&] { return srv.command({"ZCARD", queue}) == ":1"; }, 5s));
  timed_waiter waiting_permitted{permitted, name, 15s};
  ASSERT_TRUE(dlock::test::wait_until([&] { return srv.command({"ZCARD", queue}) == ":2"; }, 5s));
  ASSERT_TRUE(dlock::test::wait_until(
      [&] { return numsub(srv, dlock::keys::waiter_channel(name, permitted.id())) == 1; }, 5s));
  h.unlock();
  const auto released = steady::now();
  ASSERT_EQ(waiting_permitted.result.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(waiting_permitted.result.get());
  EXPECT_LT(waiting_permitted.returned.load() - released, 1s)
      << "handed the lock at once, not at its 20 s re-check nor after the refused waiter's 2 s one";
  ASSERT_EQ(waiting_denied.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(waiting_denied.get()) << "the refused waiter gets it by its re-checks";
}

// A releasing user may lack the right to publish on dlock's channels (granted Redisson's lock
// channels only): the hand-off's PUBLISH fails, the hand-off is undone, and the unlock ends with
// Redisson's `0`, to which the waiter's client listens too — woken at once, not at its re-check
// (20 s).
TEST(mutex, an_unlocker_without_dlock_channel_rights_still_wakes_the_waiter) {
  auto o = dlock::test::redis_server_options::with_app_user(
      "pw", "~* resetchannels &redisson_lock__channel:* +@all");
  dlock::test::redis_server srv{o};
  const auto port = std::to_string(srv.port());
  dlock::client holder{dlock::config::from_uri("redis://app:pw@127.0.0.1:" + port)},
      patient{dlock::config::from_uri("redis://127.0.0.1:" + port + "?recheck=20s")};
  const auto name = dlock::test::unique_name("lock");
  dlock::mutex h{holder, name};
  h.lock();
  const auto before = command_stat(srv, "evalsha");
  timed_waiter waiting{patient, name, 15s};
  const auto records = dlock::keys::waiter_records(name);
  ASSERT_TRUE(dlock::test::wait_until([&] { return srv.command({"HLEN", records}) == ":1"; }, 5s));
  EXPECT_NE(srv.command({"HVALS", records}).find(" " + patient.id() + " "), std::string::npos)
      << "the queue record names the waiter's client: " << srv.command({"HVALS", records});
  // Subscribed, and the re-check that follows the confirmation done: only a message can wake it.
  ASSERT_NO_FATAL_FAILURE(await_queued_waiter(srv, patient, name, before));
  h.unlock();
  const auto released = steady::now();
  ASSERT_EQ(waiting.result.wait_for(30s), std::future_status::ready);
  EXPECT_TRUE(waiting.result.get());
  EXPECT_LT(waiting.returned.load() - released, 1s);
}

}  // namespace
