// dlock_floor_pair — the floor of one lock+unlock pair: the same two Lua scripts dlock runs
// (mutex_acquire, mutex_release, embedded from src/scripts/lua), sent back to back over one
// plain TCP connection with hiredis' synchronous API. No dlock runtime, no threads, no pipelining:
// two round trips and the scripts' own work, which no client library can go below.
//
//   dlock_floor_pair --host 127.0.0.1 --port 6379 [--iterations 20000] [--warmup 500]
//                    [--name bench:floor:pair] [--samples FILE]
//
// Prints one JSON object: {"system": "floor-pair", "n", "p50_us", "p99_us", "mean_us", ...}.
// `--samples` writes each pair's latency (µs), one per line. Exits 1 on any unexpected reply.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "common.hpp"
#include "dlock/config.hpp"
#include "dlock/keys.hpp"
#include "floor.hpp"
#include "runtime/waiters.hpp"
#include "scripts/script.hpp"

using bench::plain::conn;
using bench::plain::load;

int main(int argc, char** argv) {
  try {
    const bench::options opt{argc, argv, 1};
    conn c{opt};
    const auto iterations = opt.integer("iterations", 20000);
    const auto warmup = opt.integer("warmup", 500);
    const std::string name = opt.str("name", "bench:floor:pair");
    // The keys lock() and unlock() send with the default config (fencing on): the lock, its
    // waiter queue and records, its yield marker, the counter of its slot and RFencedLock's
    // counter of the name (read too).
    const std::vector<std::string> keys{name,
                                        dlock::keys::waiter_queue(name),
                                        dlock::keys::waiter_records(name),
                                        dlock::keys::yield_marker(name),
                                        dlock::keys::slot_fencing_counter_of(name),
                                        dlock::keys::fencing_counter(name)};
    // The arguments dlock's lock() sends with the default config: the watchdog lease, a waiter
    // ticket (lock() may wait, so its attempt carries one; a ticket's usual length: a random
    // 31-bit tag over a counter), the queue record's validity (the re-check interval plus a
    // second), the client id, and '0' (not woken by a Redisson unlock).
    const dlock::config defaults;
    const std::string lease = std::to_string(defaults.watchdog_lease.count());
    const std::string valid = std::to_string(defaults.wait_recheck.count() + 1000);
    const std::string ticket = "5302428712241725441";
    const std::string client_id = "0b9f4a2c-5d1e-4f3a-9c7b-2e8d6f1a3b5c";
    // An owner field of the length dlock writes: <client uuid>:<thread number>.
    const std::string owner = client_id + ":1";
    // unlock(): the channels, the count held (1), the lease, no ticket, the yield window.
    const std::string window = std::to_string(dlock::detail::waiter_registry::yield_window.count());
    load(c, dlock::scripts::mutex_acquire);
    load(c, dlock::scripts::mutex_release);

    std::vector<std::string> acquire{"EVALSHA", std::string{dlock::scripts::mutex_acquire.sha1},
                                     std::to_string(keys.size())};
    acquire.insert(acquire.end(), keys.begin(), keys.end());
    acquire.insert(acquire.end(), {lease, owner, "0", ticket, valid, client_id, "0"});
    std::vector<std::string> release{"EVALSHA", std::string{dlock::scripts::mutex_release.sha1},
                                     std::to_string(keys.size())};
    release.insert(release.end(), keys.begin(), keys.end());
    release.insert(release.end(),
                   {dlock::keys::lock_channel(name), dlock::keys::dlock_channel(name), owner, "1",
                    lease, "", window});
    std::vector<double> us;
    us.reserve(static_cast<std::size_t>(iterations));
    for (std::int64_t i = 0; i < warmup + iterations; ++i) {
      const auto t0 = bench::mono_ns();
      auto a = c.command(acquire);
      if (a->type != REDIS_REPLY_ARRAY || a->elements != 2 ||
          a->element[0]->type != REDIS_REPLY_INTEGER || a->element[0]->integer != 0) {
        throw std::runtime_error("acquire: unexpected reply (is the lock held elsewhere?)");
      }
      auto r = c.command(release);
      if (r->type != REDIS_REPLY_INTEGER || r->integer != 1) {
        throw std::runtime_error("release: unexpected reply");
      }
      const auto t1 = bench::mono_ns();
      if (i >= warmup) us.push_back(static_cast<double>(t1 - t0) / 1e3);
    }
    bench::write_samples(opt.str("samples"), us);
    const double avg = bench::mean(us);
    const double p50 = bench::percentile(us, 0.50);
    const double p99 = bench::percentile(us, 0.99);
    bench::emit(opt.str("out"), bench::json{}
                                    .field("system", "floor-pair")
                                    .field("n", static_cast<std::int64_t>(us.size()))
                                    .field("p50_us", p50)
                                    .field("p99_us", p99)
                                    .field("mean_us", avg)
                                    .field("min_us", us.front())
                                    .field("max_us", us.back())
                                    .str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlock_floor_pair: %s\n", e.what());
    return 1;
  }
}
