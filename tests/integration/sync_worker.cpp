// dlock_sync_worker — one user of dlock's semaphores or latch in its own process, driven by
// semaphore_process_test.cpp. Every line it prints on stdout is flushed at once. Options come
// after NAME, in any order. URL parameters set the client (e.g. "?watchdog=1s&recheck=500ms").
//
//   dlock_sync_worker loop URL NAME --permits N [--lease MS] [--hold-ms N] [--duration-s N]
//                     [--gauge KEY] [--log FILE]
//       leased_semaphore NAME (try_set_permits(N) first: N if it has no counter yet). Prints
//       "ready" once connected and waits for EOF on stdin (so that several processes start
//       together); then for N seconds (default 4): try_acquire_for(until the end) one permit
//       (with --lease MS: that fixed lease, else the watchdog's); INCR the gauge KEY (same
//       server, default "NAME:gauge"), noting the value; hold N ms (default 5); DECR the gauge;
//       release. The INCR comes after acquire returned and the DECR before the release is sent,
//       so the gauge counts sections in progress: never above N while exclusion holds. With
//       --log, appends "<start ns> <end ns>" (CLOCK_MONOTONIC, inside each section) per section
//       to FILE at the end. Prints "count <sections>", "max_gauge <highest INCR reply>" and
//       "max_acquire_ms <longest acquisition>".
//   dlock_sync_worker hold URL NAME --permits N [--lease MS] [--type leased|counting]
//       try_set_permits(N); acquires one permit of a leased_semaphore (default) or of a
//       counting_semaphore; prints "acquired" (a leased permit: "acquired <id>"); holds it until
//       stdin closes (or it is killed), releases it and prints "released" (or "release <error>").
//   dlock_sync_worker count-down URL NAME
//       latch NAME: count_down(1), then prints "counted".
//   dlock_sync_worker wait URL NAME [--timeout-ms N]
//       latch NAME: prints "waiting" once connected, then wait_for(N ms, default 20000); prints
//       "open" or "closed".
//
// Errors: a message on stderr and a non-zero exit (2 usage, 3 errors, 4 file errors).
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "dlock/client.hpp"
#include "dlock/config.hpp"
#include "dlock/counting_semaphore.hpp"
#include "dlock/latch.hpp"
#include "dlock/leased_semaphore.hpp"

namespace {

using std::chrono::milliseconds;

void say(const std::string& line) { std::cout << line << '\n' << std::flush; }

[[noreturn]] void fail(int code, const std::string& what) {
  std::cerr << "dlock_sync_worker: " << what << '\n' << std::flush;
  std::_Exit(code);
}

[[noreturn]] void usage() {
  fail(2,
       "usage: dlock_sync_worker loop URL NAME --permits N [--lease MS] [--hold-ms N] "
       "[--duration-s N] [--gauge KEY] [--log FILE] | hold URL NAME --permits N [--lease MS] "
       "[--type leased|counting] | count-down URL NAME | wait URL NAME [--timeout-ms N]");
}

// Blocks until stdin reaches end of file (the test closed its end, or died).
void wait_for_stdin_eof() {
  char buf[256];
  for (;;) {
    const auto n = ::read(0, buf, sizeof buf);
    if (n == 0) return;
    if (n < 0 && errno != EINTR) return;
  }
}

std::int64_t monotonic_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

struct options {
  std::string mode, url, name;
  std::map<std::string, std::string> opt;  // "--permits" -> "3"

