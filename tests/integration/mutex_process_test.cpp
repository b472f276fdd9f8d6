// dlock::mutex across processes against a real redis-server: a holder killed with SIGKILL, a
// holder frozen with SIGSTOP past its lease, mutual exclusion of 8 processes on one file, and
// interoperability with an independent client of Redisson's RLock protocol (a Python script).
//
// The other processes are dlock_lock_worker (lock_worker.cpp) and redisson_client.py, each a
// dlock::test::child_process (support/child_process.hpp): stdin, stdout and stderr on pipes,
// killed with SIGKILL by its destructor and reaped. Every wait is bounded.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <future>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "dlock/keys.hpp"
#include "dlock/mutex.hpp"
#include "runtime/owner.hpp"
#include "support/child_process.hpp"
#include "support/redis_server.hpp"
#include "test_util.hpp"

#ifndef DLOCK_LOCK_WORKER
#error "DLOCK_LOCK_WORKER must name the dlock_lock_worker executable"
#endif
#ifndef DLOCK_REDISSON_PY
#error "DLOCK_REDISSON_PY must name redisson_client.py"
#endif
#ifndef DLOCK_PYTHON3
#define DLOCK_PYTHON3 "/usr/bin/python3"
#endif

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

milliseconds ms_since(steady::time_point t) {
  return std::chrono::duration_cast<milliseconds>(steady::now() - t);
}

using dlock::test::child_process;

// "acquired 17" -> 17; nullopt for anything else.
std::optional<std::uint64_t> acquired_token(const std::optional<std::string>& line) {
  if (!line || line->rfind("acquired ", 0) != 0) return std::nullopt;
  return std::stoull(line->substr(9));
}

std::vector<std::string> words(const std::string& line) {
  std::istringstream s{line};
  std::vector<std::string> out;
  for (std::string w; s >> w;) out.push_back(w);
  return out;
}

child_process lock_worker(std::vector<std::string> args) {
  args.insert(args.begin(), DLOCK_LOCK_WORKER);
  return child_process{std::move(args)};
}

child_process redisson_client(std::vector<std::string> args) {
  args.insert(args.begin(), {DLOCK_PYTHON3, "-u", DLOCK_REDISSON_PY});
  return child_process{std::move(args)};
}

// -- dlock processes -----------------------------------------------------------------------------

TEST(mutex_process, kill9_of_the_holder_frees_the_lock_when_its_lease_ends_not_before) {
  dlock::test::redis_server srv;
  const auto name = dlock::test::unique_name("proc-kill9");
  const auto url = srv.url() + "?watchdog=1500ms";
  auto worker = lock_worker({"hold", url, name});
  const auto worker_token = acquired_token(worker.read_line(15s));
  ASSERT_TRUE(worker_token) << worker.diagnostics();

  dlock::client c{dlock::config::from_uri(url)};
  dlock::mutex m{c, name};
  EXPECT_FALSE(m.try_lock()) << "the worker holds it";

  const auto killed_at = steady::now();
  worker.kill9();  // SIGKILL and reap: nothing renews the lease from here on
  // Measured once the holder is dead, so no renewal can come after it: the lease cannot end
  // sooner than this after the kill.
  const auto pttl = m.remaining_lease();
  ASSERT_GT(pttl, 0ms) << "the dead holder's lease still runs";
  ASSERT_LE(pttl, 1500ms);

  ASSERT_TRUE(m.try_lock_for(5s)) << "acquired once the dead holder's lease ended";
  const auto took = ms_since(killed_at);
  constexpr auto slop = 50ms;
  EXPECT_GE(took, pttl - slop) << "acquired " << took.count() << " ms after the kill, but the "
                               << "dead holder's lease had " << pttl.count() << " ms left (slop "
                               << slop.count() << " ms)";
  EXPECT_GT(took, 0ms);
  EXPECT_LT(took, pttl + 1000ms) << "the waiter re-checks when the holder's lease ends";
  EXPECT_GT(m.fencing_token(), *worker_token);
  m.unlock();
}

