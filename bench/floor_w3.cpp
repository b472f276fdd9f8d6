// dlock_floor_w3 — the floor of W3: one process of 8 on one name, taking the lock the way dlock's
// protocol does with the least client work there can be. The same scripts, keys and arguments as
// dlock's try_lock_for and unlock with the default config (watchdog lease, fencing on: the slot's
// counter and RFencedLock's), and the same waiter protocol (src/sync/acquire_machine.hpp,
// src/runtime/waiters.hpp), over two plain hiredis connections (synchronous API): one for the
// scripts, one for pub/sub. One thread, which sends, then sleeps until its answer comes — in a
// blocking read for a script's reply, in poll() on the subscribed socket for a message — and
// parses it itself: no I/O thread, no hand-off between threads, no watchdog, no timers. What a
// hand-off costs here is the server's work and the wake-ups between processes, which no client
// of this protocol can go below; dlock's W3 ÷ this one is what the library adds.
//
//   dlock_floor_w3 --host H --port P --name N --hold-us 1000 --think-us 1000 --seconds S
//                  [--start-at T] [--id K] [--out FILE]
//
// One acquisition, as acquire_machine runs it: an attempt carrying a new ticket (the script
// queues it when the lock is held, {1, pttl}, or left to Redisson's waiters, {2, pttl}). The first
// time it must wait it subscribes, in one SUBSCRIBE, the three channels of the name: this
// process's waiter channel (keys::waiter_channel), dlock's channel and Redisson's. It then sleeps
// until min(re-check, pttl + 1 ms, the end) or a wake-up, and attempts again:
// - its ticket on its waiter channel: an unlock handed it the lock (its owner field already set,
//   its token in its record); its next attempt takes the hold — a hand-off costs the release plus
//   the grantee's attempt;
// - `0` on Redisson's channel (woken as a Redisson unlock: the attempt ignores the yield marker),
//   unless a `y` on dlock's channel said that this `0` is Redisson's waiters'; `1` likewise;
// - `y`: re-check 21 ms later at the latest (the yield window has passed);
// - the confirmation of Redisson's channel (subscribed last): a message may have come before it.
// Once acquired it unsubscribes the three channels (as a client whose last waiter of the name
// leaves), without waiting for the confirmation; messages read before it are stale and dropped.
// At the end of the run a waiter gives up as dlock's does: mutex_release.lua with the count it
// would have plus one and its ticket (releases a hand-off made to it, leaves the queue).
// Then hold, unlock (mutex_release.lua), think. Prints the same JSON as `dlock_load w3`
// (system "floor"). Exits 1 on a connection error or a reply the protocol does not have.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <random>
#include <string>
#include <vector>

#include "common.hpp"
#include "dlock/config.hpp"
#include "dlock/keys.hpp"
#include "floor.hpp"
#include "runtime/waiters.hpp"
#include "scripts/script.hpp"

namespace {

using bench::plain::conn;
using bench::plain::reply_ptr;

std::string random_id() {
  std::random_device rd;
  std::mt19937_64 g{(static_cast<std::uint64_t>(rd()) << 32) ^ rd()};
  char buf[40];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(g()),
                static_cast<unsigned long long>(g()));
  return std::string{buf, 8} + "-" + std::string{buf + 8, 4} + "-" + std::string{buf + 12, 4} +
         "-" + std::string{buf + 16, 4} + "-" + std::string{buf + 20, 12};
}

std::string text(const redisReply* r) {
  return r->str != nullptr ? std::string{r->str, r->len} : std::string{};
}

constexpr std::int64_t ms_ns = 1'000'000;

}  // namespace

