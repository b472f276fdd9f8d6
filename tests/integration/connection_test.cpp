// The command connection against a real redis-server: pipelining from many threads, coroutines
// and futures, reconnects, timeouts, the blocking bridge and shutdown.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/post.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/use_future.hpp>
#include <atomic>
#include <future>
#include <thread>

#include "dlock/client.hpp"
#include "dlock/mutex.hpp"
#include "queued_waiter.hpp"
#include "resp/encoder.hpp"
#include "runtime/client_impl.hpp"
#include "support/redis_server.hpp"
#include "test_util.hpp"

using namespace std::chrono_literals;
using dlock::errc;

namespace {

using dlock::test::config_for;
using dlock::test::impl;
using dlock::test::numsub;

// Retries ping until it succeeds or `limit` passes (reconnects take a backoff step or two).
bool ping_within(dlock::client& c, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  std::error_code ec;
  do {
    c.ping(ec);
    if (!ec) return true;
  } while (std::chrono::steady_clock::now() < end);
  return false;
}

TEST(connection, executes_commands_and_reports_error_replies) {
  dlock::test::redis_server srv;
  dlock::client c{config_for(srv)};
  const auto key = dlock::test::unique_name("k");
  EXPECT_EQ(c.execute({"SET", key, "v"}).str(), "OK");
  EXPECT_EQ(c.execute({"GET", key}).str(), "v");
  EXPECT_TRUE(c.execute({"GET", key + ":none"}).is_nil());
  EXPECT_EQ(c.execute({"INCR", key + ":n"}).integer(), 1);

  std::error_code ec;
  auto r = c.execute({"HSET", key, "f", "1"}, ec);
  EXPECT_EQ(ec, errc::wrong_type);
  EXPECT_TRUE(r.is_error());
  EXPECT_NE(r.str().find("WRONGTYPE"), std::string::npos);
  try {
    c.execute({"HSET", key, "f", "1"});
    FAIL() << "expected lock_error";
  } catch (const dlock::lock_error& e) {
    EXPECT_EQ(e.code(), errc::wrong_type);
    EXPECT_NE(std::string(e.what()).find("WRONGTYPE"), std::string::npos);
  }
}

// 8 threads x 10,000 commands on the one connection, all in flight together: every reply must
// reach the request it answers.
TEST(connection, pipelines_many_threads_and_matches_every_reply) {
  dlock::test::redis_server srv;
  dlock::client c{config_for(srv)};
  constexpr int threads = 8, per_thread = 10'000;
  std::atomic<int> matched{0}, mismatched{0}, failed{0};
  std::promise<void> all_done;
  std::atomic<int> left{threads * per_thread};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) {
        auto expect = std::to_string(t) + ":" + std::to_string(i);
        c.async_execute({"ECHO", expect}, [&, expect](std::error_code ec, dlock::reply r) {
          if (ec) {
            ++failed;
          } else if (r.str() == expect) {
            ++matched;
          } else {
            ++mismatched;
          }
          if (--left == 0) all_done.set_value();
        });
      }
    });
  }
  for (auto& th : pool) th.join();
  ASSERT_EQ(all_done.get_future().wait_for(60s), std::future_status::ready);
  EXPECT_EQ(matched, threads * per_thread);
  EXPECT_EQ(mismatched, 0);
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(impl(c).connection().connects(), 1u) << "no reconnect expected";
  // Requests submitted while a write is in progress leave together in the next one.
  EXPECT_LT(impl(c).connection().writes(), threads * per_thread / 4) << "writes were not coalesced";
}

