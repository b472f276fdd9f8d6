// dlock_lock_worker — one dlock::mutex user in its own process, driven by the multi-process
// integration tests (mutex_process_test.cpp, family_process_test.cpp, family_interop_test.cpp).
// Every line it prints on stdout is flushed at once. A first option
// `--kind mutex|fair|read|write` picks the lock: dlock::mutex (the default), dlock::fair_mutex,
// or the read or write side of dlock::shared_mutex.
//
//   dlock_lock_worker hold URL NAME
//       lock() (watchdog lease); prints "acquired <token>"; then holds until stdin closes (or it
//       is killed), unlocks and prints "released".
//   dlock_lock_worker hold_then_check URL NAME
//       lock(); prints "acquired <token>"; then every 10 ms checks lease_lost(). Once it is
//       requested: prints "lost", calls unlock(ec) and prints "unlock <ec.value()> <message>"
//       (0 and "ok" when it succeeded), and exits 0.
//   dlock_lock_worker rmw URL NAME FILE COUNT
//       COUNT times: lock(); read "<value> <last token>" from FILE; check the fencing token is
//       larger than the last one written; write "<value + 1> <token>"; unlock(). Exits 0.
//   dlock_lock_worker loop URL NAME [--hold-ms N] [--pause-ms N] [--duration-s N] [--log FILE]
//                     [--owner]
//       prints "ready" once connected and waits for EOF on stdin (so that several processes
//       start together); then for N seconds (default 6): try_lock_until(the end); hold N ms
//       (default 1); unlock(); pause N ms (default 0). With --log, appends "<start ns> <end ns>"
//       (CLOCK_MONOTONIC, taken after lock() returned and before unlock() was called: inside the
//       hold) per acquisition to FILE, written at the end. Prints "count <acquisitions>" and
//       "max_lock_ms <longest lock()>". With --owner, first prints "owner <field>": the hash
//       field it holds the lock as, which is also its entry in a fair lock's queue.
//
// Errors: a message on stderr and a non-zero exit (2 usage, 3 lock errors, 4 file errors, 5 a
// broken invariant: the file was seen empty or a fencing token went backwards).
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "dlock/client.hpp"
#include "dlock/config.hpp"
#include "dlock/detail/lock_base.hpp"
#include "dlock/error.hpp"

namespace {

using lock_kind = dlock::detail::lock_kind;
lock_kind kind = lock_kind::mutex;

void say(const std::string& line) { std::cout << line << '\n' << std::flush; }

[[noreturn]] void fail(int code, const std::string& what) {
  std::cerr << "dlock_lock_worker: " << what << '\n' << std::flush;
  std::_Exit(code);
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

int hold(const std::string& url, const std::string& name) {
  dlock::client c{dlock::config::from_uri(url)};
  dlock::detail::lock_base m{c, name, kind};
  m.lock();
  say("acquired " + std::to_string(m.fencing_token()));
  wait_for_stdin_eof();
  std::error_code ec;
  m.unlock(ec);
  if (ec) fail(3, "unlock: " + ec.message());
  say("released");
  return 0;
}

int hold_then_check(const std::string& url, const std::string& name) {
  dlock::client c{dlock::config::from_uri(url)};
  dlock::detail::lock_base m{c, name, kind};
  m.lock();
  say("acquired " + std::to_string(m.fencing_token()));
  const auto lost = m.lease_lost();
  while (!lost.stop_requested()) std::this_thread::sleep_for(std::chrono::milliseconds{10});
  say("lost");
  std::error_code ec;
  m.unlock(ec);
  say("unlock " + std::to_string(ec.value()) + " " + (ec ? ec.message() : std::string{"ok"}));
  return 0;
}

struct counter_file {
  std::uint64_t value = 0;
  std::uint64_t last_token = 0;
};

// Reads "<value> <last token>"; on failure sets `problem` (the lock is still held: the caller
// releases it before exiting, so the other workers go on and report for themselves).
counter_file read_counter(const std::string& path, std::string& problem) {
  counter_file out;
  std::ifstream in{path};
  if (!in) {
    problem = "cannot open " + path + " for reading";
    return out;
  }
  std::string text{std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
  std::istringstream s{text};
  if (text.empty()) {
    problem = "the counter file is empty: someone else is writing it";
  } else if (!(s >> out.value >> out.last_token)) {
    problem = "the counter file is garbled: '" + text + "'";
  }
  return out;
}

void write_counter(const std::string& path, const counter_file& f) {
  const std::string text = std::to_string(f.value) + " " + std::to_string(f.last_token) + "\n";
  const int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) fail(4, "cannot open " + path + " for writing: " + std::strerror(errno));
  std::size_t done = 0;
  while (done < text.size()) {
    const auto n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail(4, std::string{"write: "} + std::strerror(errno));
    done += static_cast<std::size_t>(n);
  }
  if (::close(fd) != 0) fail(4, std::string{"close: "} + std::strerror(errno));
}

int rmw(const std::string& url, const std::string& name, const std::string& path, long count) {
  dlock::client c{dlock::config::from_uri(url)};
  dlock::detail::lock_base m{c, name, kind};
  for (long i = 0; i < count; ++i) {
    m.lock();
    const auto token = m.fencing_token();
    std::string problem;
    auto f = read_counter(path, problem);
    if (problem.empty() && token <= f.last_token) {
      problem = "fencing token " + std::to_string(token) + " is not above the last one written (" +
                std::to_string(f.last_token) + ")";
    }
    if (!problem.empty()) {
      std::error_code ec;
      m.unlock(ec);
      fail(5, problem);
    }
    ++f.value;
    f.last_token = token;
    write_counter(path, f);
    m.unlock();
  }
  return 0;
}

std::int64_t monotonic_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

int loop(const std::string& url, const std::string& name, long hold_ms, long pause_ms,
         double duration_s, const std::string& log_path, bool owner) {
  dlock::client c{dlock::config::from_uri(url)};
  dlock::detail::lock_base m{c, name, kind};
  c.ping();  // connected
  if (owner) say("owner " + m.own_field());
  say("ready");
  wait_for_stdin_eof();
  std::vector<std::pair<std::int64_t, std::int64_t>> holds;
  holds.reserve(1 << 16);
  const auto end = std::chrono::steady_clock::now() +
                   std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                       std::chrono::duration<double>{duration_s});
  std::chrono::steady_clock::duration longest{};
  while (std::chrono::steady_clock::now() < end) {
    const auto asked = std::chrono::steady_clock::now();
    if (!m.try_lock_until(end)) break;  // still waiting when the run ended
    longest = std::max(longest, std::chrono::steady_clock::now() - asked);
    const auto start = monotonic_ns();
    std::this_thread::sleep_for(std::chrono::milliseconds{hold_ms});
    holds.emplace_back(start, monotonic_ns());
    m.unlock();
    if (pause_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds{pause_ms});
  }
  if (!log_path.empty()) {
    std::ofstream out{log_path, std::ios::app};
    for (const auto& [a, b] : holds) out << a << ' ' << b << '\n';
    if (!out.flush()) fail(4, "cannot write " + log_path);
  }
  say("count " + std::to_string(holds.size()));
  say("max_lock_ms " +
      std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(longest).count()));
  return 0;
}

