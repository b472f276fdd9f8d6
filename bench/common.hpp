// Helpers shared by dlock's benchmark programs (bench/): the clock every process shares, small
// statistics, option parsing, /proc readings and a tiny JSON writer. Header-only, no dlock.
#pragma once

#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace bench {

// CLOCK_MONOTONIC in nanoseconds: one clock for every process on the host (std::steady_clock
// in libstdc++, time.monotonic_ns() in Python and process.hrtime.bigint() in Node read it too),
// so timestamps taken by different processes can be compared.
inline std::int64_t mono_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

inline void sleep_ns(std::int64_t ns) {
  if (ns <= 0) return;
  timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

// Sleeps until the shared clock reads `at` (a start line common to several processes).
inline void sleep_until_ns(std::int64_t at) {
  if (at <= 0) return;
  timespec ts{static_cast<time_t>(at / 1'000'000'000), static_cast<long>(at % 1'000'000'000)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

// Returns when the clock reads `end` (a mono_ns() value), within a microsecond or so: sleeps
// until kHoldSpinNs before it, then reads the clock. W3's hold is the critical section's length,
// and its formula, 1/(hold + 2 RTT), takes the workload's 1 ms; a nanosleep of 1 ms lasts
// 1.03-1.06 ms on this VM (the wake-up, p99 ~60 us idle, more under load), which the formula
// would charge to the lock. Every W3 driver (dlock, its floor and the peers) holds this way.
inline constexpr std::int64_t kHoldSpinNs = 150'000;
inline void hold_until_ns(std::int64_t end) {
  sleep_until_ns(end - kHoldSpinNs);  // returns at once when that time has passed
  while (mono_ns() < end) {
  }
}

// Nearest-rank percentile of `v` (sorted in place), q in [0, 1]; 0 for an empty sample.
inline double percentile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size())));
  rank = std::clamp<std::size_t>(rank, 1, v.size());
  return v[rank - 1];
}

