// Shared by the in-process dlock::mutex tests (mutex_*_test.cpp): a key's existence, a callable
// run on a thread of its own, and a waiter on its own thread that notes when its wait returned.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <string>
#include <utility>

#include "dlock/client.hpp"
#include "dlock/mutex.hpp"

namespace dlock::test {

// EXISTS `key`, through `c`.
inline std::int64_t exists(dlock::client& c, const std::string& key) {
  return c.execute({"EXISTS", key}).integer();
}

// Runs `f` on a thread of its own; the future holds its result.
template <class F>
auto on_thread(F f) {
  return std::async(std::launch::async, std::move(f));
}

// A waiter on its own thread: try_lock_for(wait) on `c`, noting when that returned; unlocks
// what it got.
struct timed_waiter {
  timed_waiter(dlock::client& c, std::string name, std::chrono::milliseconds wait)
      : result{on_thread([this, &c, name = std::move(name), wait] {
          dlock::mutex m{c, name};
          const bool got = m.try_lock_for(wait);
          returned = std::chrono::steady_clock::now();
          if (got) m.unlock();
          return got;
        })} {}
  std::atomic<std::chrono::steady_clock::time_point> returned{};
  std::future<bool> result;
};

}  // namespace dlock::test
