// dlock::fair_mutex and dlock::shared_mutex with processes of Redisson's RFairLock and
// RReadWriteLock protocols (redisson_client.py --kind fair|read|write, no dlock code) on one
// name, against a real redis-server: mixed fleets exclude each other (merged hold logs), each
// side's unlock wakes the other side's waiter, and fair waiters of both sides are served in
// queue order.
//
// Redisson's waiter wakes only on a message (`0`/`1`) or when the TTL it was given runs out, and
// the dlock waiters here re-check every 20-30 s: the holders' leases are 20-30 s, so a wake-up
// within slack_ms (1 s, 2 s under the sanitizers) of an unlock can only be the unlock's message.
//
// Redisson keeps fair-queue deadlines as a chain on client clocks: a newcomer's deadline is the
// tail's plus its wait (fairLockWaitTimeout, 5 min by default; --fair-wait-ms here), and each
// Redisson acquisition subtracts its wait from every deadline. A dlock waiter behind a Redisson
// one chains on it the same way (fair_acquire.lua), so neither side's entries are pushed into the
// past: with Redisson's default wait, every process progresses and waiters of both sides are
// woken in queue order (fair_a_mixed_fleet_with_redissons_default_wait_progresses,
// fair_with_redissons_default_wait_each_side_wakes_the_next_in_order).
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dlock/client.hpp"
#include "dlock/fair_mutex.hpp"
#include "dlock/keys.hpp"
#include "dlock/shared_mutex.hpp"
#include "family_fleet.hpp"
#include "support/child_process.hpp"
#include "support/redis_server.hpp"
#include "test_util.hpp"