// Many requests submitted by handlers on the strand in one turn (an asynchronous program's
// next commands, made by the replies of one read) leave before the turn ends, in order, so the
// server starts on them while the rest are made (connection::early_write_batch).
TEST(connection, a_strand_turn_that_submits_many_writes_early_and_in_order) {
  // Before the client: its handlers refer to these until it has stopped.
  constexpr int n = 64;
  std::promise<std::uint64_t> writes_in_turn;
  std::promise<void> all_done;
  int next = 0, out_of_order = 0, failed = 0;  // strand only
  dlock::test::redis_server srv;
  dlock::client c{config_for(srv)};
  c.ping();
  auto& conn = impl(c).connection();
  const auto before = conn.writes();
  asio::post(impl(c).strand(), [&] {
    for (int i = 0; i < n; ++i) {
      conn.submit(dlock::resp::encode_command({"ECHO", std::to_string(i)}), 5s,
                  [&, i](std::error_code ec, dlock::reply r) {
                    if (ec || r.str() != std::to_string(i)) ++failed;
                    if (i != next++) ++out_of_order;
                    if (next == n) all_done.set_value();
                  });
    }
    writes_in_turn.set_value(conn.writes() - before);
  });
  ASSERT_EQ(all_done.get_future().wait_for(10s), std::future_status::ready);
  EXPECT_GE(writes_in_turn.get_future().get(), 1u) << "nothing left before the turn ended";
  EXPECT_EQ(out_of_order, 0);
  EXPECT_EQ(failed, 0);
  EXPECT_LT(conn.writes() - before, 16u) << "still batched, not a write per request";
}

// Handlers that the pipeline runs while it walks its queues (here: requests timing out against
// a stopped server) may submit many requests: those wait for the posted flush instead of
// being written into the queue being walked (connection::completing_) — no write happens
// inside such a handler — and all complete once the server answers again.
TEST(connection, handlers_run_by_an_expiring_walk_may_submit_many) {
  dlock::test::redis_server srv;
  auto cfg = config_for(srv);
  cfg.command_timeout = 200ms;
  cfg.connect_timeout = 200ms;
  dlock::client c{cfg};
  ASSERT_TRUE(ping_within(c, 5s));
  auto& conn = impl(c).connection();
  constexpr int first = 12, each = 12;
  std::atomic<int> timed_out{0}, second_done{0}, second_ok{0}, written_in_walk{0};
  srv.pause();
  asio::post(impl(c).strand(), [&] {
    for (int i = 0; i < first; ++i) {
      conn.submit(dlock::resp::encode_command({"PING"}), 200ms,
                  [&](std::error_code ec, dlock::reply) {
                    if (ec) ++timed_out;
                    const auto writes_before = conn.writes();
                    for (int j = 0; j < each; ++j) {
                      conn.submit(dlock::resp::encode_command({"PING"}), 10s,
                                  [&](std::error_code e2, dlock::reply) {
                                    if (!e2) ++second_ok;
                                    ++second_done;
                                  });
                    }
                    if (conn.writes() != writes_before) ++written_in_walk;
                  });
    }
  });
  ASSERT_TRUE(dlock::test::wait_until([&] { return timed_out.load() == first; }, 5s));
  srv.resume();
  ASSERT_TRUE(dlock::test::wait_until([&] { return second_done.load() == first * each; }, 15s));
  EXPECT_EQ(written_in_walk.load(), 0) << "a handler run by the walk wrote into the walked queue";
  EXPECT_GT(second_ok.load(), 0) << "the server answers again";
  EXPECT_TRUE(ping_within(c, 10s));
}

TEST(connection, completes_through_awaitable_future_and_callback_tokens) {
  dlock::test::redis_server srv;
  dlock::client c{config_for(srv)};

  auto fut = c.async_execute({"ECHO", "future"}, asio::use_future);
  ASSERT_EQ(fut.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(fut.get().str(), "future");

  std::promise<std::string> from_coroutine;
  asio::co_spawn(
      c.get_executor(),
      [&]() -> asio::awaitable<void> {
        std::vector<std::string> args{"ECHO", "coro"};  // g++ 12: no braced lists in co_await
        auto [ec, r] = co_await c.async_execute(std::move(args),
                                                asio::experimental::as_tuple(asio::use_awaitable));
        from_coroutine.set_value(ec ? ec.message() : r.str());
      },
      asio::detached);
  auto f2 = from_coroutine.get_future();
  ASSERT_EQ(f2.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(f2.get(), "coro");

  // A failing command through use_future raises the error as a system_error.
  const auto key = dlock::test::unique_name("k");
  c.execute({"SET", key, "v"});
  auto bad = c.async_execute({"LPUSH", key, "x"}, asio::use_future);
  ASSERT_EQ(bad.wait_for(10s), std::future_status::ready);
  // The I/O thread drops its reference to the future's state (the completion handler) just
  // after setting it; a round trip makes sure it has, so that the exception is freed on this
  // thread. (Else ThreadSanitizer reports the free there against the read here: the exception's
  // reference count lives in libstdc++, which it does not see.)
  c.ping();
  try {
    bad.get();
    FAIL() << "expected an exception";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), errc::wrong_type);
  }
}

