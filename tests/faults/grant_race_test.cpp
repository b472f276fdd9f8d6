// A grant that reaches a waiter while one of its attempts is out (acquire.cpp, pending_grant_).
// The grant comes on the client's subscriber connection, the attempt's reply on its command
// connection: the proxy freezes the waiter's command connection alone (by the name its
// handshake sets). The waiter's first attempt goes out on the caller's channel, it subscribes,
// and its next attempt (the check after the subscription, or a re-check) waits in the proxy —
// before the server runs it, or after, with its reply held.
// Meanwhile another client's unlock grants it the lock.
//   - The attempt ran first (it found the lock held): the grant stands, and the waiter takes it
//     when the reply comes — not before, and not by another acquire.
//   - The attempt runs after the grant: it finds the waiter's own field and takes the grant as
//     its acquisition (the script keeps the grant's token), and the waiter does not take the
//     grant a second time.
#include <gtest/gtest.h>

#include <future>
#include <optional>
#include <stop_token>
#include <thread>
#include <string>
#include <utility>

#include "../integration/queued_waiter.hpp"
#include "../integration/test_util.hpp"
#include "dlock/keys.hpp"
#include "dlock/mutex.hpp"
#include "partition_util.hpp"
#include "runtime/client_impl.hpp"
#include "support/redis_server.hpp"
#include "support/tcp_proxy.hpp"

using namespace std::chrono_literals;
using dlock::test::direction;
using dlock::test::wait_until;

namespace {

struct grant_lab {
  // The waiter: through the proxy. Its attempt after the subscription is the one held (a
  // re-check each second would be one too); its queue entry stays valid for recheck + 1 s after
  // its latest attempt; its command timeout is well above the freezes below (by default).
  // The holder grants for 3 s (its hand-off window): the grant must outlast the freezes below.
  explicit grant_lab(const std::string& waiter_params = "recheck=1s&timeout=5s",
                     const std::string& holder_params = "handoff=3s")
      : waiter{dlock::test::config_through(proxy, waiter_params)},
        holder{dlock::test::config_for(srv, holder_params)} {}

  dlock::test::redis_server srv;
  dlock::test::tcp_proxy proxy{srv.port()};
  dlock::client waiter;
  dlock::client holder;
  std::string name = dlock::test::unique_name("grant_race");
  dlock::mutex w{waiter, name};
  // What the waiter's command connection sends first (CLIENT SETNAME dlock), and no other
  // connection of it: the subscriber's name is dlock:sub, the caller's channel's dlock:caller.
  static constexpr std::string_view command_connection = "$5\r\ndlock\r\n";
  dlock::mutex h{holder, name};

