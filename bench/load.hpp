// The workloads of dlock_load (load.cpp: its usage and main), one function per sub-command:
// w2 in load_pairs.cpp, w3 and w4 in load_one_name.cpp, w5 and w6 in load_many_locks.cpp.
// Each prints one JSON object on stdout (or to --out FILE) and returns the exit status.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "common.hpp"
#include "dlock/detail/lock_base.hpp"

namespace bench::load {

// --seconds (else `fallback`) in nanoseconds.
inline std::int64_t seconds_ns(const bench::options& opt, double fallback) {
  return static_cast<std::int64_t>(opt.number("seconds", fallback) * 1e9);
}

// --kind: which of dlock's locks a workload takes, each a detail::lock_base as dlock::mutex is:
// mutex (the default), fair (fair_mutex), read or write (shared_mutex's read or write side).
// (--kind permits, leased_semaphore's, is not a lock: w1 and w2 take it, load_permits.cpp; nor is
// --kind red, a red_lock over the servers of --urls: w1, w2 and w3 take it, load_red.cpp.)
inline dlock::detail::lock_kind kind_of(const std::string& kind) {
  using dlock::detail::lock_kind;
  if (kind == "mutex") return lock_kind::mutex;
  if (kind == "fair") return lock_kind::fair;
  if (kind == "read") return lock_kind::read;
  if (kind == "write") return lock_kind::write;
  throw std::runtime_error("--kind is mutex, fair, read or write, not " + kind);
}
inline dlock::detail::lock_kind kind_of(const bench::options& opt) {
  return kind_of(opt.str("kind", "mutex"));
}

int w2(const bench::options& opt);
int w1_permits(const bench::options& opt);
int w2_permits(const bench::options& opt);
int w1_red(const bench::options& opt);
int w2_red(const bench::options& opt);
int w3_red(const bench::options& opt);
int w3(const bench::options& opt);
int w4(const bench::options& opt);
int w5(const bench::options& opt);
int w6(const bench::options& opt);

}  // namespace bench::load
