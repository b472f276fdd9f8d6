// dlock::fair_mutex and dlock::shared_mutex across processes (dlock_lock_worker --kind
// fair|read|write) against a real redis-server: strict FIFO among 8 processes, readers in
// parallel and writers exclusive, a writer not starved by back-to-back readers, SIGKILL of a fair
// holder, of a queued fair waiter and of one reader among several, and lease_lost on each kind.
// Mixed fleets with Redisson-protocol processes: family_interop_test.cpp.
//
// Exclusion is checked from the holds the processes log (family_fleet.hpp). FIFO is checked
// against the queue itself: a sampler reads redisson_lock_queue:{name} and the lock hash's holder
// in one script every few ms while 8 processes loop; whoever is in the queue at a snapshot must
// be served next, in the queue's order, before anyone who was not (each worker prints its owner
// field, which is its queue entry). Every wait is bounded.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "dlock/client.hpp"
#include "dlock/fair_mutex.hpp"
#include "dlock/keys.hpp"
#include "family_fleet.hpp"
#include "support/child_process.hpp"
#include "support/redis_server.hpp"
#include "test_util.hpp"

// Nested in family_fleet so that its names are found before any other file's (unity builds).
namespace dlock::test::family_fleet::process {

long long llen(const redis_server& srv, const std::string& key) {
  return std::stoll(srv.command({"LLEN", key}).substr(1));
}

long long pttl(const redis_server& srv, const std::string& key) {
  return std::stoll(srv.command({"PTTL", key}).substr(1));
}

// How many keys match `pattern` (the fixture renders KEYS' reply as "[a, b]").
long key_count(const redis_server& srv, const std::string& pattern) {
  const auto text = srv.command({"KEYS", pattern});
  if (text == "[]") return 0;
  return static_cast<long>(std::count(text.begin(), text.end(), ',')) + 1;
}

// -- FIFO -----------------------------------------------------------------------------------------

// 8 processes queue one by one behind a holder (each starts once the one before is in the list),
// then get the lock in that order: each holds until the test lets it go, so a process served out
// of turn would keep the one whose turn it was waiting past its bound.
TEST(family_process, fair_eight_processes_get_the_lock_in_the_order_they_queued) {
  redis_server srv;
  const auto name = unique_name("fam-fifo");
  const auto queue = dlock::keys::fair_queue(name);
  dlock::client c{dlock::config::from_uri(srv.url())};
  dlock::fair_mutex holder{c, name};
  holder.lock();
  std::vector<std::unique_ptr<child_process>> workers;
  for (int i = 0; i < 8; ++i) {
    workers.push_back(dlock_worker("fair", {"hold", srv.url(), name}));
    ASSERT_TRUE(wait_until([&] { return llen(srv, queue) == i + 1; }, 15s))
        << "worker " << i << " queued: " << workers.back()->diagnostics();
  }
  auto last = holder.fencing_token();
  holder.unlock();
  long long slowest = 0;
  for (std::size_t i = 0; i < workers.size(); ++i) {
    const auto asked = steady::now();
    const auto token = worker_token(workers[i]->read_line(5s));
    ASSERT_TRUE(token) << "worker " << i << " is next: " << workers[i]->diagnostics();
    slowest = std::max<long long>(slowest, dlock::test::since(asked).count());
    EXPECT_GT(*token, last) << "worker " << i;
    last = *token;
    EXPECT_EQ(llen(srv, queue), static_cast<long long>(workers.size() - i - 1));
    workers[i]->close_stdin();
    EXPECT_EQ(workers[i]->read_line(5s), std::optional<std::string>{"released"})
        << workers[i]->diagnostics();
    EXPECT_EQ(workers[i]->wait_exit(5s), std::optional<int>{0}) << workers[i]->diagnostics();
  }
  std::cout << "[          ] 8 queued processes served in order; slowest hand-over " << slowest
            << " ms\n";
  EXPECT_LT(slowest, slack_ms) << "each was woken by its own message, not its 3 s re-check";
  EXPECT_EQ(srv.command({"EXISTS", name}), ":0");
  EXPECT_EQ(srv.command({"EXISTS", queue}), ":0");
}

// 8 processes loop on one name for 3 s (hold 3 ms, 10 under the sanitizers; no pause: each
// queues again at once).
TEST(family_process, fair_eight_looping_processes_never_overtake_the_queue) {
  constexpr int processes = 8;
#ifdef DLOCK_TEST_SANITIZED
  constexpr long hold_ms = 10;  // the instrumented sampler's looks take a few ms
#else
  constexpr long hold_ms = 3;
#endif
  constexpr double seconds = 3;
  redis_server srv;
  const auto name = unique_name("fam-fifo-loop");
  const auto queue = dlock::keys::fair_queue(name);
  fleet f{srv.url(), name};
  for (int i = 0; i < processes; ++i) f.add(false, "fair", hold_ms, 0);

  queue_sampler sampler{srv.url(), name};
  f.run(seconds, true);
  const auto looks = sampler.stop();
  if (HasFatalFailure()) return;
  f.report("8 fair processes, hold " + std::to_string(hold_ms) + " ms, no pause, 3 s");
  EXPECT_EQ(count_overlaps(f).exclusive, 0u) << "holds that overlapped";
  // Looks made at least 1 s before the end (every queued process is served by then: nobody
  // gives up), answered within a hold's time (no whole hold fits between `sent` and the script).
  const auto end_ns = f.started_ns + static_cast<std::int64_t>(seconds * 1e9);
  const auto r = check_fifo(f, looks, f.started_ns, end_ns - 1'000'000'000, hold_ms * 1'000'000);
  std::cout << "[          ] " << r.checked << " looks at the queue (longest " << r.longest
            << " waiting), " << r.served << " queued acquisitions served in queue order, "
            << r.violations << " out of order\n";
  EXPECT_GT(r.checked, 20u) << "the sampler saw the queue";
  EXPECT_EQ(r.violations, 0u);
  const double share = static_cast<double>(f.total()) / processes;
  for (const auto& m : f.members) {
    EXPECT_GE(static_cast<double>(m.count()), 0.5 * share)
        << m.label << ": strict FIFO among processes that always queue again is round-robin";
  }
  EXPECT_EQ(srv.command({"EXISTS", queue}), ":0");
}

// -- read-write -----------------------------------------------------------------------------------

// 4 reader and 2 writer processes loop for 3 s: readers share, writers overlap nothing.
TEST(family_process, shared_readers_overlap_and_writers_exclude_across_processes) {
  redis_server srv;
  const auto name = unique_name("fam-rw");
  fleet f{srv.url(), name};
  for (int i = 0; i < 4; ++i) f.add(false, "read", 20, 0);
  for (int i = 0; i < 2; ++i) f.add(false, "write", 5, 50);
  f.run(3);
  if (HasFatalFailure()) return;
  f.report("4 readers (hold 20 ms) + 2 writers (hold 5 ms, pause 50 ms), 3 s");
  const auto o = count_overlaps(f);
  std::cout << "[          ] overlapping reader pairs: " << o.readers << "\n";
  EXPECT_EQ(o.exclusive, 0u) << "a write hold overlapped another hold";
  EXPECT_GT(o.readers, 0u) << "readers held the lock together";
  for (const auto& m : f.members) EXPECT_GT(m.count(), 0) << m.label << " made no progress";
  EXPECT_EQ(srv.command({"EXISTS", name}), ":0");
  EXPECT_EQ(srv.command({"EXISTS", dlock::keys::waiting_writers(name)}), ":0");
}

// Readers loop back to back (no pause) with holds of 150-210 ms that overlap, so the lock never
// frees by itself. A writer that asks is still served within the longest read hold: once it
// waits, readers that let go queue behind it ({name}:dlock_writers), the holds in progress end
// and the last read unlock's `0` wakes it. Bound: 210 ms + slack_ms for a loaded machine (its
// re-check is 3 s; without writer preference its wait would last the whole run).
TEST(family_process, shared_a_writer_is_served_between_back_to_back_readers) {
  constexpr long longest_read_ms = 210;
  redis_server srv;
  const auto name = unique_name("fam-rw-starve");
  fleet f{srv.url(), name};
  for (long hold : {150L, 170L, 190L, longest_read_ms}) f.add(false, "read", hold, 0);
  f.add(false, "write", 20, 300);
  f.run(4);
  if (HasFatalFailure()) return;
  f.report("4 back-to-back readers (150-210 ms) + 1 writer (hold 20 ms, pause 300 ms), 4 s");
  const auto o = count_overlaps(f);
  EXPECT_EQ(o.exclusive, 0u);
  EXPECT_GT(o.readers, 0u);
  // How long the lock was free between holds, outside the hand-overs to the writer.
  std::int64_t covered_until = 0, longest_free = 0;
  for (const auto& h : f.holds) {
    if (covered_until != 0 && h.start > covered_until && !f.members[h.who].writes()) {
      longest_free = std::max(longest_free, h.start - covered_until);
    }
    covered_until = std::max(covered_until, h.end);
  }
  const auto& writer = f.members.back();
  std::cout << "[          ] the writer's longest lock(): " << writer.stats.at("max_lock_ms")
            << " ms; longest free gap before a read hold: " << longest_free / 1000 << " us\n";
  EXPECT_GE(writer.count(), 3) << "the writer got in between the readers";
  EXPECT_LE(writer.stats.at("max_lock_ms"), longest_read_ms + slack_ms);
  EXPECT_EQ(srv.command({"EXISTS", name}), ":0");
}

// -- SIGKILL --------------------------------------------------------------------------------------

// The holder dies: the queue's head gets the lock when the dead holder's lease (2 s watchdog)
// ends, within its re-check (500 ms) after; the waiter behind it is next.
TEST(family_process, fair_kill9_of_the_holder_serves_the_queue_head_at_its_lease_end) {
  redis_server srv;
  const auto name = unique_name("fam-kill-holder");
  const auto queue = dlock::keys::fair_queue(name);
  auto holder = dlock_worker("fair", {"hold", srv.url() + "?watchdog=2s", name});
  const auto first = worker_token(holder->read_line(15s));
  ASSERT_TRUE(first) << holder->diagnostics();
  auto head = dlock_worker("fair", {"hold", srv.url() + "?recheck=500ms", name});
  ASSERT_TRUE(wait_until([&] { return llen(srv, queue) == 1; }, 15s)) << head->diagnostics();
  auto next = dlock_worker("fair", {"hold", srv.url() + "?recheck=500ms", name});
  ASSERT_TRUE(wait_until([&] { return llen(srv, queue) == 2; }, 15s)) << next->diagnostics();

  const auto killed_at = steady::now();
  holder->kill9();
  const auto left = pttl(srv, name);  // nothing renews it from here on
  ASSERT_GT(left, 0);
  ASSERT_LE(left, 2000);
  const auto token = worker_token(head->read_line(10s));
  const auto took = dlock::test::since(killed_at).count();
  ASSERT_TRUE(token) << head->diagnostics();
  std::cout << "[          ] lease left at the kill " << left << " ms; the head had the lock "
            << took << " ms after it\n";
  EXPECT_GE(took, left - 50) << "not before the dead holder's lease ended";
  EXPECT_LE(took, left + 500 + slack_ms) << "within its 500 ms re-check after";
  EXPECT_GT(*token, *first);
  EXPECT_EQ(next->read_line(0ms), std::nullopt) << "the second waiter waits for the head";
  const auto released_at = steady::now();
  head->close_stdin();
  const auto second = worker_token(next->read_line(5s));
  ASSERT_TRUE(second) << next->diagnostics();
  EXPECT_LT(dlock::test::since(released_at).count(), slack_ms) << "woken by the head's unlock";
  EXPECT_GT(*second, *token);
  next->close_stdin();
  EXPECT_EQ(next->wait_exit(5s), std::optional<int>{0}) << next->diagnostics();
  EXPECT_EQ(srv.command({"EXISTS", queue}), ":0");
}

// A queued waiter dies. Its entry stays valid for wait_recheck + fair_mutex::purge_bound after
// its last attempt, so the waiters behind it stall that long at most (500 ms + 2 s here), then
// purge it and go on in order.
TEST(family_process, fair_kill9_of_a_queued_waiter_stalls_the_rest_at_most_recheck_plus_purge) {
  constexpr long long recheck_ms = 500;
  const long long bound_ms = recheck_ms + dlock::fair_mutex::purge_bound.count();
  redis_server srv;
  const auto name = unique_name("fam-kill-waiter");
  const auto queue = dlock::keys::fair_queue(name);
  const auto url = srv.url() + "?recheck=500ms";
  dlock::client c{dlock::config::from_uri(url)};
  dlock::fair_mutex holder{c, name};
  holder.lock();
  std::vector<std::unique_ptr<child_process>> waiters;
  for (int i = 0; i < 3; ++i) {
    waiters.push_back(dlock_worker("fair", {"hold", url, name}));
    ASSERT_TRUE(wait_until([&] { return llen(srv, queue) == i + 1; }, 15s))
        << waiters.back()->diagnostics();
  }
  const auto dead = srv.command({"LINDEX", queue, "0"});
  const auto killed_at = steady::now();
  waiters[0]->kill9();
  holder.unlock();  // tells the dead head
  const auto token = worker_token(waiters[1]->read_line(std::chrono::milliseconds{bound_ms} + 5s));
  const auto stalled = dlock::test::since(killed_at).count();
  ASSERT_TRUE(token) << waiters[1]->diagnostics();
  std::cout << "[          ] the waiter behind the dead one had the lock " << stalled
            << " ms after the kill (bound " << bound_ms << " ms)\n";
  EXPECT_LE(stalled, bound_ms + slack_ms) << "recheck + purge_bound";
  EXPECT_EQ(srv.command({"ZSCORE", dlock::keys::fair_timeouts(name), dead}), "$-1")
      << "the dead waiter was purged";
  EXPECT_EQ(waiters[2]->read_line(0ms), std::nullopt);
  const auto released_at = steady::now();
  waiters[1]->close_stdin();
  ASSERT_TRUE(worker_token(waiters[2]->read_line(5s))) << waiters[2]->diagnostics();
  EXPECT_LT(dlock::test::since(released_at).count(), slack_ms)
      << "the last one is not stalled again";
  waiters[2]->close_stdin();
  EXPECT_EQ(waiters[2]->wait_exit(5s), std::optional<int>{0}) << waiters[2]->diagnostics();
  EXPECT_EQ(srv.command({"EXISTS", queue}), ":0");
}

// Three readers (2 s watchdog) and a waiting writer; one reader dies.
// - The live readers hold on past two of their own leases: they keep renewing their holds, not
//   the dead one's, whose hold key expires with its lease; the writer still waits.
// - They leave: the last read unlock finds no live hold, deletes the hash and sends `0`, and the
//   writer has the lock at once (within its 500 ms re-check).
TEST(family_process, shared_kill9_of_one_reader_expires_with_its_lease_only) {
  redis_server srv;
  const auto name = unique_name("fam-kill-reader");
  const auto url = srv.url() + "?watchdog=2s&recheck=500ms";
  std::vector<std::unique_ptr<child_process>> readers;
  for (int i = 0; i < 3; ++i) {
    readers.push_back(dlock_worker("read", {"hold", url, name}));
    ASSERT_TRUE(worker_token(readers.back()->read_line(15s))) << readers.back()->diagnostics();
  }
  const auto live_since = steady::now();
  auto writer = dlock_worker("write", {"hold", url, name});
  ASSERT_TRUE(wait_until(
      [&] {
        return srv.command({"ZCARD", dlock::keys::waiting_writers(name)}) == ":1";
      },
      15s))
      << writer->diagnostics();
  const auto pattern = "{" + name + "}:*:rwlock_timeout:*";
  ASSERT_EQ(key_count(srv, pattern), 3) << srv.command({"KEYS", pattern});

  const auto killed_at = steady::now();
  readers[0]->kill9();
  ASSERT_TRUE(wait_until([&] { return key_count(srv, pattern) == 2; }, 4s))
      << "the dead reader's hold key expired with its lease: " << srv.command({"KEYS", pattern});
  const auto expired_after = dlock::test::since(killed_at).count();
  std::this_thread::sleep_for(std::max(0ms, 4500ms - dlock::test::since(live_since)));
  // 4.5 s after they took them: their 2 s holds were renewed.
  EXPECT_EQ(key_count(srv, pattern), 2) << srv.command({"KEYS", pattern});
  EXPECT_EQ(srv.command({"HGET", name, "mode"}), "read");
  EXPECT_EQ(writer->read_line(0ms), std::nullopt) << "the writer waits for the live readers";

  readers[1]->close_stdin();
  readers[2]->close_stdin();
  EXPECT_EQ(readers[1]->read_line(5s), std::optional<std::string>{"released"});
  EXPECT_EQ(readers[2]->read_line(5s), std::optional<std::string>{"released"});
  const auto left_at = steady::now();
  ASSERT_TRUE(worker_token(writer->read_line(5s))) << writer->diagnostics();
  const auto took = dlock::test::since(left_at).count();
  std::cout << "[          ] the dead reader's hold expired " << expired_after
            << " ms after the kill; the writer had the lock " << took
            << " ms after the live readers left\n";
  EXPECT_LE(expired_after, 2000 + 500);
  EXPECT_LT(took, 500 + slack_ms) << "at once, or at its 500 ms re-check";
  writer->close_stdin();
  EXPECT_EQ(writer->wait_exit(5s), std::optional<int>{0}) << writer->diagnostics();
}

// The live reader leaves while the dead one's hold still has lease: the hash lives as long as
// that hold, and the writer has the lock when it expires, within its re-check after.
TEST(family_process, shared_kill9_of_a_reader_holds_a_writer_back_for_its_lease_only) {
  redis_server srv;
  const auto name = unique_name("fam-kill-reader2");
  const auto url = srv.url() + "?watchdog=2s&recheck=500ms";
  auto doomed = dlock_worker("read", {"hold", url, name});
  ASSERT_TRUE(worker_token(doomed->read_line(15s))) << doomed->diagnostics();
  const auto fields = srv.command({"HKEYS", name});  // "[mode, <owner>]"
  const auto owner = fields.substr(fields.find(", ") + 2, fields.size() - fields.find(", ") - 3);
  const auto dead_key = dlock::keys::read_hold_key(name, owner, 1);
  ASSERT_EQ(srv.command({"EXISTS", dead_key}), ":1") << fields;
  auto live = dlock_worker("read", {"hold", url, name});
  ASSERT_TRUE(worker_token(live->read_line(15s))) << live->diagnostics();
  auto writer = dlock_worker("write", {"hold", url, name});
  ASSERT_TRUE(wait_until(
      [&] {
        return srv.command({"ZCARD", dlock::keys::waiting_writers(name)}) == ":1";
      },
      15s))
      << writer->diagnostics();

  const auto killed_at = steady::now();
  doomed->kill9();
  const auto left = pttl(srv, dead_key);
  ASSERT_GT(left, 0);
  live->close_stdin();
  EXPECT_EQ(live->read_line(5s), std::optional<std::string>{"released"}) << live->diagnostics();
  ASSERT_TRUE(worker_token(writer->read_line(10s))) << writer->diagnostics();
  const auto took = dlock::test::since(killed_at).count();
  std::cout << "[          ] the dead reader's hold had " << left
            << " ms left; the writer had the lock " << took << " ms after the kill\n";
  EXPECT_GE(took, left - 50) << "not before the dead reader's lease ended";
  EXPECT_LE(took, left + 500 + slack_ms) << "within its 500 ms re-check after";
  writer->close_stdin();
  EXPECT_EQ(writer->wait_exit(5s), std::optional<int>{0}) << writer->diagnostics();
}

// -- lease_lost -----------------------------------------------------------------------------------

// Each kind's holder process sees its hold vanish (the hash expires at once): lease_lost() is
// requested by its next renewal (900 ms watchdog: every 300 ms), and unlock() reports lease_lost.
TEST(family_process, lease_lost_on_each_kind) {
  redis_server srv;
  for (const std::string kind : {"fair", "read", "write"}) {
    SCOPED_TRACE(kind);
    const auto name = unique_name("fam-lost-" + kind);
    auto w = dlock_worker(kind, {"hold_then_check", srv.url() + "?watchdog=900ms", name});
    ASSERT_TRUE(worker_token(w->read_line(15s))) << w->diagnostics();
    EXPECT_EQ(srv.command({"PEXPIRE", name, "1"}), ":1");
    const auto at = steady::now();
    EXPECT_EQ(w->read_line(3s), std::optional<std::string>{"lost"}) << w->diagnostics();
    std::cout << "[          ] " << kind << ": lost " << dlock::test::since(at).count()
              << " ms after the hash expired\n";
    const auto line = w->read_line(5s);
    ASSERT_TRUE(line) << w->diagnostics();
    const auto words = split_words(*line);
    ASSERT_GE(words.size(), 2u) << *line;
    EXPECT_EQ(words[0], "unlock");
    EXPECT_EQ(words[1], std::to_string(static_cast<int>(dlock::errc::lease_lost))) << *line;
    EXPECT_EQ(w->wait_exit(5s), std::optional<int>{0}) << w->diagnostics();
  }
}

}  // namespace dlock::test::family_fleet::process
