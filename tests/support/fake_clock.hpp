// A fake wall clock for a redis-server, changed while it runs: Redis expires keys and answers
// TIME by its wall clock, so clock faults on the Redis host are steps and rate changes of it.
//
//   dlock::test::fake_clock clock;                               // real time until changed
//   dlock::test::redis_server srv{{.clock_file = clock.path()}};
//   clock.step(120s);                                            // the server's time jumps
//   clock.set_rate(1.5);                                         // and now runs 1.5x fast
//
// The server runs with the shim clock_shim.c LD_PRELOADed; it reads the parameters from the file
// at path() on every clock read (CLOCK_REALTIME and CLOCK_REALTIME_COARSE, gettimeofday, time;
// CLOCK_MONOTONIC, which Redis' timers use, is untouched). One fake_clock may drive several
// servers. The test process itself keeps the real clock.
//
// A reader never sees half an update (a seqlock in the mapped file). The members may be called
// from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace dlock::test {

// The built shim (the path CMake gave at build time).
std::string clock_shim_path();

class fake_clock {
 public:
  // Creates the parameter file, real time (offset 0, rate 1), in a fresh temporary directory.
  // Throws std::runtime_error on failure.
  fake_clock();
  // Unmaps and removes the file; servers that mapped it keep their last parameters.
  ~fake_clock();
  fake_clock(const fake_clock&) = delete;
  fake_clock& operator=(const fake_clock&) = delete;

  const std::string& path() const noexcept { return path_; }

  // The fake time jumps by `d` (forward or back), as a `date -s` on the host would.
  void step(std::chrono::nanoseconds d);
  // From now on the fake time runs `rate` times as fast as real time (rate > 0); continuous at
  // the change.
  void set_rate(double rate);
  // Real time again: offset 0, rate 1 (a step back by whatever the offset had become).
  void reset();
  // Fake time minus real time now.
  std::chrono::nanoseconds offset() const;

 private:
  struct params;  // the mapped layout (clock_shim.c)
  void write(std::int64_t anchor_ns, std::int64_t offset_ns, std::int64_t rate_ppm);

  std::string dir_, path_;
  params* map_ = nullptr;
  mutable std::mutex mu_;  // one writer at a time (the seqlock's precondition)
};

}  // namespace dlock::test
