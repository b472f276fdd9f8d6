// dlock_fault_worker — one lock user in its own process for the fault lab (fault_test.cpp).
// It runs critical sections on a shared resource (resource.hpp) and records each step in its
// history (history.hpp); the checker (checker.hpp) judges the merged histories. The section
// loop is worker_section.cpp, the locks worker_lock.cpp and worker_group_lock.cpp.
//
//   dlock_fault_worker --lock-url URL --resource-url URL --name NAME --id ID --history FILE
//                      [--lock dlock|broken-no-owner-check|broken-no-expiry|
//                              broken-reuses-tokens|broken-over-reports-trust]
//                      [--kind mutex|fair|read|write|broken-read-as-write|permits|
//                              broken-permits-adds-one|red|multi|broken-multi-first-only]
//                      [--permits N]
//                      [--servers P1,P2,P3] [--names A,B[@PORT]] [--count N]
//                      [--wait MS] [--lease MS] [--hold MS] [--hold-first MS] [--jitter MS]
//                      [--think MS] [--seed N] [--stop-before-write 1]
//
// --kind picks dlock's lock (worker_lock.hpp): a mutex by default, a fair_mutex, or either side
// of a shared_mutex; a reader's sections record "mode":"read" and end after the hold (with one
// more lease check), without writing. --kind permits takes one permit of a leased_semaphore of
// --permits N: its sections record "mode":"permit" and "lim" N, token 0, and read without
// writing, as a reader's. --kind red takes a dlock::red_lock of NAME over --servers (ports on
// the lock URL's host, each client configured as the lock URL); --kind multi a dlock::multi_lock
// of --names, each member a lock of its own in the history guarding a resource of its own
// (worker_lock.hpp): a section then reads all, holds once, and writes all, each with its own
// member's token.
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
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <string>

#include "dlock/client.hpp"
#include "dlock/config.hpp"
#include "history.hpp"
#include "worker_lock.hpp"
#include "worker_section.hpp"

namespace {

using std::chrono::milliseconds;
using options = dlock::faults::worker_options;

[[noreturn]] void fail(int code, const std::string& what) {
  std::cerr << "dlock_fault_worker: " << what << '\n' << std::flush;
  std::_Exit(code);
}

[[noreturn]] void usage() {
  fail(2,
       "usage: dlock_fault_worker --lock-url URL --resource-url URL --name NAME --id ID "
       "--history FILE [--lock dlock|broken-no-owner-check|broken-no-expiry|"
       "broken-reuses-tokens|broken-over-reports-trust] "
       "[--kind mutex|fair|read|write|broken-read-as-write|permits|broken-permits-adds-one|red|"
       "multi|broken-multi-first-only] [--permits N] [--servers P1,P2,P3] [--names A,B[@PORT]] "
       "[--count N] "
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
      {"--kind", &o.kind},         {"--servers", &o.servers},
      {"--names", &o.names}};
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
    const auto lock_cfg = dlock::config::from_uri(o.lock_url);
    dlock::client lock_client{lock_cfg};
    std::string why;
    const bool group = dlock::faults::is_group_kind(o.kind);
    if (group && o.lock != "dlock") fail(2, "--kind " + o.kind + " is dlock's only");
    const auto lock = group ? dlock::faults::make_group_lock(lock_client, lock_cfg, o.name, o.kind,
                                                             o.servers, o.names, o.lease, why)
                            : dlock::faults::make_held_lock(lock_client, o.name, o.lock, o.kind,
                                                            o.lease, o.permits, why);
    if (!lock) fail(2, why);
    dlock::faults::worker w{o, history, *lock, resource_client};
    const int rc = w.run();
    // Stopped before `w` goes: lost callbacks of this run's leases refer to it.
    lock->shutdown();
    lock_client.shutdown();
    resource_client.shutdown();
    return rc;
  } catch (const std::exception& e) {
    fail(3, e.what());
  }
}
