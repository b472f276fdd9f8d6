// The blocking bridge: starts an asynchronous operation and waits for its completion on the
// calling thread. Refuses (errc::would_deadlock) on the client's I/O thread, where waiting would
// stop the very thread that must complete the operation.
//
// The completion signals the caller only if it sleeps, and after releasing the mutex, so the
// woken caller does not block again on a mutex the completing thread still holds.
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
// Every dlock operation completes by its deadline (or when cancelled), so the wait is bounded.
template <class T, class Start>
T run_blocking(client_impl& c, std::error_code& ec, Start&& start) {
  if (c.on_io_thread()) {
    ec = errc::would_deadlock;
    return T{};
  }
  enum class phase { running, sleeping, done };
  struct state {
    std::atomic<phase> at{phase::running};
    std::mutex mu;
    std::condition_variable cv;
    std::error_code ec;
    T value{};
  };
  auto st = std::make_shared<state>();
  start(unique_function<void(std::error_code, T)>{[st](std::error_code e, T v) {
    st->ec = e;
    st->value = std::move(v);
    if (st->at.exchange(phase::done, std::memory_order_acq_rel) == phase::sleeping) {
      // The caller holds mu from its compare-exchange until it waits: once we have had it, the
      // caller waits, and is notified after the unlock.
      { std::lock_guard lock{st->mu}; }
      st->cv.notify_one();
    }
  }});
  if (st->at.load(std::memory_order_acquire) != phase::done) {
    std::unique_lock lock{st->mu};
    auto expected = phase::running;
    if (st->at.compare_exchange_strong(expected, phase::sleeping, std::memory_order_acq_rel)) {
      st->cv.wait(lock, [&] { return st->at.load(std::memory_order_acquire) == phase::done; });
    }
  }
  ec = st->ec;
  return std::move(st->value);
}

}  // namespace dlock::detail
