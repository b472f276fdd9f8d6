// dlock_fault_worker — one lock user in its own process for the fault lab (fault_test.cpp).
// It runs critical sections on a shared resource (resource.hpp) and records each step in its
// history (history.hpp); the checker (checker.hpp) judges the merged histories.
//
//   dlock_fault_worker --lock-url URL --resource-url URL --name NAME --id ID --history FILE
//                      [--lock dlock|broken-no-owner-check|broken-no-expiry|
//                              broken-reuses-tokens|broken-over-reports-trust]
//                      [--kind mutex|fair|read|write|broken-read-as-write|permits|
//                              broken-permits-adds-one] [--permits N] [--count N]
//                      [--wait MS] [--lease MS] [--hold MS] [--hold-first MS] [--jitter MS]
//                      [--think MS] [--seed N] [--stop-before-write 1]
//
// --kind picks dlock's lock (worker_lock.hpp): a mutex by default, a fair_mutex, or either side
// of a shared_mutex; a reader's sections record "mode":"read" and end after the hold (with one
// more lease check), without writing. --kind permits takes one permit of a leased_semaphore of
// --permits N: its sections record "mode":"permit" and "lim" N, token 0, and read without
// writing, as a reader's.
// A section: acquire (wait up to --wait; --lease 0 = dlock's watchdog lease) → `enter` →
// fenced read → unfenced GET → hold (--hold-first for the first section, else --hold, plus up to
// --jitter from a generator seeded with --seed; cut short when the lease is lost) → fenced write
// of read+1 → unfenced SET of get+1 → `exit` → release → think (--think). Before every access
// the holder checks its lease (lease::lost() and lease::time_left(), read on this thread); when
// it is lost it records `lost` and touches nothing more. `enter` records the lease's time left
// (the lock's trust claim). A refusal by the fence is recorded (the unfenced counter goes on
// regardless). A write is preceded by an `invoke`; one that fails is recorded with an unknown
// outcome (it may have applied), then the error. Runs --count sections (default 1), or fewer if
// stdin reaches EOF (checked between sections). After a failed acquisition it retries (a
// `timeout` or an `error` event, which do not count as sections).
//
// stdout, one flushed line per step, for tests to follow: `enter <token>`, `exit <token>`,
// `lost <token>`, `timeout`, `error <text>`, `done <sections>`, and with --stop-before-write
// `stop <token>`: in its first section the worker then stops itself (SIGSTOP) between its last
// lease check and its fenced write — the check-then-act window only fencing closes — and writes
// once it is continued.
// Exit codes: 0 done, 2 usage, 3 setup errors, 6 an acquisition hung past its wait + 30 s.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>

#include "dlock/client.hpp"
#include "dlock/config.hpp"
#include "dlock/error.hpp"
#include "history.hpp"
#include "resource.hpp"
#include "worker_lock.hpp"

namespace {

using dlock::faults::event;
using dlock::faults::held_lock;
using std::chrono::milliseconds;
using namespace std::chrono_literals;

// Set when stdin reaches EOF: finish the current section and exit.
std::atomic<bool> stdin_closed{false};

void say(const std::string& line) { std::cout << line << '\n' << std::flush; }

[[noreturn]] void fail(int code, const std::string& what) {
  std::cerr << "dlock_fault_worker: " << what << '\n' << std::flush;
  std::_Exit(code);
}

struct options {
  std::string lock_url, resource_url, name, id, history;
  std::string lock = "dlock", kind = "mutex";
  long count = 1;
  long permits = 0;
  bool stop_before_write = false;
  milliseconds wait{10000}, lease{0}, hold{100}, jitter{0}, think{0};
  std::optional<milliseconds> hold_first;
  std::uint64_t seed = 1;
};

// One section's lost signal, recorded once whichever thread sees it first.
struct section_state {
  std::mutex mu;
  bool open = true;
  bool lost_recorded = false;
};

class worker {
 public:
  worker(const options& o, dlock::faults::history_writer& h, held_lock& l,
         dlock::faults::resource& r)
      : o_{o}, h_{h}, lock_{l}, res_{r}, rng_{o.seed} {}