TEST(mutex_process, sigstop_past_the_lease_loses_it_and_the_stale_unlock_touches_nothing) {
  dlock::test::redis_server srv;
  const auto name = dlock::test::unique_name("proc-sigstop");
  auto worker = lock_worker({"hold_then_check", srv.url() + "?watchdog=600ms", name});
  const auto worker_token = acquired_token(worker.read_line(15s));
  ASSERT_TRUE(worker_token) << worker.diagnostics();

  dlock::client c{dlock::config::from_uri(srv.url())};
  dlock::mutex m{c, name};
  worker.pause();
  const auto stopped_at = steady::now();
  ASSERT_TRUE(m.try_lock_for(5s)) << "the frozen holder's lease ends within 600 ms";
  const auto took = ms_since(stopped_at);
  EXPECT_LE(took, 600ms + 400ms) << "acquired " << took.count()
                                 << " ms after SIGSTOP; the lease is 600 ms (slop 400 ms)";
  EXPECT_GT(m.fencing_token(), *worker_token);

  const auto own_field = dlock::detail::owner_field(c.id(), dlock::detail::this_thread_number());
  const auto before = srv.command({"HGETALL", name});
  EXPECT_EQ(before, "[" + own_field + ", 1]");

  worker.resume();
  const auto lost = worker.read_line(5s);
  ASSERT_EQ(lost, std::optional<std::string>{"lost"}) << worker.diagnostics();
  const auto unlock_line = worker.read_line(5s);
  ASSERT_TRUE(unlock_line) << worker.diagnostics();
  const auto w = words(*unlock_line);
  ASSERT_GE(w.size(), 2u) << *unlock_line;
  EXPECT_EQ(w[0], "unlock");
  EXPECT_EQ(w[1], std::to_string(static_cast<int>(dlock::errc::lease_lost))) << *unlock_line;

  EXPECT_EQ(srv.command({"HGETALL", name}), before) << "the stale unlock changed the new hold";
  EXPECT_EQ(srv.command({"EXISTS", name}), ":1");
  EXPECT_EQ(worker.wait_exit(5s), std::optional<int>{0}) << worker.diagnostics();
  EXPECT_TRUE(m.is_held_by_current_thread());
  m.unlock();
  EXPECT_EQ(srv.command({"EXISTS", name}), ":0");
}