  long number(const std::string& key, long fallback) const {
    const auto it = opt.find(key);
    if (it == opt.end()) return fallback;
    char* end = nullptr;
    const long v = std::strtol(it->second.c_str(), &end, 10);
    if (it->second.empty() || *end != '\0' || v < 0) usage();
    return v;
  }
  std::string text(const std::string& key, std::string fallback) const {
    const auto it = opt.find(key);
    return it == opt.end() ? fallback : it->second;
  }
};

// Takes one leased permit: with --lease, that fixed lease; else the watchdog's.
template <class Wait>
dlock::permit take(dlock::leased_semaphore& s, const options& o, Wait wait) {
  const long lease = o.number("--lease", 0);
  if (lease > 0) return s.try_acquire_for(wait, 1, milliseconds{lease});
  return s.try_acquire_for(wait, 1);
}

int loop(const options& o) {
  dlock::client c{dlock::config::from_uri(o.url)};
  dlock::leased_semaphore s{c, o.name};
  s.try_set_permits(o.number("--permits", 1));
  const auto gauge = o.text("--gauge", o.name + ":gauge");
  const long hold_ms = o.number("--hold-ms", 5);
  const long duration_s = o.number("--duration-s", 4);
  const auto log_path = o.text("--log", "");
  c.ping();  // connected
  say("ready");
  wait_for_stdin_eof();
  std::vector<std::pair<std::int64_t, std::int64_t>> sections;
  std::int64_t max_gauge = 0;
  std::chrono::steady_clock::duration longest{};
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds{duration_s};
  while (std::chrono::steady_clock::now() < end) {
    const auto asked = std::chrono::steady_clock::now();
    auto p = take(s, o, end - asked);
    if (!p) break;  // still waiting when the run ended
    longest = std::max(longest, std::chrono::steady_clock::now() - asked);
    const auto start = monotonic_ns();
    max_gauge = std::max(max_gauge, c.execute({"INCR", gauge}).integer());
    std::this_thread::sleep_for(milliseconds{hold_ms});
    c.execute({"DECR", gauge});
    sections.emplace_back(start, monotonic_ns());
    p.release();
  }
  if (!log_path.empty()) {
    std::ofstream out{log_path, std::ios::app};
    for (const auto& [a, b] : sections) out << a << ' ' << b << '\n';
    if (!out.flush()) fail(4, "cannot write " + log_path);
  }
  say("count " + std::to_string(sections.size()));
  say("max_gauge " + std::to_string(max_gauge));
  say("max_acquire_ms " +
      std::to_string(std::chrono::duration_cast<milliseconds>(longest).count()));
  return 0;
}

int hold(const options& o) {
  dlock::client c{dlock::config::from_uri(o.url)};
  const auto permits = o.number("--permits", 1);
  const auto type = o.text("--type", "leased");
  std::error_code ec;
  if (type == "counting") {
    dlock::counting_semaphore s{c, o.name};
    s.try_set_permits(permits);
    s.acquire();
    say("acquired");
    wait_for_stdin_eof();
    s.release(1, ec);
  } else if (type == "leased") {
    dlock::leased_semaphore s{c, o.name};
    s.try_set_permits(permits);
    const long lease = o.number("--lease", 0);
    auto p = lease > 0 ? s.acquire(1, milliseconds{lease}) : s.acquire();
    say("acquired " + p.ids().at(0));
    wait_for_stdin_eof();
    p.release(ec);
  } else {
    usage();
  }
  say(ec ? "release " + ec.message() : std::string{"released"});
  return 0;
}

int latch_command(const options& o) {
  dlock::client c{dlock::config::from_uri(o.url)};
  dlock::latch l{c, o.name};
  if (o.mode == "count-down") {
    l.count_down();
    say("counted");
    return 0;
  }
  c.ping();
  say("waiting");
  say(l.wait_for(milliseconds{o.number("--timeout-ms", 20000)}) ? "open" : "closed");
  return 0;
}

options parse(int argc, char** argv) {
  if (argc < 4) usage();
  options o{argv[1], argv[2], argv[3], {}};
  for (int i = 4; i < argc; i += 2) {
    const std::string key = argv[i];
    if (key.rfind("--", 0) != 0 || i + 1 == argc) usage();
    o.opt[key] = argv[i + 1];
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const auto o = parse(argc, argv);
  try {
    if (o.mode == "loop") return loop(o);
    if (o.mode == "hold") return hold(o);
    if (o.mode == "count-down" || o.mode == "wait") return latch_command(o);
  } catch (const std::exception& e) {
    fail(3, o.mode + ": " + e.what());
  }
  usage();
}
