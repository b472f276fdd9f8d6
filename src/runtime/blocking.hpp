// The blocking bridge: runs an async operation and waits for its completion on the calling
// thread. Refuses (errc::would_deadlock) on the client's I/O thread, where waiting would stop
// the very thread that must complete the operation.
//
// The caller sleeps on a condition variable. The completion signals it only if it sleeps, and
// after releasing the mutex, so the woken caller does not block again on the mutex the
// completing thread still holds (which cost two more context switches per call).
// Spinning before sleeping was measured and left out: on a 2-CPU host shared with Redis and
// other work, a spinning caller takes the CPU the I/O thread and Redis need for the reply
// (p50 2-3x worse, 3x the CPU per call). (A watching caller, below, yields only after a
// message woke it, while the I/O thread handles that message.)
//
// An operation that a message most likely completes can name the connection to watch while
// its caller waits (runtime/caller_wake.hpp).
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <system_error>
#include <type_traits>

#include "dlock/detail/unique_function.hpp"
#include "dlock/error.hpp"
#include "runtime/caller_wake.hpp"
#include "runtime/client_impl.hpp"

namespace dlock::detail {

// `start` receives a completion callback and must arrange for it to be called exactly once.
// It may return the connection to watch while the caller waits (a `const transport::link*`,
// null for none; above). Every dlock operation completes by its deadline, so the wait is
// bounded.
template <class T, class Start>
T run_blocking(client_impl& c, std::error_code& ec, Start&& start) {
  if (c.on_io_thread()) {
    ec = errc::would_deadlock;
    return T{};
  }
  // The completion writes ec and value, then swaps the phase to done (acq_rel); the caller
  // reads them only after seeing done (acquire). A caller that sleeps first says how with a
  // compare-exchange from running, so exactly one of the two sees the other. The callback owns
  // a reference to the state, so signalling after the swap is safe even if the caller has
  // already returned.
  struct state {
    std::atomic<wait_phase> phase{wait_phase::running};
    std::mutex mu;
    std::condition_variable cv;
    std::shared_ptr<caller_wake> wake;  // set before the phase becomes sleeping_watching
    std::error_code ec;
    T value{};
  };
  auto st = std::make_shared<state>();
  unique_function<void(std::error_code, T)> done{[st](std::error_code e, T v) {
    st->ec = e;
    st->value = std::move(v);
    const auto was = st->phase.exchange(wait_phase::done, std::memory_order_acq_rel);
    if (was == wait_phase::sleeping) {
      // The caller holds mu from its compare-exchange until it waits: once we have had it, the
      // caller waits, and is notified after the unlock.
      { std::lock_guard lock{st->mu}; }
      st->cv.notify_one();
    } else if (was == wait_phase::sleeping_watching) {
      st->wake->signal();
    }
  }};
  const transport::link* watched = nullptr;
  if constexpr (std::is_void_v<decltype(start(std::move(done)))>) {
    start(std::move(done));
  } else {
    watched = start(std::move(done));
  }
  if (st->phase.load(std::memory_order_acquire) != wait_phase::done) {
    std::optional<watch_scope> watch;
    if (watched != nullptr) watch.emplace(c.watch_turn(), *watched);
    if (watch && watch->wake()) {
      st->wake = watch->wake();
      c.watched_waits().fetch_add(1, std::memory_order_relaxed);
      const int fd = watch->fd();
      st->wake->wait(st->phase, fd,
                     {&watched->reads_started(), &watched->reads_handled(),
                      [watched, fd] { return watched->bytes_queued(fd); }});
    } else {
      std::unique_lock lock{st->mu};
      auto expected = wait_phase::running;
      if (st->phase.compare_exchange_strong(expected, wait_phase::sleeping, std::memory_order_acq_rel)) {
        st->cv.wait(lock, [&] { return st->phase.load(std::memory_order_acquire) == wait_phase::done; });
      }
    }
  }
  ec = st->ec;
  return std::move(st->value);
}

}  // namespace dlock::detail
