// Reconnect delays: exponential from `min` up to `max`, with "full jitter" (a uniform draw in
// [step/2, step]) so that many clients cut off together do not reconnect in lockstep.
#pragma once

#include <chrono>
#include <random>

namespace dlock::transport {

class backoff {
 public:
  backoff(std::chrono::milliseconds min, std::chrono::milliseconds max, std::uint64_t seed)
      : min_{min}, max_{max}, rng_{seed} {}

  // The delay before the next attempt; each call doubles the step until it reaches `max`.
  std::chrono::milliseconds next() {
    auto step = min_;
    for (unsigned i = 0; i < attempt_ && step < max_; ++i) step *= 2;
    if (step > max_) step = max_;
    ++attempt_;
    std::uniform_int_distribution<std::int64_t> pick{step.count() / 2, step.count()};
    return std::chrono::milliseconds{pick(rng_)};
  }
  void reset() { attempt_ = 0; }
  unsigned attempts() const { return attempt_; }

 private:
  std::chrono::milliseconds min_, max_;
  unsigned attempt_ = 0;
  std::mt19937_64 rng_;
};

}  // namespace dlock::transport
