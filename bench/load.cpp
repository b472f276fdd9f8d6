// dlock_load — the load driver of scripts/bench: one process of a (multi-process) workload.
// Every sub-command prints one JSON object on stdout (or to --out FILE). Processes that must run
// together get the same --start-at: a CLOCK_MONOTONIC time in ns (shared by every process on
// the host) at which they all begin.
//
//   Every workload but w4 takes --kind mutex|fair|read|write (default mutex): the lock it takes,
//   dlock::mutex, dlock::fair_mutex, or the read or write side of dlock::shared_mutex.
//
//   dlock_load w1 --kind permits --url U [--name N] [--iterations 20000] [--warmup 500]
//       [--samples FILE]
//       One client, one thread: leased_semaphore::acquire(1) + permit::release on a semaphore
//       of 1 permit, one after the other; --samples writes each pair's latency (µs), one a line.
//       -> {"n", "p50_us", "p99_us", "errors"}
//   dlock_load w2 --url U --lockers 50 --seconds S [--mode async|threads] [--prefix P]
//       [--name N [--writers W]]
//       50 lockers on distinct names, each a lock+unlock loop, for S seconds.
//       async:   one client; each locker chains async_lock and lease::async_unlock by
//                their completion handlers (on the client's I/O thread).
//       threads: one client; each locker is a thread calling lock() and unlock().
//       --name: every locker on that one name instead; --writers (with --kind read): the first
//       W lockers take the write side, the others the read side.
//       -> {"pairs", "write_pairs" (the writers'), "seconds", "pairs_per_s", "errors", "cpu_s"
//          (this process's, from the start)}
//       --kind permits (async only): async_acquire(1)+async_release on leased_semaphores, each
//       acquirer on a semaphore of 1 permit of its own (P:0, P:1, ...), or with --name all on one
//       semaphore of `lockers` permits (load_permits.cpp).
//   dlock_load w3 --url U --name N --hold-us 1000 --think-us 1000 --seconds S [--id K]
//       One thread: try_lock_for(until the end), hold, unlock, think; until the end.
//       -> {"id", "events": [[call, acquired, unlock_call, unlock_returned] (ns), ...], "errors"}
//   dlock_load w4 --url U --name N --waiters 10 --hold-us 1000 --seconds S
//       [--count-from T --count-to T]: also counts the acquisitions within that window
//       `waiters` threads of one client on one name: try_lock_for(until the end), hold, unlock.
//       -> {"acquisitions", "timeouts", "errors", "refused_subscriptions"}
//   dlock_load w5 --url U --locks 10000 [--periods 3] [--prefix P]
//       Takes `locks` watchdog locks (async_lock, no lease; set the URI's ?watchdog= short),
//       holds them for `periods` renewal periods (watchdog/3), checks every lease's lost(),
//       releases them. Counts the scripts Redis ran meanwhile (INFO commandstats: evalsha calls,
//       hexists calls = holds renewed) and this process's RSS before and while holding.
//   dlock_load w6 --url U --locks 100000 [--clients 50] [--window 2000] [--prefix P]
//       Takes `locks` locks (10-minute lease) spread over `clients` clients, `window`
//       acquisitions in flight per client at a time, and reads Redis' used_memory and DBSIZE
//       before, while holding and after releasing them; times taking and releasing them all.
//
//   dlock_load w1|w2|w3 --kind red --urls U1,U2,... [w1: --mode sync|async --iterations 5000
//       --warmup 200 --samples FILE; w2: --lockers 50 --seconds S --prefix P; w3: as above]
//       dlock::red_lock over the servers of --urls (one client each, a majority needed): w1 one
//       lock+unlock pair after the other on one name (sync: lock()/unlock(); async: a chain of
//       async_lock/multi_lease::async_unlock), -> {"n", "p50_us", "p99_us", "errors"}; w2 `lockers`
//       async chains on distinct names, -> {"pairs", "seconds", "pairs_per_s", "errors", "cpu_s"};
//       w3 as the mutex's, with red_lock::try_lock_for (load_red.cpp).
//
// The workloads: load_permits.cpp (w1, w2 with --kind permits), load_red.cpp (--kind red),
// load_pairs.cpp (w2),
// load_one_name.cpp (w3, w4), load_many_locks.cpp (w5, w6).
//
// Exit status: 0 when the run completed (errors are reported in the JSON), 1 when it could not
// run, 64 for bad usage.
#include "load.hpp"

#include <cstdio>
#include <exception>
#include <string>

#include "common.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fputs("usage: dlock_load w1|w2|w3|w4|w5|w6 --url URL [options] (see bench/load.cpp)\n",
               stderr);
    return 64;
  }
  const std::string cmd = argv[1];
  try {
    const bench::options opt{argc, argv, 2};
    const bool permits = opt.str("kind") == "permits";
    const bool red = opt.str("kind") == "red";
    if (cmd == "w1" && permits) return bench::load::w1_permits(opt);
    if (cmd == "w1" && red) return bench::load::w1_red(opt);
    if (cmd == "w2" && red) return bench::load::w2_red(opt);
    if (cmd == "w2") return permits ? bench::load::w2_permits(opt) : bench::load::w2(opt);
    if (cmd == "w3") return red ? bench::load::w3_red(opt) : bench::load::w3(opt);
    if (cmd == "w4") return bench::load::w4(opt);
    if (cmd == "w5") return bench::load::w5(opt);
    if (cmd == "w6") return bench::load::w6(opt);
    std::fprintf(stderr, "dlock_load: unknown workload %s\n", cmd.c_str());
    return 64;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlock_load %s: %s\n", cmd.c_str(), e.what());
    return 1;
  }
}