  // The waiter's try_lock_for on its own thread (its command connection opened before), which
  // holds the lock's owner field: `outcome` tells whether it got the lock and its fencing
  // token, and release() has it unlock.
  // Destroyed in reverse order: release_now first (a test that stopped early lets the thread
  // go on: it unlocks), then released (joins it).
  struct waiting {
    std::future<std::error_code> released;
    std::promise<void> release_now;
    std::future<std::pair<bool, std::uint64_t>> outcome;
  };
  void wait_in_background(waiting& wt) {
    std::promise<std::pair<bool, std::uint64_t>> outcome;
    wt.outcome = outcome.get_future();
    wt.released = std::async(std::launch::async, [this, outcome = std::move(outcome),
                                                  go = wt.release_now.get_future()]() mutable {
      std::error_code ec;
      const bool got = w.try_lock_for(10s, ec);
      outcome.set_value({got && !ec, w.fencing_token()});
      if (!got) return ec;
      go.wait();
      w.unlock(ec);
      return ec;
    });
  }
  std::error_code release(waiting& wt) {
    wt.release_now.set_value();
    EXPECT_EQ(wt.released.wait_for(5s), std::future_status::ready);
    return wt.released.get();
  }
  // The common start: the holder holds; the waiter's command connection is frozen in `d`; the
  // waiter queues and subscribes, and its next attempt is out (held by the proxy before the
  // server ran it, or its reply after); then the holder's unlock grants it the lock, whose
  // message comes while that attempt is out. Returns the grant's fencing token.
  std::uint64_t grant_during_an_attempt(direction d, waiting& wt) {
    h.lock();
    waiter.ping();
    proxy.freeze(d, command_connection);
    wait_in_background(wt);
    dlock::test::await_queued_waiter(srv, waiter, name);
    EXPECT_TRUE(wait_until([&] { return proxy.bytes_held(d) > 0; }, 5s)) << "an attempt is out";
    h.unlock();
    std::string marker;
    EXPECT_TRUE(wait_until([&] { return (marker = grant_marker()) != "$-1"; }, 5s))
        << "granted to the waiter: " << marker;
    EXPECT_TRUE(wait_until([&] { return waiter.impl().grants_deferred().load() == 1; }, 5s))
        << "the grant message came while the attempt was out";
    EXPECT_EQ(wt.outcome.wait_for(100ms), std::future_status::timeout)
        << "the grant is not taken while the attempt is out";
    EXPECT_EQ(waiter.impl().grants_taken().load(), 0u);
    const auto space = marker.find(' ');  // '<ticket> <token>'
    return space == std::string::npos ? 0 : std::stoull(marker.substr(space + 1));
  }
  // Thaws the proxy: the attempt's reply, or the attempt itself, goes on. The waiter's outcome.
  std::pair<bool, std::uint64_t> thaw_and_wait(waiting& wt) {
    proxy.thaw();
    EXPECT_EQ(wt.outcome.wait_for(5s), std::future_status::ready);
    return wt.outcome.get();  // (bounded by its try_lock_for's 10 s)
  }
  std::string grant_marker() {
    return srv.command({"HGET", name, std::string{dlock::keys::grant_field}});
  }
};

TEST(grant_race, a_grant_during_an_attempt_that_found_the_lock_held_is_taken_on_its_reply) {
  grant_lab lab;
  grant_lab::waiting wt;
  // The attempt ran before the grant (the server answered "held"); its reply waits.
  const auto token = lab.grant_during_an_attempt(direction::server_to_client, wt);
  ASSERT_FALSE(HasFailure());

  const auto [got, token_held] = lab.thaw_and_wait(wt);
  EXPECT_TRUE(got);
  EXPECT_EQ(lab.waiter.impl().grants_taken().load(), 1u) << "taken as a grant, on the reply";
  EXPECT_EQ(token_held, token) << "the grant's token";
  // The waiter holds the lock; it confirms the grant (a fifth of the window later) and releases.
  EXPECT_TRUE(wait_until([&] { return lab.grant_marker() == "$-1"; }, 5s)) << "confirmed";
  EXPECT_FALSE(lab.release(wt));
  EXPECT_EQ(lab.srv.command({"EXISTS", lab.name}), ":0");
}

TEST(grant_race, an_attempt_that_runs_after_a_grant_takes_it_as_its_acquisition_once) {
  grant_lab lab;
  grant_lab::waiting wt;
  // The attempt has not reached the server: it runs after the grant.
  const auto token = lab.grant_during_an_attempt(direction::client_to_server, wt);
  ASSERT_FALSE(HasFailure());

  const auto [got, token_held] = lab.thaw_and_wait(wt);
  EXPECT_TRUE(got);
  EXPECT_EQ(lab.waiter.impl().grants_taken().load(), 0u) << "acquired by the attempt, not the grant";
  EXPECT_EQ(token_held, token) << "the grant's token, kept by the attempt that took it";
  EXPECT_EQ(lab.grant_marker(), "$-1") << "the attempt took the grant: no marker left";
  EXPECT_GT(std::stoll(lab.srv.command({"PTTL", lab.name}).substr(1)), 10'000) << "the waiter's own lease";
  EXPECT_FALSE(lab.release(wt));
  EXPECT_EQ(lab.srv.command({"EXISTS", lab.name}), ":0");
}

}  // namespace

// A grant's confirmation that lands while the holder's release is on its way, and that release
// then fails: the hold goes back to the watchdog trusted as the confirmation left it (its own
// lease, from the confirmation's send), not as before it (the grant's window). With an explicit
// lease nothing renews it, so restoring the older trust signalled lease_lost at the window's end
// while Redis held the lock for the whole lease.
TEST(grant_race, a_confirmation_that_lands_while_a_release_fails_keeps_the_explicit_lease) {
  // A short command timeout, so that the release soon gives up; the holder grants for 2 s.
  grant_lab lab{"recheck=1s&timeout=300ms&connect_timeout=300ms", "handoff=2s"};
  auto& [srv, proxy, waiter, holder, name, w, h] = lab;

  // The waiter's thread: try_lock_for with a 10 s lease, then two unlocks when told. Its
  // promises are declared after the worker, so a test that stops early lets it go on.
  std::future<void> worker;
  std::promise<std::optional<std::stop_token>> acquired;
  std::promise<void> unlock_now, unlock_again;
  std::promise<std::error_code> first, second;
  auto got = acquired.get_future();
  auto first_done = first.get_future();
  auto second_done = second.get_future();
  h.lock();
  waiter.ping();
  worker = std::async(std::launch::async, [&, now = unlock_now.get_future(), again = unlock_again.get_future()] {
    std::error_code ec;
    const bool ok = w.try_lock_for(10s, 10s, ec);
    acquired.set_value(ok ? std::optional<std::stop_token>{w.lease_lost()} : std::nullopt);
    if (!ok) return;
    now.wait();
    w.unlock(ec);
    first.set_value(ec);
    again.wait();
    ec.clear();
    w.unlock(ec);
    second.set_value(ec);
  });
  dlock::test::await_queued_waiter(srv, waiter, name);

  const auto granted_at = dlock::test::steady::now();
  h.unlock();  // grants the waiter the lock: it confirms a fifth of the window (400 ms) later
  ASSERT_EQ(got.wait_for(5s), std::future_status::ready);
  const auto lost = got.get();
  ASSERT_TRUE(lost) << "granted";
  ASSERT_EQ(waiter.impl().grants_taken().load(), 1u);
  proxy.freeze(direction::server_to_client, grant_lab::command_connection);  // holds its reply
  ASSERT_TRUE(wait_until([&] { return lab.grant_marker() == "$-1"; }, 3s)) << "the confirmation ran";
  EXPECT_GT(std::stoll(srv.command({"PTTL", name}).substr(1)), 5'000) << "the waiter's own 10 s lease";

  proxy.blackhole(direction::client_to_server);  // the release and its resends never arrive
  const auto dropped = proxy.bytes_dropped(direction::client_to_server);
  unlock_now.set_value();
  ASSERT_TRUE(wait_until([&] { return proxy.bytes_dropped(direction::client_to_server) > dropped; }, 2s))
      << "the release went out";
  proxy.thaw();  // the confirmation's reply arrives while the release waits for its own
  ASSERT_EQ(first_done.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(first_done.get()) << "the release failed (no reply)";
  EXPECT_EQ(srv.command({"EXISTS", name}), ":1") << "still the waiter's on the server";

  // Past the grant's window: trusted from the confirmation for the 10 s lease.
  std::this_thread::sleep_until(std::max(granted_at + 2500ms, dlock::test::steady::now() + 200ms));
  EXPECT_FALSE(lost->stop_requested()) << "lease_lost at the grant's window: the confirmation was forgotten";
  proxy.pass();
  // Reconnected (its backoff after the failed attempts), the hold checked and kept.
  ASSERT_TRUE(wait_until([&] {
    std::error_code ec;
    waiter.ping(ec);
    return !ec;
  }, 10s));
  unlock_again.set_value();
  ASSERT_EQ(second_done.wait_for(10s), std::future_status::ready);
  const auto ec = second_done.get();
  EXPECT_FALSE(ec) << "released now: " << ec.message();
  EXPECT_FALSE(lost->stop_requested());
  EXPECT_EQ(srv.command({"EXISTS", name}), ":0");
}

// A waiter gives up (its deadline passes) while everything it sends is delayed by the proxy: its
// last check and its leave are still on their way when an unlock grants it the lock. The waiter
// takes nothing (its op has ended); whichever of its late requests runs first hands the lock on —
// the last check takes the grant as its own and the op's give-back releases it, or the leave
// passes the grant on as an unlock would — so the next in line gets the lock promptly, not when
// the grant's window ends (3 s here) and its own re-check comes.
TEST(grant_race, a_grant_to_a_waiter_that_gave_up_reaches_the_next_in_line_promptly) {
  grant_lab lab;
  dlock::client next_client{dlock::test::config_for(lab.srv)};
  dlock::mutex next{next_client, lab.name};
  lab.h.lock();
  lab.waiter.ping();
  auto gave_up = std::async(std::launch::async, [&] {
    std::error_code ec;
    const bool got = lab.w.try_lock_for(600ms, ec);
    return std::make_pair(got, ec);
  });
  dlock::test::await_queued_waiter(lab.srv, lab.waiter, lab.name);
  auto later = std::async(std::launch::async, [&] {
    std::error_code ec;
    const bool got = next.try_lock_for(10s, ec);
    if (got) next.unlock(ec);
    return std::make_pair(got, ec);
  });
  ASSERT_TRUE(wait_until([&] { return lab.srv.command({"ZCARD", dlock::keys::waiter_queue(lab.name)}) == ":2"; }, 5s));
  lab.proxy.delay(direction::client_to_server, 400ms);  // the waiter's last check and its leave

  ASSERT_EQ(gave_up.wait_for(5s), std::future_status::ready);
  const auto [got, ec] = gave_up.get();
  EXPECT_FALSE(got) << "its deadline passed";
  EXPECT_FALSE(ec) << ec.message();
  const auto unlocked = dlock::test::steady::now();
  lab.h.unlock();  // grants the queue's head: the waiter that gave up, its requests on their way
  EXPECT_NE(lab.srv.command({"HGETALL", lab.name}).find(lab.waiter.impl().id()), std::string::npos)
      << "granted to the waiter that gave up: " << lab.srv.command({"HGETALL", lab.name});

  ASSERT_EQ(later.wait_for(5s), std::future_status::ready);
  const auto [next_got, next_ec] = later.get();
  EXPECT_TRUE(next_got) << next_ec.message();
  EXPECT_LT(dlock::test::steady::now() - unlocked, 2s) << "handed on by the late requests, not the window's end";
  EXPECT_EQ(lab.waiter.impl().grants_taken().load(), 0u) << "the waiter that gave up took nothing";
  lab.proxy.pass();
  EXPECT_TRUE(wait_until([&] { return lab.srv.command({"EXISTS", lab.name}) == ":0"; }, 5s));
}
