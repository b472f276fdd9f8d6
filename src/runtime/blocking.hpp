// The blocking bridge: runs an async operation and waits for its completion on the calling
// thread. Refuses (errc::would_deadlock) on the client's I/O thread, where waiting would stop
// the very thread that must complete the operation.
//
// How it waits: the completion sets an atomic flag. A caller that is the only blocking call in
// progress in the process first spins on the flag (with the CPU's pause instruction) for about
// as long as recent operations took to complete, capped at spin_cap; most replies land within
// that time, and the caller then never sleeps, so the completion costs no futex wake-up and no
// context switch. Otherwise, or once the spin is over, it sleeps in std::atomic::wait (a futex),
// and the completion wakes it only if it sleeps. With many blocking callers at once (threads
// sharing a client) nobody spins: their CPU is better spent on the I/O thread and on Redis.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <system_error>
#include <thread>

#include "dlock/detail/unique_function.hpp"
#include "dlock/error.hpp"
#include "runtime/client_impl.hpp"

namespace dlock::detail {

namespace blocking {

using spin_clock = std::chrono::steady_clock;

// The longest a caller spins before sleeping: about two round trips on a local network. An
// operation that usually takes longer (a wait for a held lock) is not spun on at all.
inline constexpr std::chrono::microseconds spin_cap{200};

// Blocking calls in progress in this process, all clients together.
inline std::atomic<int> in_progress{0};
// A moving average (1/8 weight per sample) of how long blocking calls took to complete, in ns.
inline std::atomic<std::int64_t> recent_ns{0};

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#else
  std::this_thread::yield();
#endif
}

// How long to spin now: twice the recent completion time, or nothing if that passes the cap.
inline std::chrono::nanoseconds spin_budget() noexcept {
  const auto recent = std::chrono::nanoseconds{recent_ns.load(std::memory_order_relaxed)};
  if (recent.count() == 0) return spin_cap;  // nothing measured yet: try
  if (recent > spin_cap) return std::chrono::nanoseconds{0};
  return std::min<std::chrono::nanoseconds>(2 * recent, spin_cap);
}

inline void record(std::chrono::nanoseconds took) noexcept {
  const auto old = recent_ns.load(std::memory_order_relaxed);
  const auto now = old == 0 ? took.count() : old + (took.count() - old) / 8;
  recent_ns.store(now, std::memory_order_relaxed);  // a lost update only delays adaptation
}

// Spins until `done` is set or the budget is spent; true when it was set.
inline bool spin_until(const std::atomic<bool>& done, spin_clock::time_point until) noexcept {
  for (;;) {
    for (int i = 0; i < 32; ++i) {
      if (done.load(std::memory_order_acquire)) return true;
      cpu_relax();
    }
    if (spin_clock::now() >= until) return done.load(std::memory_order_acquire);
  }
}

}  // namespace blocking

// `start` receives a completion callback and must arrange for it to be called exactly once.
// Every dlock operation completes by its deadline, so the wait is bounded.
template <class T, class Start>
T run_blocking(client_impl& c, std::error_code& ec, Start&& start) {
  if (c.on_io_thread()) {
    ec = errc::would_deadlock;
    return T{};
  }
  // The completion writes ec and value, then releases `done`; the caller reads them only after
  // acquiring it. The callback owns a reference, so notify_one never touches freed memory.
  struct state {
    std::atomic<bool> done{false};
    std::error_code ec;
    T value{};
  };
  auto st = std::make_shared<state>();
  const bool alone = blocking::in_progress.fetch_add(1, std::memory_order_relaxed) == 0;
  const auto t0 = blocking::spin_clock::now();
  start(unique_function<void(std::error_code, T)>{[st](std::error_code e, T v) {
    st->ec = e;
    st->value = std::move(v);
    st->done.store(true, std::memory_order_release);
    st->done.notify_one();  // no system call unless the caller sleeps
  }});
  bool spun = false;
  if (alone) {
    const auto budget = blocking::spin_budget();
    spun = budget.count() > 0 && blocking::spin_until(st->done, t0 + budget);
  }
  if (!spun) {
    while (!st->done.load(std::memory_order_acquire)) st->done.wait(false, std::memory_order_acquire);
  }
  blocking::in_progress.fetch_sub(1, std::memory_order_relaxed);
  if (alone) blocking::record(blocking::spin_clock::now() - t0);
  ec = st->ec;
  return std::move(st->value);
}

}  // namespace dlock::detail
