// The workloads of dlock_load (load.cpp: its usage and main), one function per sub-command:
// w2 in load_pairs.cpp, w3 and w4 in load_one_name.cpp, w5 and w6 in load_many_locks.cpp.
// Each prints one JSON object on stdout (or to --out FILE) and returns the exit status.
#pragma once

#include <cstdint>

#include "common.hpp"

namespace bench::load {

// --seconds (else `fallback`) in nanoseconds.
inline std::int64_t seconds_ns(const bench::options& opt, double fallback) {
  return static_cast<std::int64_t>(opt.number("seconds", fallback) * 1e9);
}

int w2(const bench::options& opt);
int w3(const bench::options& opt);
int w4(const bench::options& opt);
int w5(const bench::options& opt);
int w6(const bench::options& opt);

}  // namespace bench::load
