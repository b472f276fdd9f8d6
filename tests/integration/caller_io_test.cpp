// The caller's channel (config::caller_io): blocking lock/unlock doing their own I/O on the
// calling thread, over one more connection, against a real redis-server — what goes over it,
// falling back to the I/O thread, a connection killed under it, shutdown in the middle of a
// call, and renewals racing releases.
#include <gtest/gtest.h>

#include <sys/epoll.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>
#include <regex>
#include <thread>
#include <vector>

#include "dlock/keys.hpp"
#include "dlock/mutex.hpp"
#include "runtime/client_impl.hpp"
#include "support/redis_server.hpp"
#include "queued_waiter.hpp"
#include "test_util.hpp"

using namespace std::chrono_literals;
using dlock::errc;
using steady = std::chrono::steady_clock;

namespace {

using dlock::test::config_for;

// Redis' ids of the connections named `name` (CLIENT LIST).
std::vector<std::string> client_ids(const dlock::test::redis_server& srv, const std::string& name) {
  const auto list = srv.command({"CLIENT", "LIST"});
  std::vector<std::string> ids;
  const std::regex line{"id=([0-9]+) [^\\n]* name=" + name + " "};
  for (auto it = std::sregex_iterator(list.begin(), list.end(), line); it != std::sregex_iterator{}; ++it) {
    ids.push_back((*it)[1]);
  }
  return ids;
}

// Registrations made with EPOLLEXCLUSIVE in this process's epoll sets (/proc/self/fdinfo lists
// each one as "tfd: <fd> events: <mask in hex> ...").
int exclusive_registrations() {
  int n = 0;
  for (const auto& fd : std::filesystem::directory_iterator{"/proc/self/fd"}) {
    std::error_code ec;
    if (std::filesystem::read_symlink(fd.path(), ec).string() != "anon_inode:[eventpoll]" || ec) continue;
    std::ifstream info{"/proc/self/fdinfo/" + fd.path().filename().string()};
    for (std::string line; std::getline(info, line);) {
      const auto at = line.find("events:");
      if (line.rfind("tfd:", 0) != 0 || at == std::string::npos) continue;
      if (std::stoul(line.substr(at + 7), nullptr, 16) & EPOLLEXCLUSIVE) ++n;
    }
  }
  return n;
}

std::int64_t exists(dlock::client& c, const std::string& key) {
  return c.execute({"EXISTS", key}).integer();
}

TEST(caller_io, blocking_lock_and_unlock_go_over_the_callers_channel) {
  dlock::test::redis_server srv;
  dlock::client c{config_for(srv)};
  c.ping();  // the command connection is up: the channel follows it
  dlock::mutex m{c, dlock::test::unique_name("lock")};
  m.lock();
  EXPECT_GT(m.fencing_token(), 0u);
  EXPECT_GT(m.lease_time_left(), 29s) << "trusted from the send, on the calling thread";
  m.lock();  // re-entry
  EXPECT_EQ(m.hold_count(), 2u);
  m.unlock();
  EXPECT_EQ(exists(c, m.name()), 1);
  m.unlock();
  EXPECT_EQ(exists(c, m.name()), 0);
  EXPECT_EQ(c.impl().caller_calls(), 4u);
  EXPECT_EQ(client_ids(srv, "dlock:caller").size(), 1u);
  std::error_code ec;
  m.unlock(ec);
  EXPECT_EQ(ec, errc::not_owner);
}

TEST(caller_io, off_and_where_it_cannot_be_used_every_call_goes_through_the_io_thread) {
  dlock::test::redis_server srv;
  for (const auto* extra : {"caller_io=off",
                            // WAIT counts the writes of the connection that sends it
                            "wait_replicas=1&wait_timeout=10ms&on_shortfall=accept"}) {
    SCOPED_TRACE(extra);
    dlock::client c{config_for(srv, extra)};
    dlock::mutex m{c, dlock::test::unique_name("lock")};
    m.lock();
    m.unlock();
    EXPECT_EQ(exists(c, m.name()), 0);
    EXPECT_EQ(c.impl().caller_calls(), 0u);
    EXPECT_TRUE(client_ids(srv, "dlock:caller").empty());
  }
}

TEST(caller_io, a_waiter_whose_first_attempt_went_over_the_channel_is_woken_by_the_unlock) {
  dlock::test::redis_server srv;
  dlock::client a{config_for(srv)}, b{config_for(srv, "recheck=20s")};
  const auto name = dlock::test::unique_name("lock");
  dlock::mutex ma{a, name}, mb{b, name};
  ma.lock();
  b.ping();  // b's command connection is up: the channel follows it (before, calls go the strand's way)
  auto waiter = std::async(std::launch::async, [&] {
    mb.lock();  // held: it waits on b's I/O thread, queued by the channel's attempt
    const auto token = mb.fencing_token();
    mb.unlock();
    return token;
  });
  // Wait until b's waiter is queued and listening, then unlock: it must be granted the lock by the message
  // (its re-check is 20 s away; the test's time limit is far below that).
  ASSERT_NO_FATAL_FAILURE(dlock::test::await_queued_waiter(srv, b, name));
  const auto first = ma.fencing_token();
  ma.unlock();
  ASSERT_EQ(waiter.wait_for(10s), std::future_status::ready);
  EXPECT_GT(waiter.get(), first);
  EXPECT_GE(b.impl().caller_calls(), 1u);  // the attempt (the unlock right after a grant goes behind its confirmation)
  EXPECT_EQ(b.impl().grants_taken().load(), 1u) << "the unlock granted the lock to the waiter";
  EXPECT_EQ(exists(a, name), 0);
}

// Hand-offs from client a to client b on one lock, b's waits watching its subscriber
// (runtime/caller_wake.hpp). b re-checks only every 20 s: the grant must reach it.
struct watch_lab : dlock::test::holder_and_waiter {
  explicit watch_lab(const std::string& b_extra = "") : holder_and_waiter{"", "recheck=20s" + b_extra} {
    b.ping();  // the command connection is up (the caller's channel follows it), and the subscriber:
    EXPECT_TRUE(dlock::test::wait_until([&] { return b.impl().subscriber().connected(); }, 5s));
  }
};

// A waiter whose first attempt found the lock held sleeps watching the subscriber's socket,
// round after round; a second waiter of b's on the same lock sleeps on its condition variable
// (one watcher per client) and gets the lock in its turn.
TEST(caller_io, a_waiting_lock_watches_the_subscriber_for_its_grant) {
  watch_lab l;
  auto& [srv, name, a, b, ma, mb] = l;
  constexpr int rounds = 3;
  for (int round = 0; round < rounds; ++round) {
    SCOPED_TRACE(round);
    ma.lock();
    auto waiter = l.b_takes_and_releases();
    ASSERT_NO_FATAL_FAILURE(dlock::test::await_queued_waiter(srv, b, name));
    ma.unlock();
    ASSERT_EQ(waiter.wait_for(10s), std::future_status::ready);
    EXPECT_TRUE(waiter.get());
  }
  EXPECT_EQ(b.impl().grants_taken().load(), static_cast<std::uint64_t>(rounds));
  // Every wait watched the subscriber. (Whether the grant's bytes woke the caller before the I/O
  // thread handled them is a race on a busy host: the unit tests cover both outcomes.)
  EXPECT_EQ(b.impl().watched_waits().load(), static_cast<std::uint64_t>(rounds));

  // Two of b's threads wait; one watches. Each gets the lock once; nobody holds it after.
  ma.lock();
  std::atomic<int> inside{0}, most{0}, done{0};
  auto worker = [&] {
    if (!mb.try_lock_for(10s)) return;
    most = std::max(most.load(), ++inside);
    std::this_thread::sleep_for(5ms);
    --inside;
    mb.unlock();
    ++done;
  };
  auto w1 = std::async(std::launch::async, worker), w2 = std::async(std::launch::async, worker);
  ASSERT_TRUE(dlock::test::wait_until([&] { return srv.command({"ZCARD", dlock::keys::waiter_queue(name)}) == ":2"; }, 5s));
  ma.unlock();
  ASSERT_EQ(w1.wait_for(10s), std::future_status::ready);
  ASSERT_EQ(w2.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(done.load(), 2);
  EXPECT_EQ(most.load(), 1);
  EXPECT_EQ(exists(a, name), 0);
}

// The watching caller registers the subscriber's socket exclusively (EPOLLEXCLUSIVE, as
// /proc/self/fdinfo shows it), which Linux (4.5 on) queues after the I/O thread's registration,
// so the I/O thread is woken first (link::watch); the registration ends with the wait.
TEST(caller_io, a_watching_callers_registration_is_exclusive_and_ends_with_the_wait) {
  watch_lab l;
  auto& [srv, name, a, b, ma, mb] = l;
  EXPECT_EQ(exclusive_registrations(), 0);
  ma.lock();
  auto waiter = l.b_takes_and_releases();
  ASSERT_NO_FATAL_FAILURE(dlock::test::await_queued_waiter(srv, b, name));
  EXPECT_TRUE(dlock::test::wait_until([&] { return exclusive_registrations() == 1; }, 5s))
      << "the waiting caller watches the subscriber's socket, exclusively";
  ma.unlock();
  ASSERT_EQ(waiter.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(waiter.get());
  EXPECT_EQ(b.impl().watched_waits().load(), 1u);
  EXPECT_EQ(exclusive_registrations(), 0) << "the watch ends with the wait";
}

// The watched socket closes under a waiting caller (the subscriber's connection is killed): the
// caller is still woken, by the completion, when the lock comes to it after the resubscription.
TEST(caller_io, a_waiting_lock_whose_watched_subscriber_reconnects_still_gets_the_lock) {
  watch_lab l{"&name=bee"};
  auto& [srv, name, a, b, ma, mb] = l;
  ma.lock();
  auto waiter = l.b_takes_and_releases();
  ASSERT_NO_FATAL_FAILURE(dlock::test::await_queued_waiter(srv, b, name));
  ASSERT_TRUE(dlock::test::wait_until([&] { return b.impl().watched_waits().load() == 1; }, 5s))
      << "it watches the subscriber about to be killed";
  const auto subs = client_ids(srv, "bee:sub");
  ASSERT_EQ(subs.size(), 1u);
  srv.command({"CLIENT", "KILL", "ID", subs.front()});
  ASSERT_TRUE(dlock::test::wait_until([&] {
    const auto now = client_ids(srv, "bee:sub");
    return now.size() == 1 && now != subs && dlock::test::numsub(srv, dlock::keys::waiter_channel(b.impl().id())) == 1;
  }, 5s));
  ma.unlock();
  ASSERT_EQ(waiter.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(waiter.get());
  EXPECT_EQ(exists(a, name), 0);
}

TEST(caller_io, a_killed_channel_connection_is_replaced_and_the_call_still_answers) {
  dlock::test::redis_server srv;
  dlock::client c{config_for(srv)};
  dlock::mutex m{c, dlock::test::unique_name("lock")};
  m.lock();
  m.unlock();
  auto ids = client_ids(srv, "dlock:caller");
  ASSERT_EQ(ids.size(), 1u);
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(round);
    srv.command({"CLIENT", "KILL", "ID", ids.front()});
    // The next call finds its connection closed: its outcome unknown, it is resent through the
    // I/O thread (the acquire and release scripts are idempotent for an expected count).
    m.lock();
    EXPECT_TRUE(m.is_held_by_current_thread());
    EXPECT_EQ(m.hold_count(), 1u) << "applied once however often it was sent";
    m.unlock();
    EXPECT_EQ(exists(c, m.name()), 0);
    // Within the reconnect delay the calls go through the I/O thread; then over a new channel.
    std::vector<std::string> now;
    for (int i = 0; i < 200 && ((now = client_ids(srv, "dlock:caller")).empty() || now == ids); ++i) {
      std::this_thread::sleep_for(10ms);
      m.lock();
      m.unlock();
    }
    ASSERT_EQ(now.size(), 1u);
    EXPECT_NE(now, ids);
    ids = now;
  }
}

TEST(caller_io, shutdown_during_a_call_gives_back_what_the_call_took) {
  dlock::test::redis_server srv;
  auto c = std::make_unique<dlock::client>(config_for(srv));
  const auto name = dlock::test::unique_name("lock");
  dlock::mutex m{*c, name};
  m.lock();  // the channel is up
  m.unlock();
  // Clients' commands wait while the server is paused: the next lock() is in its call when
  // shutdown begins, and completes (acquired) after it began.
  srv.command({"CLIENT", "PAUSE", "700", "ALL"});
  auto locker = std::async(std::launch::async, [&] {
    std::error_code ec;
    m.lock(ec);
    return ec;
  });
  std::this_thread::sleep_for(200ms);
  c->shutdown();
  ASSERT_EQ(locker.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(locker.get(), errc::shutdown);
  EXPECT_EQ(srv.command({"EXISTS", name}), ":0") << "the acquisition was given back";
}

TEST(caller_io, a_request_left_in_doubt_on_the_channel_is_fenced_and_nothing_stays_held) {
  // Writes wait while the server is paused for writes: the channel's acquire gets no reply in
  // time, so its connection is killed (CLIENT KILL ID on the command connection, ahead of the
  // resend) and the call ends by its deadline; once the pause is over nothing may be held.
  dlock::test::redis_server srv;
  dlock::client c{config_for(srv, "timeout=200ms")};
  const auto name = dlock::test::unique_name("lock");
  dlock::mutex m{c, name};
  m.lock();  // the channel is up
  m.unlock();
  srv.command({"CLIENT", "PAUSE", "800", "WRITE"});
  const auto t0 = steady::now();
  std::error_code ec;
  const bool got = m.try_lock_for(300ms, ec);
  EXPECT_LT(steady::now() - t0, 2s) << "bounded by the deadline and one command timeout";
  EXPECT_FALSE(got && !ec);
  if (got && !ec) m.unlock();
  std::this_thread::sleep_for(1200ms);  // the pause ends; the give-back runs
  EXPECT_EQ(srv.command({"EXISTS", name}), ":0");
  // (Killed by the channel's fence. The command connection's requests time out too while the
  // server is paused — the resend as well — and each next connection fences the one before:
  // one kill, and one more per reconnect during the pause.)
  EXPECT_GE(dlock::test::command_stat(srv, "client|kill"), 1);
  m.lock();  // and the channel is back
  m.unlock();
  EXPECT_EQ(srv.command({"EXISTS", name}), ":0");
}

TEST(caller_io, renewals_and_caller_releases_never_cross) {
  // Renewals every 100 ms while four threads lock and unlock as fast as they can, some holds
  // kept across a renewal: a release sent on the channel while a renewal of the same hold is
  // on its way would let the renewal find the hold gone (a lease counted lost) or extend the
  // thread's next hold.
  dlock::test::redis_server srv;
  dlock::client c{config_for(srv, "watchdog=300ms")};
  std::atomic<int> errors{0}, pairs{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      dlock::mutex m{c, dlock::test::unique_name("lock")};
      const auto until = steady::now() + 1500ms;
      for (int i = 0; i < 100'000 && steady::now() < until; ++i) {
        std::error_code ec;
        m.lock(ec);
        if (!ec && i % 200 == t) std::this_thread::sleep_for(120ms);
        if (!ec) m.unlock(ec);
        if (ec) ++errors;
        ++pairs;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_GT(pairs.load(), 100);
  EXPECT_EQ(c.impl().watchdog().leases_lost(), 0u);
  EXPECT_GT(c.impl().watchdog().renewals_sent(), 0u);
  EXPECT_EQ(c.execute({"DBSIZE"}).integer(), 1) << "only the shared fencing counter is left";
}

}  // namespace
