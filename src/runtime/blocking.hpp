// The blocking bridge: runs an async operation and waits for its completion on the calling
// thread. Refuses (errc::would_deadlock) on the client's I/O thread, where waiting would stop
// the very thread that must complete the operation.
#pragma once

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
  struct state {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    std::error_code ec;
    T value{};
  };
  auto st = std::make_shared<state>();
  start(unique_function<void(std::error_code, T)>{[st](std::error_code e, T v) {
    std::lock_guard lock{st->mu};
    st->ec = e;
    st->value = std::move(v);
    st->done = true;
    st->cv.notify_one();
  }});
  std::unique_lock lock{st->mu};
  st->cv.wait(lock, [&] { return st->done; });
  ec = st->ec;
  return std::move(st->value);
}

}  // namespace dlock::detail