// Nested in family_fleet so that its names are found before any other file's (unity builds).
namespace dlock::test::family_fleet::interop {

long long queue_length(const redis_server& srv, const std::string& name) {
  return std::stoll(srv.command({"LLEN", dlock::keys::fair_queue(name)}).substr(1));
}

// "acquired <ms waited> <owner> <stamp ns>" (redisson_client.py --stamp acquire_wait) -> stamp.
std::optional<std::int64_t> redisson_stamp(const std::optional<std::string>& line) {
  if (!line) return std::nullopt;
  const auto w = split_words(*line);
  if (w.size() != 4 || w[0] != "acquired") return std::nullopt;
  return std::stoll(w[3]);
}

// A dlock wait on its own thread: whether it acquired and when (CLOCK_MONOTONIC ns).
struct waited {
  bool ok = false;
  std::int64_t at = 0;
};

template <class F>
std::future<waited> wait_on_thread(F try_lock) {
  return std::async(std::launch::async, [try_lock]() mutable {
    waited w;
    w.ok = try_lock();
    w.at = mono_ns();
    return w;
  });
}

// -- mixed fleets ---------------------------------------------------------------------------------

// 3 dlock and 3 Redisson fair processes loop for 3 s (hold 2 ms, no pause). Redisson's wait is
// 100 ms, so the dlock deadlines (server time + 500 ms re-check + 2 s) stay valid while a few
// Redisson acquisitions subtract it.
TEST(family_interop, fair_a_mixed_fleet_excludes_and_both_sides_progress) {
  redis_server srv;
  const auto name = unique_name("fam-iop-fair");
  fleet f{srv.url(), name};
  for (int i = 0; i < 3; ++i) f.add(false, "fair", 2, 0, "?recheck=500ms");
  for (int i = 0; i < 3; ++i) f.add(true, "fair", 2, 0, "", {"--fair-wait-ms", "100"});
  f.run(3);
  if (HasFatalFailure()) return;
  f.report("3 dlock + 3 Redisson fair processes, hold 2 ms, no pause, 3 s");
  EXPECT_EQ(count_overlaps(f).exclusive, 0u) << "holds that overlapped";
  for (const auto& m : f.members) {
    EXPECT_GT(m.count(), 0) << m.label << " made no progress";
    if (m.redisson) {
      EXPECT_EQ(m.stats.at("bad_messages"), 0) << m.label;
    }
  }
  EXPECT_EQ(srv.command({"EXISTS", name}), ":0");
}

// The same with Redisson's default wait (5 min): dlock's entries chain on Redisson's, so no
// entry is pushed into the past, and every process of either side gets turns.
TEST(family_interop, fair_a_mixed_fleet_with_redissons_default_wait_progresses) {
  redis_server srv;
  const auto name = unique_name("fam-iop-fair-default");
  fleet f{srv.url(), name};
  for (int i = 0; i < 3; ++i) f.add(false, "fair", 2, 0, "?recheck=500ms");
  for (int i = 0; i < 3; ++i) f.add(true, "fair", 2, 0);
  f.run(3);
  if (HasFatalFailure()) return;
  f.report("3 dlock + 3 Redisson fair processes (Redisson's wait 5 min), 3 s");
  EXPECT_EQ(count_overlaps(f).exclusive, 0u) << "holds that overlapped";
  for (const auto& m : f.members) EXPECT_GT(m.count(), 10) << m.label << " starved";
}

// 2 dlock readers and a dlock writer, 2 Redisson readers and a Redisson writer, 3 s: readers of
// both implementations hold the lock together, writers overlap nothing.
TEST(family_interop, rw_a_mixed_fleet_shares_reads_and_excludes_writes) {
  redis_server srv;
  const auto name = unique_name("fam-iop-rw");
  fleet f{srv.url(), name};
  for (const bool py : {false, true}) {
    f.add(py, "read", 10, 5);
    f.add(py, "read", 10, 5);
    f.add(py, "write", 3, 30);
  }
  f.run(3);
  if (HasFatalFailure()) return;
  f.report("2+2 readers (hold 10 ms, pause 5 ms), 1+1 writers (hold 3 ms, pause 30 ms), 3 s");
  const auto o = count_overlaps(f);
  std::cout << "[          ] overlapping reader pairs " << o.readers << ", of them dlock with "
            << "Redisson " << o.cross << "\n";
  EXPECT_EQ(o.exclusive, 0u) << "a write hold overlapped another hold";
  EXPECT_GT(o.cross, 0u) << "dlock and Redisson readers held the lock together";
  for (const auto& m : f.members) {
    EXPECT_GT(m.count(), 0) << m.label << " made no progress";
    if (m.redisson) {
      EXPECT_EQ(m.stats.at("bad_messages"), 0) << m.label;
    }
  }
  EXPECT_EQ(srv.command({"EXISTS", name}), ":0");
}

// -- wake-ups -------------------------------------------------------------------------------------

TEST(family_interop, fair_each_sides_unlock_wakes_the_other_sides_waiter) {
  redis_server srv;
  {
    SCOPED_TRACE("a dlock unlock wakes a Redisson waiter");
    const auto name = unique_name("fam-iop-fair-wake1");
    dlock::client c{dlock::config::from_uri(srv.url())};  // 30 s watchdog lease
    dlock::fair_mutex m{c, name};
    m.lock();
    auto py = redisson("fair", {"--stamp", "acquire_wait", srv.url(), name});
    const auto waiting = py->read_line(20s);  // queued and subscribed to its own channel
    ASSERT_TRUE(waiting && waiting->rfind("waiting ", 0) == 0) << py->diagnostics();
    EXPECT_GT(std::stoll(waiting->substr(8)), 20000) << "its TTL: dlock's lease";
    const auto unlocked = mono_ns();
    m.unlock();
    const auto at = redisson_stamp(py->read_line(5s));
    ASSERT_TRUE(at) << py->diagnostics();
    std::cout << "[          ] the Redisson waiter had it " << ms_between(unlocked, *at)
              << " ms after the dlock unlock\n";
    EXPECT_LT(ms_between(unlocked, *at), slack_ms) << "woken by `0` on its channel";
    EXPECT_EQ(py->read_line(5s), std::optional<std::string>{"released 1"});
    EXPECT_EQ(py->wait_exit(5s), std::optional<int>{0}) << py->diagnostics();
    EXPECT_EQ(queue_length(srv, name), 0);
  }
  {
    SCOPED_TRACE("a Redisson unlock wakes a dlock waiter");
    const auto name = unique_name("fam-iop-fair-wake2");
    auto py = redisson("fair", {"--lease-ms", "20000", "hold", srv.url(), name});
    const auto acquired = py->read_line(20s);
    ASSERT_TRUE(acquired && acquired->rfind("acquired ", 0) == 0) << py->diagnostics();
    dlock::client c{dlock::config::from_uri(srv.url() + "?recheck=30s")};
    dlock::fair_mutex m{c, name};
    auto w = wait_on_thread([&] {
      const bool ok = m.try_lock_for(10s);
      if (ok) m.unlock();
      return ok;
    });
    ASSERT_TRUE(wait_until([&] { return queue_length(srv, name) == 1; }, 5s));
    const auto owner = srv.command({"LINDEX", dlock::keys::fair_queue(name), "0"});
    ASSERT_TRUE(wait_until(
        [&] { return numsub(srv, dlock::keys::fair_waiter_channel(name, owner)) == 1; }, 5s))
        << "the dlock waiter listens on its own channel";
    const auto released = mono_ns();
    py->close_stdin();
    EXPECT_EQ(py->read_line(5s), std::optional<std::string>{"released 1"}) << py->diagnostics();
    ASSERT_EQ(w.wait_for(5s), std::future_status::ready);
    const auto r = w.get();
    ASSERT_TRUE(r.ok);
    std::cout << "[          ] the dlock waiter had it " << ms_between(released, r.at)
              << " ms after the Redisson unlock\n";
    EXPECT_LT(ms_between(released, r.at), slack_ms) << "woken by `0` (lease 20 s, re-check 30 s)";
    EXPECT_EQ(py->wait_exit(5s), std::optional<int>{0}) << py->diagnostics();
  }
}

// The four pairs: dlock write -> Redisson read, dlock read -> Redisson write, Redisson write ->
// dlock read, Redisson read -> dlock write.
TEST(family_interop, rw_each_sides_unlock_wakes_the_other_sides_waiter) {
  redis_server srv;
  for (const bool dlock_writes : {true, false}) {
    SCOPED_TRACE(dlock_writes ? "dlock writer, Redisson reader waits"
                              : "dlock reader, Redisson writer waits");
    const auto name = unique_name("fam-iop-rw-wake");
    dlock::client c{dlock::config::from_uri(srv.url())};
    dlock::shared_mutex rw{c, name};
    dlock_writes ? rw.lock() : rw.lock_shared();
    auto py =
        redisson(dlock_writes ? "read" : "write", {"--stamp", "acquire_wait", srv.url(), name});
    const auto waiting = py->read_line(20s);
    ASSERT_TRUE(waiting && waiting->rfind("waiting ", 0) == 0) << py->diagnostics();
    const auto unlocked = mono_ns();
    dlock_writes ? rw.unlock() : rw.unlock_shared();
    const auto at = redisson_stamp(py->read_line(5s));
    ASSERT_TRUE(at) << py->diagnostics();
    std::cout << "[          ] "
              << (dlock_writes ? "write -> Redisson reader: "
                               : "read -> "
                                 "Redisson writer: ")
              << ms_between(unlocked, *at) << " ms\n";
    EXPECT_LT(ms_between(unlocked, *at), slack_ms) << "woken by dlock's message (lease 30 s)";
    EXPECT_EQ(py->read_line(5s), std::optional<std::string>{"released 1"});
    EXPECT_EQ(py->wait_exit(5s), std::optional<int>{0}) << py->diagnostics();
  }
  for (const bool redisson_writes : {true, false}) {
    SCOPED_TRACE(redisson_writes ? "Redisson writer, dlock reader waits"
                                 : "Redisson reader, dlock writer waits");
    const auto name = unique_name("fam-iop-rw-wake");
    auto py = redisson(redisson_writes ? "write" : "read",
                       {"--lease-ms", "20000", "hold", srv.url(), name});
    const auto acquired = py->read_line(20s);
    ASSERT_TRUE(acquired && acquired->rfind("acquired ", 0) == 0) << py->diagnostics();
    dlock::client c{dlock::config::from_uri(srv.url() + "?recheck=30s")};
    dlock::shared_mutex rw{c, name};
    auto w = wait_on_thread([&] {
      if (redisson_writes) {
        const bool ok = rw.try_lock_shared_for(10s);
        if (ok) rw.unlock_shared();
        return ok;
      }
      const bool ok = rw.try_lock_for(10s);
      if (ok) rw.unlock();
      return ok;
    });
    ASSERT_TRUE(wait_until([&] { return numsub(srv, dlock::keys::rwlock_channel(name)) == 1; }, 5s))
        << "the dlock waiter subscribed";
    const auto released = mono_ns();
    py->close_stdin();
    EXPECT_EQ(py->read_line(5s), std::optional<std::string>{"released 1"}) << py->diagnostics();
    ASSERT_EQ(w.wait_for(5s), std::future_status::ready);
    const auto r = w.get();
    ASSERT_TRUE(r.ok);
    std::cout << "[          ] Redisson "
              << (redisson_writes ? "write -> dlock reader: " : "read -> dlock writer: ")
              << ms_between(released, r.at) << " ms\n";
    EXPECT_LT(ms_between(released, r.at), slack_ms) << "woken by Redisson's message (lease 20 s)";
    EXPECT_EQ(py->wait_exit(5s), std::optional<int>{0}) << py->diagnostics();
    EXPECT_EQ(srv.command({"EXISTS", name}), ":0");
  }
}

// -- fair queue order across implementations ------------------------------------------------------

// A holder, then a Redisson waiter, then a dlock waiter (or the other way round): the one that
// queued first gets the lock first, and the second is woken by the first's unlock. A waiter
// served out of turn would keep the lock (the dlock worker holds until told), so the other one's
// bounded wait would fail. Redisson's wait is 2 s and the dlock waiter's re-check 20 s: its
// deadline (22 s) outlives the subtraction.
TEST(family_interop, fair_waiters_of_both_sides_are_served_in_queue_order) {
  redis_server srv;
  for (const bool redisson_first : {true, false}) {
    SCOPED_TRACE(redisson_first ? "Redisson queued first" : "dlock queued first");
    const auto name = unique_name("fam-iop-fair-order");
    dlock::client c{dlock::config::from_uri(srv.url())};
    dlock::fair_mutex holder{c, name};
    holder.lock();
    std::unique_ptr<child_process> py, worker;
    const auto queue_py = [&] {
      py = redisson("fair", {"--fair-wait-ms", "2000", "--stamp", "acquire_wait", srv.url(), name});
      const auto waiting = py->read_line(20s);
      ASSERT_TRUE(waiting && waiting->rfind("waiting ", 0) == 0) << py->diagnostics();
    };
    const auto queue_dlock = [&] {
      worker = dlock_worker("fair", {"hold", srv.url() + "?recheck=20s", name});
    };
    if (redisson_first) {
      queue_py();
      if (HasFatalFailure()) return;
      ASSERT_EQ(queue_length(srv, name), 1);
      queue_dlock();
    } else {
      queue_dlock();
      ASSERT_TRUE(wait_until([&] { return queue_length(srv, name) == 1; }, 15s))
          << worker->diagnostics();
      queue_py();
      if (HasFatalFailure()) return;
    }
    ASSERT_TRUE(wait_until([&] { return queue_length(srv, name) == 2; }, 15s))
        << worker->diagnostics();
    holder.unlock();
    if (redisson_first) {
      const auto at = redisson_stamp(py->read_line(5s));
      ASSERT_TRUE(at) << "the Redisson waiter is first: " << py->diagnostics();
      EXPECT_EQ(py->read_line(5s), std::optional<std::string>{"released 1"});
      ASSERT_TRUE(worker_token(worker->read_line(5s))) << worker->diagnostics();
      const auto lag = ms_between(*at, mono_ns());
      std::cout << "[          ] the dlock waiter had it " << lag
                << " ms after the Redisson waiter took it\n";
      EXPECT_LT(lag, slack_ms) << "woken by the Redisson unlock's `0` (re-check 20 s)";
      worker->close_stdin();
    } else {
      ASSERT_TRUE(worker_token(worker->read_line(5s)))
          << "the dlock waiter is first: " << worker->diagnostics();
      EXPECT_EQ(py->read_line(200ms), std::nullopt) << "the Redisson waiter waits its turn";
      const auto released = mono_ns();
      worker->close_stdin();
      const auto at = redisson_stamp(py->read_line(5s));
      ASSERT_TRUE(at) << py->diagnostics();
      std::cout << "[          ] the Redisson waiter had it " << ms_between(released, *at)
                << " ms after the dlock waiter let go\n";
      EXPECT_LT(ms_between(released, *at), slack_ms) << "woken by the dlock unlock's `0`";
      EXPECT_EQ(py->read_line(5s), std::optional<std::string>{"released 1"});
    }
    EXPECT_EQ(worker->wait_exit(5s), std::optional<int>{0}) << worker->diagnostics();
    EXPECT_EQ(py->wait_exit(5s), std::optional<int>{0}) << py->diagnostics();
    EXPECT_EQ(queue_length(srv, name), 0);
    EXPECT_EQ(srv.command({"EXISTS", name}), ":0");
  }
}

// With Redisson's default wait (5 min), a queue of Redisson, Redisson, dlock, Redisson waiters
// behind a dlock holder: each is served at the previous one's unlock, in queue order. Before
// dlock's entries chained on Redisson's, the two Redisson acquisitions pushed the dlock entry and
// the Redisson one chained on it into the past; Redisson's purge dropped both unwoken, and the
// last waited out its whole TTL.
TEST(family_interop, fair_with_redissons_default_wait_each_side_wakes_the_next_in_order) {
  redis_server srv;
  const auto name = unique_name("fam-iop-fair-chain");
  dlock::client c{dlock::config::from_uri(srv.url())};
  dlock::fair_mutex holder{c, name};
  holder.lock();
  // Redisson, Redisson, dlock (its re-check 20 s: only a message wakes it in time), Redisson.
  std::vector<std::unique_ptr<child_process>> py;
  std::unique_ptr<child_process> worker;
  for (int i = 0; i < 4; ++i) {
    if (i == 2) {
      worker = dlock_worker("fair", {"hold", srv.url() + "?recheck=20s", name});
    } else {
      py.push_back(redisson("fair", {"--stamp", "acquire_wait", srv.url(), name}));
      const auto waiting = py.back()->read_line(20s);
      ASSERT_TRUE(waiting && waiting->rfind("waiting ", 0) == 0) << py.back()->diagnostics();
    }
    ASSERT_TRUE(wait_until([&] { return queue_length(srv, name) == i + 1; }, 15s));
  }
  const auto released = mono_ns();
  holder.unlock();
  // Each acquire_wait unlocks as soon as it has the lock; the worker holds until told.
  for (int i = 0; i < 2; ++i) {
    const auto at = redisson_stamp(py[static_cast<std::size_t>(i)]->read_line(5s));
    ASSERT_TRUE(at) << py[static_cast<std::size_t>(i)]->diagnostics();
    EXPECT_LT(ms_between(released, *at), slack_ms) << "Redisson waiter " << i;
  }
  ASSERT_TRUE(worker_token(worker->read_line(5s))) << worker->diagnostics();
  const auto dlock_at = mono_ns();
  EXPECT_LT(ms_between(released, dlock_at), slack_ms) << "the dlock waiter, by a message";
  worker->close_stdin();
  const auto last = redisson_stamp(py[2]->read_line(5s));
  ASSERT_TRUE(last) << py[2]->diagnostics();
  EXPECT_GT(*last, dlock_at) << "in queue order";
  EXPECT_LT(ms_between(dlock_at, *last), slack_ms) << "woken by the dlock unlock, not its TTL";
  for (auto& p : py) EXPECT_EQ(p->wait_exit(5s), std::optional<int>{0}) << p->diagnostics();
  EXPECT_EQ(worker->wait_exit(5s), std::optional<int>{0}) << worker->diagnostics();
}

}  // namespace dlock::test::family_fleet::interop