[[noreturn]] void usage() {
  fail(2,
       "usage: dlock_lock_worker [--kind mutex|fair|read|write] hold URL NAME | hold_then_check "
       "URL NAME | "
       "rmw URL NAME FILE COUNT | loop URL NAME [--hold-ms N] [--pause-ms N] [--duration-s N] "
       "[--log FILE] [--owner]");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 2 && std::string_view{argv[1]} == "--kind") {
    const std::string_view k = argv[2];
    if (k == "fair") {
      kind = lock_kind::fair;
    } else if (k == "read") {
      kind = lock_kind::read;
    } else if (k == "write") {
      kind = lock_kind::write;
    } else if (k != "mutex") {
      usage();
    }
    argv += 2;
    argc -= 2;
  }
  if (argc < 4) usage();
  const std::string mode = argv[1];
  const std::string url = argv[2];
  const std::string name = argv[3];
  try {
    if (mode == "hold" && argc == 4) return hold(url, name);
    if (mode == "hold_then_check" && argc == 4) return hold_then_check(url, name);
    if (mode == "rmw" && argc == 6) {
      char* end = nullptr;
      const long count = std::strtol(argv[5], &end, 10);
      if (end == argv[5] || *end != '\0' || count < 0) usage();
      return rmw(url, name, argv[4], count);
    }
    if (mode == "loop") {
      long hold_ms = 1;
      long pause_ms = 0;
      double duration_s = 6;
      std::string log_path;
      bool owner = false;
      for (int i = 4; i < argc; i += 2) {
        const std::string opt = argv[i];
        if (opt == "--owner") {
          owner = true;
          --i;
          continue;
        }
        if (i + 1 == argc) usage();
        char* end = nullptr;
        if (opt == "--hold-ms") {
          hold_ms = std::strtol(argv[i + 1], &end, 10);
          if (end == argv[i + 1] || *end != '\0' || hold_ms < 0) usage();
        } else if (opt == "--pause-ms") {
          pause_ms = std::strtol(argv[i + 1], &end, 10);
          if (end == argv[i + 1] || *end != '\0' || pause_ms < 0) usage();
        } else if (opt == "--duration-s") {
          duration_s = std::strtod(argv[i + 1], &end);
          if (end == argv[i + 1] || *end != '\0' || duration_s < 0) usage();
        } else if (opt == "--log") {
          log_path = argv[i + 1];
        } else {
          usage();
        }
      }
      return loop(url, name, hold_ms, pause_ms, duration_s, log_path, owner);
    }
  } catch (const std::exception& e) {
    fail(3, mode + ": " + e.what());
  }
  usage();
}