inline double mean(const std::vector<double>& v) {
  if (v.empty()) return 0;
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

// CPU seconds of this process so far, every thread (user + system): a workload divides a
// window's by its pairs.
inline double cpu_s() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// Resident set size of this process in bytes (/proc/self/statm).
inline long rss_bytes() {
  std::ifstream in{"/proc/self/statm"};
  long size = 0, resident = 0;
  in >> size >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

// `key:value` lines of an INFO reply.
inline std::map<std::string, std::string> parse_info(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in{text};
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    out[line.substr(0, colon)] = line.substr(colon + 1);
  }
  return out;
}

// The `calls=` count of one `cmdstat_<name>` line of INFO commandstats (0 when absent).
inline std::int64_t cmdstat_calls(const std::map<std::string, std::string>& info,
                                  const std::string& command) {
  auto it = info.find("cmdstat_" + command);
  if (it == info.end()) return 0;
  const auto at = it->second.find("calls=");
  if (at == std::string::npos) return 0;
  return std::strtoll(it->second.c_str() + at + 6, nullptr, 10);
}

// `--name value` and `--name=value` options after the sub-command.
class options {
 public:
  options(int argc, char** argv, int first) {
    for (int i = first; i < argc; ++i) {
      std::string a = argv[i];
      if (a.rfind("--", 0) != 0) throw std::runtime_error("unexpected argument: " + a);
      const auto eq = a.find('=');
      if (eq != std::string::npos) {
        values_[a.substr(2, eq - 2)] = a.substr(eq + 1);
      } else if (i + 1 < argc) {
        values_[a.substr(2)] = argv[++i];
      } else {
        throw std::runtime_error("option " + a + " needs a value");
      }
    }
  }
  std::string str(const std::string& name, const std::string& fallback = {}) const {
    auto it = values_.find(name);
    return it == values_.end() ? fallback : it->second;
  }
  std::string required(const std::string& name) const {
    auto it = values_.find(name);
    if (it == values_.end()) throw std::runtime_error("missing option --" + name);
    return it->second;
  }
  std::int64_t integer(const std::string& name, std::int64_t fallback) const {
    auto it = values_.find(name);
    return it == values_.end() ? fallback : std::stoll(it->second);
  }
  double number(const std::string& name, double fallback) const {
    auto it = values_.find(name);
    return it == values_.end() ? fallback : std::stod(it->second);
  }

 private:
  std::map<std::string, std::string> values_;
};

// A flat JSON object written field by field: {"a": 1, "b": "x", "c": [..]}.
class json {
 public:
  json& field(std::string_view k, double v) {
    key(k);
    char buf[64];
    if (std::isfinite(v)) {
      std::snprintf(buf, sizeof buf, "%.6g", v);
    } else {
      std::snprintf(buf, sizeof buf, "null");
    }
    out_ += buf;
    return *this;
  }
  json& field(std::string_view k, std::int64_t v) {
    key(k);
    out_ += std::to_string(v);
    return *this;
  }
  json& field(std::string_view k, std::string_view v) {
    key(k);
    out_ += '"';
    for (char ch : v) {
      if (ch == '"' || ch == '\\') out_ += '\\';
      if (static_cast<unsigned char>(ch) < 0x20) continue;
      out_ += ch;
    }
    out_ += '"';
    return *this;
  }
  json& field(std::string_view k, const char* v) { return field(k, std::string_view{v}); }
  // A raw JSON value (an array built by the caller).
  json& raw(std::string_view k, std::string_view v) {
    key(k);
    out_ += v;
    return *this;
  }
  std::string str() const { return out_ + "}"; }

 private:
  void key(std::string_view k) {
    out_ += out_.size() > 1 ? ", \"" : "\"";
    out_ += k;
    out_ += "\": ";
  }
  std::string out_ = "{";
};

// Writes `text` and a newline to `path`, or to stdout when `path` is empty.
inline void emit(const std::string& path, const std::string& text) {
  if (path.empty()) {
    std::fputs(text.c_str(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
    return;
  }
  std::ofstream out{path};
  out << text << '\n';
  if (!out) throw std::runtime_error("cannot write " + path);
}

// One latency sample per line (microseconds), for the plots.
inline void write_samples(const std::string& path, const std::vector<double>& us) {
  if (path.empty()) return;
  std::ofstream out{path};
  char buf[32];
  for (double v : us) {
    std::snprintf(buf, sizeof buf, "%.2f\n", v);
    out << buf;
  }
  if (!out) throw std::runtime_error("cannot write " + path);
}

// W3's record of one process: each acquisition as [call, acquired, unlock call, unlock
// returned] (the shared clock, ns), printed as bench/run.py reads it.
class w3_events {
 public:
  void add(std::int64_t call, std::int64_t acquired, std::int64_t unlock_call,
           std::int64_t unlocked) {
    if (events_.size() > 1) events_ += ',';
    events_ += "[" + std::to_string(call) + "," + std::to_string(acquired) + "," +
               std::to_string(unlock_call) + "," + std::to_string(unlocked) + "]";
  }
  void emit(const std::string& out, const std::string& system, std::int64_t id, std::int64_t start,
            std::int64_t deadline, std::int64_t errors) const {
    bench::emit(out, json{}
                         .field("system", system)
                         .field("id", id)
                         .field("start", start)
                         .field("deadline", deadline)
                         .field("errors", errors)
                         .raw("events", events_ + "]")
                         .str());
  }

 private:
  std::string events_ = "[";
};

// Sleeps until --start-at (a shared-clock time in ns common to the processes of a workload;
// absent: now) and returns the start: that time, or now if it has passed.
inline std::int64_t start_line(const options& opt) {
  const auto at = opt.integer("start-at", 0);
  sleep_until_ns(at);
  return at > 0 ? std::max(at, mono_ns()) : mono_ns();
}

}  // namespace bench