// A dlock waiter killed (SIGKILL) while queued costs the waiter behind it nothing: the unlock
// hands the lock to the dead process first (its queue record is still live), PUBLISH finds nobody
// listening on its client's waiter channel, the hand-off is undone and the next waiter is handed
// the lock — at once, not at its re-check (20 s here) nor when the dead waiter's record expires.
TEST(mutex_process, a_waiter_killed_while_queued_is_skipped_by_the_unlock) {
  dlock::test::redis_server srv;
  const auto name = dlock::test::unique_name("proc-dead-waiter");
  const auto queue = dlock::keys::waiter_queue(name);
  const auto records = dlock::keys::waiter_records(name);
  dlock::client holder{dlock::config::from_uri(srv.url())},
      patient{dlock::config::from_uri(srv.url() + "?recheck=20s")};
  dlock::mutex h{holder, name};
  h.lock();
  // recheck=20s: the dead waiter's record stays valid for 21 s after its last attempt.
  auto doomed = lock_worker({"hold", srv.url() + "?recheck=20s", name});
  const auto dlock_channel = dlock::keys::dlock_channel(name);
  ASSERT_TRUE(dlock::test::wait_until(
      [&] {
        return srv.command({"ZCARD", queue}) == ":1";
      },
      15s))
      << doomed.diagnostics();
  ASSERT_TRUE(
      dlock::test::wait_until([&] { return dlock::test::numsub(srv, dlock_channel) == 1; }, 5s));
  const auto dead_ticket = srv.command({"ZRANGE", queue, "0", "0"});
  doomed.kill9();
  // The server has seen the dead process's connections close.
  ASSERT_TRUE(
      dlock::test::wait_until([&] { return dlock::test::numsub(srv, dlock_channel) == 0; }, 5s));
  auto next = std::async(std::launch::async, [&] {
    dlock::mutex m{patient, name};
    const bool got = m.try_lock_for(30s);
    const auto at = steady::now();
    const auto token = m.fencing_token();
    if (got) m.unlock();
    return std::tuple{got, at, token};
  });
  ASSERT_TRUE(dlock::test::wait_until([&] { return srv.command({"ZCARD", queue}) == ":2"; }, 5s));
  ASSERT_TRUE(
      dlock::test::wait_until([&] { return dlock::test::numsub(srv, dlock_channel) == 1; }, 5s));
  EXPECT_EQ(srv.command({"ZRANGE", queue, "0", "0"}), dead_ticket)
      << "the dead waiter is still first in line";
  const auto first = h.fencing_token();
  h.unlock();
  const auto released = steady::now();
  ASSERT_EQ(next.wait_for(10s), std::future_status::ready);
  const auto [got, at, token] = next.get();
  EXPECT_TRUE(got);
  EXPECT_LT(at - released, 1s) << "handed the lock at once, not at its 20 s re-check";
  EXPECT_GT(token, first);
  EXPECT_EQ(srv.command({"EXISTS", queue}), ":0") << "the dead waiter left the queue";
  EXPECT_EQ(srv.command({"EXISTS", records}), ":0");
  EXPECT_EQ(srv.command({"EXISTS", name}), ":0");
}

TEST(mutex_process, eight_processes_increment_one_file_under_the_lock) {
  constexpr int processes = 8;
  constexpr int rounds = 500;
  dlock::test::redis_server srv;
  dlock::test::temp_dir dir;
  const auto name = dlock::test::unique_name("proc-rmw");
  const auto file = dir.path() + "/counter";
  std::ofstream{file} << "0 0\n";

  const auto started = steady::now();
  std::vector<std::unique_ptr<child_process>> workers;
  for (int i = 0; i < processes; ++i) {
    workers.push_back(std::make_unique<child_process>(std::vector<std::string>{
        DLOCK_LOCK_WORKER, "rmw", srv.url(), name, file, std::to_string(rounds)}));
  }
  const auto deadline = started + 110s;
  for (auto& w : workers) {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - steady::now());
    EXPECT_EQ(w->wait_exit(std::max(left, 0ms)), std::optional<int>{0}) << w->diagnostics();
  }
  std::ifstream in{file};
  std::uint64_t value = 0, last_token = 0;
  in >> value >> last_token;
  EXPECT_EQ(value, std::uint64_t{processes * rounds}) << "lost updates: exclusion broken";
  // Each worker checked that every token it saw was above the last one written; the last one
  // written is the last one issued.
  EXPECT_EQ(srv.command({"GET", dlock::keys::slot_fencing_counter_of(name)}),
            std::to_string(last_token));
  EXPECT_EQ(srv.command({"EXISTS", name}), ":0");
  std::cout << "[          ] " << processes << " x " << rounds << " critical sections in "
            << ms_since(started).count() << " ms\n";
}

// -- interoperability with an independent Redisson RLock client ----------------------------------