int main(int argc, char** argv) {
  try {
    const bench::options opt{argc, argv, 1};
    const auto name = opt.required("name");
    const auto hold = opt.integer("hold-us", 1000) * 1000;
    const auto think = opt.integer("think-us", 1000) * 1000;
    conn cmd{opt}, sub{opt};

    // As dlock sends them with the default config: the watchdog lease, the queue record valid for
    // the re-check interval plus a second, the 20 ms yield window.
    const dlock::config defaults;
    const std::string lease = std::to_string(defaults.watchdog_lease.count());
    const std::int64_t recheck_ns = defaults.wait_recheck.count() * ms_ns;
    const std::string valid = std::to_string(defaults.wait_recheck.count() + 1000);
    const auto yield_window = dlock::detail::waiter_registry::yield_window;
    const std::string window = std::to_string(yield_window.count());
    const std::string client_id = random_id();
    const std::string owner = client_id + ":1";
    const std::vector<std::string> keys{name,
                                        dlock::keys::waiter_queue(name),
                                        dlock::keys::waiter_records(name),
                                        dlock::keys::yield_marker(name),
                                        dlock::keys::slot_fencing_counter_of(name),
                                        dlock::keys::fencing_counter(name)};
    const std::string redisson_channel = dlock::keys::lock_channel(name);
    const std::string dlock_channel = dlock::keys::dlock_channel(name);
    const std::string waiter_channel = dlock::keys::waiter_channel(name, client_id);
    bench::plain::load(cmd, dlock::scripts::mutex_acquire);
    bench::plain::load(cmd, dlock::scripts::mutex_release);

    auto script = [&](const dlock::scripts::script& s, std::initializer_list<std::string> values) {
      std::vector<std::string> args{"EVALSHA", std::string{s.sha1}, std::to_string(keys.size())};
      args.insert(args.end(), keys.begin(), keys.end());
      args.insert(args.end(), values);
      return cmd.command(args);
    };
    // unlock(), or a waiter's give-back (`have` one more than it holds, and its ticket).
    auto release = [&](const std::string& have, const std::string& ticket) {
      return script(dlock::scripts::mutex_release,
                    {redisson_channel, dlock_channel, owner, have, lease, ticket, window});
    };

    // Tickets as dlock's: a random 31-bit tag in the high half, a counter in the low one.
    std::uint64_t tag = 0;
    while (tag == 0) tag = std::random_device{}() & 0x7fffffffu;
    std::uint32_t next_ticket = 0;

    const auto t0 = bench::start_line(opt);
    const auto deadline = t0 + static_cast<std::int64_t>(opt.number("seconds", 10) * 1e9);
    bench::w3_events events;
    std::int64_t errors = 0;
    bool subscribed = false;
    int unsubscribes_owed = 0;  // UNSUBSCRIBE confirmations not read yet

    for (;;) {
      const auto call = bench::mono_ns();
      if (call >= deadline) break;
      const std::string ticket = std::to_string((tag << 32) | ++next_ticket);
      bool acquired = false, queued = false, foreign = false;
      bool skip_zero = false;  // a `y` came: the next `0` is Redisson's waiters'
      for (;;) {
        if (queued && bench::mono_ns() >= deadline) {
          // The end: give back whatever was handed to it, and leave the queue.
          auto g = release("1", ticket);
          if (!g || g->type == REDIS_REPLY_ERROR) ++errors;
          break;
        }
        auto r = script(dlock::scripts::mutex_acquire,
                        {lease, owner, "0", ticket, valid, client_id, foreign ? "1" : "0"});
        foreign = false;
        if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
            r->element[0]->type != REDIS_REPLY_INTEGER ||
            r->element[1]->type != REDIS_REPLY_INTEGER) {
          throw std::runtime_error("acquire: unexpected reply");
        }
        const auto code = r->element[0]->integer;
        const auto pttl = static_cast<std::int64_t>(r->element[1]->integer);
        if (code == 0) {
          acquired = true;
          break;
        }
        if (code != 1 && code != 2) throw std::runtime_error("acquire: the hold count is not 0");
        // Held, or left to Redisson's waiters: queued. Subscribe (the first time), then sleep
        // until a wake-up, the re-check or the end.
        queued = true;
        if (!subscribed) {
          sub.send({"SUBSCRIBE", waiter_channel, dlock_channel, redisson_channel});
          subscribed = true;
        }
        auto now = bench::mono_ns();
        auto wake_at = now + recheck_ns;
        if (pttl >= 0) wake_at = std::min(wake_at, now + (pttl + 1) * ms_ns);
        for (;;) {
          now = bench::mono_ns();
          if (now >= std::min(wake_at, deadline)) break;  // the re-check, or the end
          const auto wait_ns = std::min(wake_at, deadline) - now;
          auto m = sub.next(static_cast<int>((wait_ns + ms_ns - 1) / ms_ns));
          if (!m || m->type != REDIS_REPLY_ARRAY || m->elements != 3) continue;
          const auto kind = text(m->element[0]);
          if (kind == "unsubscribe") {
            --unsubscribes_owed;
            continue;
          }
          if (unsubscribes_owed > 0) continue;  // from the last subscription: stale
          const auto channel = text(m->element[1]);
          if (kind == "subscribe") {
            if (channel == redisson_channel) break;  // check once: a message may have been missed
            continue;
          }
          if (kind != "message") continue;
          const auto payload = text(m->element[2]);
          if (channel == waiter_channel) {
            if (payload == ticket) break;  // handed to it: its attempt takes the hold
          } else if (channel == dlock_channel) {
            if (payload == "y") {
              skip_zero = true;
              wake_at = std::min(wake_at, now + (yield_window.count() + 1) * ms_ns);
            }
          } else if (channel == redisson_channel) {
            if (payload == "1" || (payload == "0" && !skip_zero)) {
              foreign = true;
              break;
            }
            if (payload == "0") skip_zero = false;
          }
        }
      }
      if (!acquired) break;  // the run is over
      const auto got = bench::mono_ns();
      if (subscribed) {
        // The last waiter of the name in this process has left: unsubscribe.
        sub.send({"UNSUBSCRIBE", waiter_channel, dlock_channel, redisson_channel});
        unsubscribes_owed += 3;
        subscribed = false;
      }
      bench::hold_until_ns(got + hold);
      const auto unlock_call = bench::mono_ns();
      auto r = release("1", "");
      const auto unlocked = bench::mono_ns();
      if (!r || r->type != REDIS_REPLY_INTEGER || r->integer != 1) ++errors;
      events.add(call, got, unlock_call, unlocked);
      bench::sleep_ns(think);
    }
    events.emit(opt.str("out"), "floor", opt.integer("id", 0), t0, deadline, errors);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlock_floor_w3: %s\n", e.what());
    return 1;
  }
}