  int run() {
    std::thread stdin_watch{[this] { watch_stdin(); }};
    stdin_watch.detach();  // blocked in read(2) until EOF; the process exits around it
    long done = 0;
    while (done < o_.count && !stdin_closed) {
      std::uint64_t token = 0;
      h_.record({.kind = "acquire"});
      const auto ec = lock_.acquire(o_.wait, token);
      if (ec == dlock::errc::timeout) {
        h_.record({.kind = "timeout"});
        say("timeout");
        continue;
      }
      if (ec) {
        h_.record({.kind = "error", .detail = "acquire: " + ec.message()});
        say("error acquire: " + ec.message());
        std::this_thread::sleep_for(20ms);
        continue;
      }
      section(token, done == 0 && o_.hold_first ? *o_.hold_first : o_.hold);
      ++done;
      if (o_.think.count() > 0) std::this_thread::sleep_for(o_.think);
    }
    say("done " + std::to_string(done));
    return 0;
  }

 private:
  void watch_stdin() {
    char buf[64];
    for (;;) {
      const auto n = ::read(0, buf, sizeof buf);
      if (n == 0 || (n < 0 && errno != EINTR)) break;
    }
    stdin_closed = true;
  }

  milliseconds jittered(milliseconds base) {
    if (o_.jitter.count() <= 0) return base;
    std::uniform_int_distribution<long> d{0, static_cast<long>(o_.jitter.count())};
    return base + milliseconds{d(rng_)};
  }

  void record_lost(const std::shared_ptr<section_state>& st, std::uint64_t token, const char* src) {
    std::lock_guard lock{st->mu};
    if (!st->open || st->lost_recorded) return;
    st->lost_recorded = true;
    h_.record({.kind = "lost", .token = token, .detail = src});
    say("lost " + std::to_string(token));
  }

  // True while the holder may touch the resource; records `lost` when it may not.
  bool still_held(const std::shared_ptr<section_state>& st, std::uint64_t token) {
    if (lock_.lost()) record_lost(st, token, "check");
    std::lock_guard lock{st->mu};
    return !st->lost_recorded;
  }

  bool resource_error(const char* what, std::error_code ec) {
    if (!ec) return false;
    h_.record({.kind = "error", .detail = std::string{what} + ": " + ec.message()});
    say(std::string{"error "} + what + ": " + ec.message());
    return true;
  }

  void section(std::uint64_t token, milliseconds hold) {
    auto st = std::make_shared<section_state>();
    h_.record({.kind = "enter",
               .token = token,
               .left_ms = lock_.left_ms(),
               .mode = lock_.mode(),
               .limit = lock_.limit()});
    say("enter " + std::to_string(token));
    lock_.on_lost([this, st, token] { record_lost(st, token, "callback"); });
    access_all(st, token, hold);
    {
      std::lock_guard lock{st->mu};
      if (!st->lost_recorded) {
        h_.record({.kind = "exit", .token = token, .left_ms = lock_.left_ms()});
        say("exit " + std::to_string(token));
      }
      st->open = false;
    }
    const auto ec = lock_.release();
    h_.record({.kind = "release", .token = token, .detail = ec ? ec.message() : ""});
    if (ec && ec != dlock::errc::lease_lost) {
      h_.record({.kind = "error", .detail = "release: " + ec.message()});
      say("error release: " + ec.message());
    }
  }

  // The accesses of one section; returns early when the lease is lost or the resource fails.
  // A refusal by the fence is recorded and does not stop the unfenced counter beside it: that
  // counter shows what the same holder would have done to a resource without fencing.
  void access_all(const std::shared_ptr<section_state>& st, std::uint64_t token,
                  milliseconds hold) {
    std::error_code ec;
    if (!still_held(st, token)) return;
    const auto r = res_.fenced_read(token, ec);
    if (resource_error("fenced read", ec)) return;
    h_.record({.kind = "read",
               .token = token,
               .ok = r.accepted,
               .value = r.value,
               .left_ms = lock_.left_ms()});

    if (!still_held(st, token)) return;
    const auto u = res_.plain_get(ec);
    if (resource_error("plain get", ec)) return;
    h_.record({.kind = "uread", .token = token, .value = u, .left_ms = lock_.left_ms()});

    lock_.hold_for(jittered(hold));

    if (!still_held(st, token) || !lock_.writes()) return;  // a reader ends with its check
    stop_in_the_window(token);
    const bool written =
        write_access({.kind = "write", .token = token, .value = r.value + 1, .read = r.value},
                     "fenced write", [&](event& e, std::error_code& error) {
                       const auto w = res_.fenced_write(token, e.value, error);
                       e.ok = w.accepted;
                       e.prev = w.value;
                     });
    if (!written || !still_held(st, token)) return;
    write_access(
        {.kind = "uwrite", .token = token, .value = u + 1, .read = u}, "plain set",
        [&](event& e, std::error_code& error) { e.prev = res_.plain_set(e.value, error); });
  }

