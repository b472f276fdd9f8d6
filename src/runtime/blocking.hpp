// The blocking bridge: runs an async operation and waits for its completion on the calling
// thread. Refuses (errc::would_deadlock) on the client's I/O thread, where waiting would stop
// the very thread that must complete the operation.
//
// The caller sleeps on a condition variable. The completion signals it only if it sleeps, and
// after releasing the mutex, so the woken caller does not block again on the mutex the
// completing thread still holds (which cost two more context switches per call).
// Spinning before sleeping was measured and left out: on a 2-CPU host shared with Redis and
// other work, a spinning caller takes the CPU the I/O thread and Redis need for the reply
// (p50 2-3x worse, 3x the CPU per call).
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <system_error>

#include "dlock/detail/unique_function.hpp"
#include "dlock/error.hpp"
#include "runtime/client_impl.hpp"

namespace dlock::detail {

// `start` receives a completion callback and must arrange for it to be called exactly once.
// Every dlock operation completes by its deadline, so the wait is bounded.
template <class T, class Start>
T run_blocking(client_impl& c, std::error_code& ec, Start&& start) {
  if (c.on_io_thread()) {
    ec = errc::would_deadlock;
    return T{};
  }
  // The completion writes ec and value, then sets `done` (release) under the mutex; the caller
  // reads them only after seeing `done` (acquire). The callback owns a reference to the state,
  // so signalling after the unlock is safe even if the caller has already returned.
  struct state {
    std::atomic<bool> done{false};
    std::mutex mu;
    std::condition_variable cv;
    bool sleeping = false;  // guarded by mu
    std::error_code ec;
    T value{};
  };
  auto st = std::make_shared<state>();
  start(unique_function<void(std::error_code, T)>{[st](std::error_code e, T v) {
    st->ec = e;
    st->value = std::move(v);
    bool wake = false;
    {
      std::lock_guard lock{st->mu};
      st->done.store(true, std::memory_order_release);
      wake = st->sleeping;
    }
    if (wake) st->cv.notify_one();
  }});
  if (!st->done.load(std::memory_order_acquire)) {
    std::unique_lock lock{st->mu};
    st->sleeping = true;
    st->cv.wait(lock, [&] { return st->done.load(std::memory_order_acquire); });
  }
  ec = st->ec;
  return std::move(st->value);
}

}  // namespace dlock::detail