TEST(interop, a_dlock_waiter_is_woken_by_a_redisson_unlock_message) {
  dlock::test::redis_server srv;
  const auto name = dlock::test::unique_name("interop-py-holds");
  auto py = redisson_client({"hold", srv.url(), name});
  const auto acquired = py.read_line(20s);
  ASSERT_TRUE(acquired && acquired->rfind("acquired ", 0) == 0) << py.diagnostics();
  const auto py_owner = acquired->substr(9);
  EXPECT_EQ(srv.command({"HGETALL", name}), "[" + py_owner + ", 1]");
  const auto py_pttl = std::stoll(srv.command({"PTTL", name}).substr(1));
  EXPECT_GT(py_pttl, 20000) << "Redisson's lease is 30 s";

  // recheck=30s: without the unlock message this waiter would sleep for ~30 s (the recheck and
  // the Redisson lease alike), so a wake-up within 1 s of the release can only be the message.
  dlock::client c{dlock::config::from_uri(srv.url() + "?recheck=30s")};
  dlock::mutex m{c, name};
  EXPECT_FALSE(m.try_lock()) << "the Redisson client holds it";

  struct outcome {
    bool ok = false;
    steady::time_point at;
    std::uint64_t token = 0;
  };
  auto waiter = std::async(std::launch::async, [&] {
    outcome o;
    o.ok = m.try_lock_for(10s);
    o.at = steady::now();
    o.token = m.fencing_token();
    if (o.ok) m.unlock();
    return o;
  });
  // Subscribed means its first attempt found the lock held and it waits for the message.
  const auto channel = dlock::keys::lock_channel(name);
  EXPECT_TRUE(dlock::test::wait_until(
      [&] {
        return srv.command({"PUBSUB", "NUMSUB", channel}) == "[" + channel + ", :1]";
      },
      5s))
      << "the dlock waiter subscribed to " << channel;

  const auto released_at = steady::now();
  py.close_stdin();  // the Redisson client unlocks: DEL + PUBLISH 0
  EXPECT_EQ(py.read_line(5s), std::optional<std::string>{"released 1"}) << py.diagnostics();
  ASSERT_EQ(waiter.wait_for(5s), std::future_status::ready)
      << "the dlock waiter did not acquire within 5 s of the Redisson unlock";
  const auto o = waiter.get();
  ASSERT_TRUE(o.ok);
  EXPECT_GT(o.at, released_at) << "acquired only after the Redisson client let go";
  const auto lag = std::chrono::duration_cast<milliseconds>(o.at - released_at);
  EXPECT_LT(lag, 1000ms) << "woken by the unlock message (the lease had " << py_pttl
                         << " ms left and the recheck is 30 s)";
  EXPECT_GT(o.token, 0u);
  EXPECT_EQ(py.wait_exit(5s), std::optional<int>{0}) << py.diagnostics();
  EXPECT_EQ(srv.command({"EXISTS", name}), ":0");
}

TEST(interop, a_redisson_waiter_is_woken_by_a_dlock_unlock_message) {
  dlock::test::redis_server srv;
  const auto name = dlock::test::unique_name("interop-dlock-holds");
  dlock::client c{dlock::config::from_uri(srv.url())};  // watchdog lease: 30 s
  dlock::mutex m{c, name};
  m.lock();

  auto py = redisson_client({"acquire_wait", srv.url(), name});
  const auto waiting = py.read_line(20s);  // printed once subscribed and refused
  ASSERT_TRUE(waiting && waiting->rfind("waiting ", 0) == 0) << py.diagnostics();
  const auto pttl = std::stoll(waiting->substr(8));
  EXPECT_GT(pttl, 20000) << "the Redisson client saw dlock's 30 s watchdog lease";

  const auto released_at = steady::now();
  m.unlock();
  const auto acquired = py.read_line(5s);
  const auto lag = ms_since(released_at);
  ASSERT_TRUE(acquired) << py.diagnostics();
  const auto w = words(*acquired);
  ASSERT_EQ(w.size(), 3u) << *acquired;
  EXPECT_EQ(w[0], "acquired");
  EXPECT_LT(lag, 1000ms) << "woken by dlock's unlock message (its lease had " << pttl
                         << " ms left)";
  EXPECT_EQ(py.read_line(5s), std::optional<std::string>{"released 1"}) << py.diagnostics();
  EXPECT_EQ(py.wait_exit(5s), std::optional<int>{0}) << py.diagnostics();
  EXPECT_EQ(srv.command({"EXISTS", name}), ":0");
}

}  // namespace