  // --stop-before-write, first section: stopped after the lease check, before the write.
  void stop_in_the_window(std::uint64_t token) {
    if (!o_.stop_before_write || stopped_once_) return;
    stopped_once_ = true;
    say("stop " + std::to_string(token));
    ::raise(SIGSTOP);
  }

  // One write between its `invoke` and its completion; false when it failed, which is recorded
  // as an unknown outcome (the request may have run and only its reply been lost).
  template <class Send>
  bool write_access(event e, const char* what, Send send) {
    h_.record({.kind = "invoke", .token = e.token, .value = e.value, .read = e.read, .op = e.kind});
    std::error_code ec;
    send(e, ec);
    e.unknown = static_cast<bool>(ec);
    if (!ec) e.left_ms = lock_.left_ms();
    h_.record(e);
    return !resource_error(what, ec);
  }

  const options& o_;
  dlock::faults::history_writer& h_;
  held_lock& lock_;
  dlock::faults::resource& res_;
  std::mt19937_64 rng_;
  bool stopped_once_ = false;
};

[[noreturn]] void usage() {
  fail(2,
       "usage: dlock_fault_worker --lock-url URL --resource-url URL --name NAME --id ID "
       "--history FILE [--lock dlock|broken-no-owner-check|broken-no-expiry|"
       "broken-reuses-tokens|broken-over-reports-trust] "
       "[--kind mutex|fair|read|write|broken-read-as-write|permits|broken-permits-adds-one] "
       "[--permits N] [--count N] "
       "[--wait MS] [--lease MS] [--hold MS] [--hold-first MS] [--jitter MS] [--think MS] "
       "[--seed N] [--stop-before-write 1]");
}

long number(const std::string& s) {
  char* end = nullptr;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || v < 0) usage();
  return v;
}

options parse(int argc, char** argv) {
  options o;
  std::map<std::string, std::string*> text{
      {"--lock-url", &o.lock_url}, {"--resource-url", &o.resource_url},
      {"--name", &o.name},         {"--id", &o.id},
      {"--history", &o.history},   {"--lock", &o.lock},
      {"--kind", &o.kind}};
  std::map<std::string, milliseconds*> durations{{"--wait", &o.wait},
                                                 {"--lease", &o.lease},
                                                 {"--hold", &o.hold},
                                                 {"--jitter", &o.jitter},
                                                 {"--think", &o.think}};
  for (int i = 1; i < argc; i += 2) {
    if (i + 1 >= argc) usage();
    const std::string key = argv[i], value = argv[i + 1];
    if (auto it = text.find(key); it != text.end()) {
      *it->second = value;
    } else if (auto d = durations.find(key); d != durations.end()) {
      *d->second = milliseconds{number(value)};
    } else if (key == "--hold-first") {
      o.hold_first = milliseconds{number(value)};
    } else if (key == "--count") {
      o.count = number(value);
    } else if (key == "--permits") {
      o.permits = number(value);
    } else if (key == "--stop-before-write") {
      o.stop_before_write = number(value) != 0;
    } else if (key == "--seed") {
      o.seed = static_cast<std::uint64_t>(number(value));
    } else {
      usage();
    }
  }
  if (o.lock_url.empty() || o.resource_url.empty() || o.name.empty() || o.id.empty() ||
      o.history.empty()) {
    usage();
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const auto o = parse(argc, argv);
  try {
    // Declared first, destroyed last: the clients' I/O threads (lost callbacks) record into it.
    dlock::faults::history_writer history{o.history, o.id};
    dlock::client resource_client{dlock::config::from_uri(o.resource_url)};
    dlock::faults::resource res{resource_client, o.name};
    dlock::client lock_client{dlock::config::from_uri(o.lock_url)};
    std::string why;
    const auto lock =
        dlock::faults::make_held_lock(lock_client, o.name, o.lock, o.kind, o.lease, o.permits, why);
    if (!lock) fail(2, why);
    worker w{o, history, *lock, res};
    const int rc = w.run();
    // Stopped before `w` goes: lost callbacks of this run's leases refer to it.
    lock_client.shutdown();
    resource_client.shutdown();
    return rc;
  } catch (const std::exception& e) {
    fail(3, e.what());
  }
}