TEST(connection, sync_call_on_io_thread_fails_with_would_deadlock) {
  dlock::test::redis_server srv;
  dlock::client c{config_for(srv)};
  std::promise<std::error_code> result;
  c.async_execute({"PING"}, [&](std::error_code, dlock::reply) {
    std::error_code ec;
    c.execute({"PING"}, ec);  // on the I/O thread: must refuse, not hang
    result.set_value(ec);
  });
  auto f = result.get_future();
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(f.get(), errc::would_deadlock);
  EXPECT_FALSE(c.on_io_thread());
}

TEST(connection, reconnects_after_server_restart) {
  dlock::test::redis_server srv;
  dlock::client c{config_for(srv)};
  ASSERT_TRUE(ping_within(c, 5s));
  srv.restart();
  EXPECT_TRUE(ping_within(c, 10s));
  EXPECT_TRUE(dlock::test::wait_until([&] { return impl(c).connection().connects() >= 2; }, 5s));
}

TEST(connection, reconnects_after_client_kill) {
  dlock::test::redis_server srv;
  dlock::client c{config_for(srv)};
  ASSERT_TRUE(ping_within(c, 5s));
  srv.command({"CLIENT", "KILL", "TYPE", "normal"});
  EXPECT_TRUE(ping_within(c, 10s));
  EXPECT_TRUE(dlock::test::wait_until([&] { return impl(c).connection().connects() >= 2; }, 5s));
  EXPECT_EQ(c.execute({"ECHO", "after"}).str(), "after");
}

// A stopped server accepts nothing: the command times out at its deadline, the connection is
// dropped and, after SIGCONT, re-established.
TEST(connection, command_times_out_against_a_stopped_server_and_recovers) {
  dlock::test::redis_server srv;
  auto cfg = config_for(srv);
  cfg.command_timeout = 300ms;
  cfg.connect_timeout = 300ms;
  dlock::client c{cfg};
  ASSERT_TRUE(ping_within(c, 5s));
  srv.pause();
  std::error_code ec;
  const auto start = std::chrono::steady_clock::now();
  c.execute({"PING"}, ec);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(ec, errc::timeout);
  EXPECT_GE(took, 290ms);
  EXPECT_LT(took, 2s) << "slop: the deadline timer fires at 300 ms";
  // While stopped, new calls fail within the connect timeout rather than hanging.
  c.execute({"PING"}, ec);
  EXPECT_TRUE(ec == errc::timeout || ec == errc::connect_timeout) << ec.message();
  srv.resume();
  EXPECT_TRUE(ping_within(c, 10s));
}

TEST(connection, unreachable_port_fails_within_the_connect_timeout) {
  const auto port = dlock::test::free_port();  // nothing listens here
  auto cfg = dlock::config::from_uri("redis://127.0.0.1:" + std::to_string(port) +
                                     "?connect_timeout=500ms&timeout=5s");
  dlock::client c{cfg};
  std::error_code ec;
  const auto start = std::chrono::steady_clock::now();
  c.ping(ec);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(ec, errc::connection_refused);
  EXPECT_LT(took, 1500ms) << "bounded by the connect timeout (500 ms) plus slop";
}

TEST(connection, silent_server_fails_with_connect_timeout) {
  // A listener that accepts TCP but never answers: the handshake cannot complete.
  asio::io_context io;
  asio::ip::tcp::acceptor acceptor{io, {asio::ip::make_address("127.0.0.1"), 0}};
  const auto port = acceptor.local_endpoint().port();
  auto cfg = dlock::config::from_uri("redis://127.0.0.1:" + std::to_string(port) +
                                     "?connect_timeout=300ms&timeout=5s");
  dlock::client c{cfg};
  std::error_code ec;
  const auto start = std::chrono::steady_clock::now();
  c.ping(ec);
  EXPECT_EQ(ec, errc::connect_timeout);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1500ms);
}

