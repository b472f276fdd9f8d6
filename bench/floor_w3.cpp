// dlock_floor_w3 — the floor of W3: one process of 8 on one name, taking the lock the way dlock's
// protocol does with the least client work there can be. The same scripts and arguments as
// dlock's try_lock_for and unlock (a queued waiter that takes grants, fenced by the shared
// counter, a 100 ms hand-off window), over two plain hiredis connections (synchronous API): one
// for the scripts, one subscribed to this process's waiter channel and the lock's channel. One
// thread, which sends, then sleeps until its answer comes — in a blocking read for a script's
// reply, in poll() on the subscribed socket for a message — and parses it itself: no I/O
// thread, no hand-off between threads, no watchdog, no timers, no confirmation of a grant (dlock
// confirms one a fifth of the window after it, which W3's 1 ms holds never reach). What a hand-off
// costs here is the server's work and the wake-ups between processes, which no client library
// can go below; dlock's W3 ÷ this one is what the library adds.
//
//   dlock_floor_w3 --host H --port P --name N --hold-us 1000 --think-us 1000 --seconds S
//                  [--start-at T] [--id K] [--out FILE]
//
// Loop: attempt (the first one enters the queue); while not acquired, wait for a message: a grant
// `=<ticket> ...` names this waiter: it holds the lock; its bare ticket (the lock kept for it):
// attempt again as the named waiter; `0` on the lock's channel (free to all) or no message
// within the re-check interval: attempt again. A stand-by (`-<ticket>`, the next in line behind
// a hand-off kept for another) is ignored: it waits on for its own message or the re-check,
// where dlock re-checks when the window has passed (with grants, which W3 makes, nothing is
// kept, so none comes). Past the end it leaves the queue. Then hold,
// unlock, think. Prints the same JSON as `dlock_load w3` (system "floor").
// Exits 1 on a connection error or a reply the protocol does not have.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <random>
#include <string>
#include <vector>

#include "common.hpp"
#include "dlock/keys.hpp"
#include "floor.hpp"
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
  return std::string{buf, 8} + "-" + std::string{buf + 8, 4} + "-" + std::string{buf + 12, 4} + "-" +
         std::string{buf + 16, 4} + "-" + std::string{buf + 20, 12};
}

std::string text(const redisReply* r) { return r->str != nullptr ? std::string{r->str, r->len} : std::string{}; }

}  // namespace

int main(int argc, char** argv) {
  try {
    const bench::options opt{argc, argv, 1};
    const auto name = opt.required("name");
    const auto hold = opt.integer("hold-us", 1000) * 1000;
    const auto think = opt.integer("think-us", 1000) * 1000;
    conn cmd{opt}, sub{opt};

    // As dlock's defaults send them: a 30 s watchdog lease, the queue entry valid for the re-check
    // interval (3 s) plus a second, the shared fencing counter with the lock's own read too,
    // grants fenced by the shared counter ('s'), a 100 ms hand-off window.
    const std::string lease = "30000", window = "100", mode = "s";
    constexpr std::int64_t recheck_ms = 3000;
    const std::string client_id = random_id();
    const std::string owner = client_id + ":1";
    const std::string shared{dlock::keys::shared_fencing_counter};
    const std::string own = dlock::keys::fencing_counter(name);
    const std::string channel = dlock::keys::lock_channel(name);
    const std::string waiter_channel = dlock::keys::waiter_channel(client_id);
    const std::string queue = dlock::keys::waiter_queue(name), expiry = dlock::keys::waiter_expiry(name);
    const std::string acquire_sha{dlock::scripts::mutex_acquire.sha1};
    const std::string release_sha{dlock::scripts::mutex_release.sha1};
    bench::plain::load(cmd, dlock::scripts::mutex_acquire);
    bench::plain::load(cmd, dlock::scripts::mutex_release);
    // Both channels, as a dlock client with a waiter subscribes them; both confirmations read.
    auto first = sub.command({"SUBSCRIBE", waiter_channel, channel});
    if (!first || first->type != REDIS_REPLY_ARRAY || !sub.next(5000)) {
      throw std::runtime_error("SUBSCRIBE was not confirmed");
    }

    // A ticket: this process's random tag in the high 32 bits, a counter in the low ones.
    const auto tag = static_cast<std::uint64_t>(std::random_device{}() | 1u);
    std::uint32_t next_ticket = 0;

    const auto t0 = bench::start_line(opt);
    const auto deadline = t0 + static_cast<std::int64_t>(opt.number("seconds", 10) * 1e9);
    bench::w3_events events;
    std::int64_t errors = 0;

    // The attempt's reply: true when it holds the lock ({0, token}); false when another holds
    // it or it is kept for another ({pttl}, {-1}).
    auto held_by_us = [](const reply_ptr& r) {
      if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 1 || r->element[0]->type != REDIS_REPLY_INTEGER) {
        throw std::runtime_error("acquire: unexpected reply");
      }
      if (r->elements == 2 && r->element[0]->integer == 0) return true;
      if (r->elements != 1) throw std::runtime_error("acquire: the owner's count is not what it expects");
      return false;
    };

    for (;;) {
      const auto call = bench::mono_ns();
      if (call >= deadline) break;
      const std::string ticket = std::to_string((tag << 32) | ++next_ticket);
      const std::string grant_prefix = "=" + ticket + " ";
      const char* kind = "3";  // the ticket's first attempt (it cannot be in the queue yet)
      bool acquired = false, gave_up = false;
      while (!acquired && !gave_up) {
        const auto sent = bench::mono_ns();
        const auto valid = std::min<std::int64_t>(recheck_ms, (deadline - sent) / 1'000'000 + 1) + 1000;
        acquired = held_by_us(cmd.command({"EVALSHA", acquire_sha, "5", name, shared, queue, expiry, own, lease,
                                           owner, "0", ticket, std::to_string(valid), "1", kind, client_id,
                                           mode, std::to_string(sent)}));
        kind = "0";
        // Wait for a message that answers it: a grant, the ticket, a `0`, or the re-check.
        while (!acquired && !gave_up) {
          const auto now = bench::mono_ns();
          if (now >= deadline) {
            // Leave the queue (a hand-off kept for it or a grant made to it is passed on).
            auto r = cmd.command({"EVALSHA", release_sha, "6", name, channel, queue, expiry, shared, own, "0", lease,
                                  owner, "0", window, ticket, mode});
            if (!r || r->type == REDIS_REPLY_ERROR) ++errors;
            gave_up = true;
            break;
          }
          auto m = sub.next(static_cast<int>(std::min<std::int64_t>(recheck_ms, (deadline - now) / 1'000'000 + 1)));
          if (!m) break;  // the re-check
          if (m->type != REDIS_REPLY_ARRAY || m->elements != 3) continue;
          const auto payload = text(m->element[2]);
          if (payload.rfind(grant_prefix, 0) == 0) {
            acquired = true;  // granted: it holds the lock (its confirmation would come 20 ms on)
          } else if (payload == ticket) {
            kind = "1";  // the lock is kept for it: take it
            break;
          } else if (payload == "0" && text(m->element[1]) == channel) {
            break;  // free to all
          }
        }
      }
      if (gave_up) break;
      const auto got = bench::mono_ns();
      bench::hold_until_ns(got + hold);
      const auto unlock_call = bench::mono_ns();
      auto r = cmd.command({"EVALSHA", release_sha, "6", name, channel, queue, expiry, shared, own, "0", lease, owner,
                            "1", window, "", mode});
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