// The idle health check: PINGs flow while nobody calls, and a server that stops answering is
// noticed and reconnected to without any caller tripping over it.
TEST(connection, idle_health_check_pings_and_detects_a_stopped_server) {
  dlock::test::redis_server srv;
  auto cfg = config_for(srv);
  cfg.health_check_interval = 50ms;
  cfg.command_timeout = 200ms;
  cfg.connect_timeout = 200ms;
  dlock::client c{cfg};
  ASSERT_TRUE(ping_within(c, 5s));
  auto pings = [&] { return dlock::test::command_stat(srv, "ping"); };
  const auto before = pings();
  EXPECT_TRUE(dlock::test::wait_until([&] { return pings() >= before + 3; }, 5s));

  srv.pause();
  // Idle connections find out by themselves (interval + command timeout) and drop.
  EXPECT_TRUE(dlock::test::wait_until([&] { return !impl(c).connection().connected(); }, 3s));
  EXPECT_TRUE(dlock::test::wait_until([&] { return !impl(c).subscriber().connected(); }, 3s));
  const auto connects = impl(c).connection().connects();
  const auto sub_connects = impl(c).subscriber().connects();
  srv.resume();
  EXPECT_TRUE(
      dlock::test::wait_until([&] { return impl(c).connection().connects() > connects; }, 5s));
  EXPECT_TRUE(
      dlock::test::wait_until([&] { return impl(c).subscriber().connects() > sub_connects; }, 5s));
  EXPECT_TRUE(impl(c).connection().connected());
}

TEST(connection, shutdown_completes_pending_calls_with_shutdown) {
  dlock::test::redis_server srv;
  auto cfg = config_for(srv);
  cfg.command_timeout = 30s;  // only shutdown can complete these
  auto c = std::make_unique<dlock::client>(cfg);
  ASSERT_TRUE(ping_within(*c, 5s));
  srv.pause();
  dlock::test::recorder<std::error_code> results;
  for (int i = 0; i < 100; ++i) {
    c->async_execute({"PING"}, [&](std::error_code ec, dlock::reply) { results.push(ec); });
  }
  c->shutdown();
  ASSERT_TRUE(results.wait_for(5s, [](auto& v) { return v.size() == 100; }));
  for (auto ec : results.items()) EXPECT_EQ(ec, errc::shutdown) << ec.message();
  // After shutdown, calls complete at once with errc::shutdown, sync and async alike.
  std::promise<std::error_code> late;
  c->async_execute({"PING"}, [&](std::error_code ec, dlock::reply) { late.set_value(ec); });
  auto late_f = late.get_future();
  ASSERT_EQ(late_f.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(late_f.get(), errc::shutdown);
  std::error_code ec;
  c->ping(ec);
  EXPECT_EQ(ec, errc::shutdown);
  c->shutdown();  // idempotent
  c.reset();
  srv.resume();
}

// The sockets among the open descriptors of process `pid`.
int sockets_of(pid_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return -1;
  int n = 0;
  while (const dirent* e = ::readdir(d)) {
    char target[256];
    const auto len = ::readlink((dir + "/" + e->d_name).c_str(), target, sizeof target - 1);
    if (len > 0 && std::string_view{target, static_cast<std::size_t>(len)}.starts_with("socket:"))
      ++n;
  }
  ::closedir(d);
  return n;
}

// A child the application starts (fork and exec) must not keep the client's connections open:
// after this process died, Redis would still see a live client, and its subscriber would go on
// hearing hand-offs for waiters that are gone. Every connection is up here: each client's command
// connection and subscriber (the waiter's subscribed to its lock's channels).
TEST(connection, a_child_process_inherits_none_of_the_clients_connections) {
  dlock::test::holder_and_waiter l;
  auto& [srv, name, holder, waiter, h, w] = l;
  // Both command connections up first.
  holder.ping();
  waiter.ping();
  h.lock();
  auto t = l.b_takes_and_releases();
  dlock::test::await_queued_waiter(srv, waiter, name);  // its subscriber is up and subscribed
  ASSERT_GE(sockets_of(::getpid()), 4) << "both clients' connections are open in this process";
  pid_t child = -1;
  char sleep_path[] = "/bin/sleep", sleep_arg[] = "30";
  char* args[] = {sleep_path, sleep_arg, nullptr};
  ASSERT_EQ(::posix_spawn(&child, sleep_path, nullptr, nullptr, args, environ), 0);
  const int inherited = sockets_of(child);  // posix_spawn returns after the exec
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  EXPECT_EQ(inherited, 0);
  h.unlock();
  ASSERT_EQ(t.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(t.get()) << "the waiter got the lock and released it";
}

}  // namespace
