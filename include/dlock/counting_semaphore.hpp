// dlock/counting_semaphore.hpp — Redisson's RSemaphore in C++, for sharing a semaphore with
// Java services that use it.
//
// A counter of permits under `name`: acquire takes, release adds, anyone may release (as with
// std::counting_semaphore). **A process that crashes while holding permits leaks them for
// good**: nothing knows they were taken. Use dlock::leased_semaphore unless Redisson processes
// use the same name as an RSemaphore.
//
//   dlock::counting_semaphore slots{client, "import-slots"};
//   slots.try_set_permits(4);
//   if (slots.try_acquire_for(5s)) { import(); slots.release(); }
//
// What dlock adds to Redisson's: waits are bounded and cancellable (they wake on
// redisson_sc:{name}, whose message is the count available, and re-check at least every
// config::wait_recheck), and an attempt is exact: a resend after a lost reply takes nothing
// more, and an abandoned attempt (timed out or cancelled while in flight) gives back exactly
// what it took. For that, each acquisition leaves a marker {name}:dlock_taken:<owner> for
// undo_window, which Redisson never reads; a give-back that cannot reach Redis within
// undo_window (a longer outage) leaks what the attempt took, as an RSemaphore would.
// try_set_permits takes 0 to 2^31 - 1; add_permits |n| < 2^31 (Redisson's ints).
// Layout (Redisson's): the counter `name`; channel redisson_sc:{name}.
// Errors as dlock::mutex's (error.hpp); errc::invalid_argument also for 0 permits or more than
// leased_semaphore::max_permits. try_acquire* return false, not an error, when too few come.
// Thread safety: any number of threads at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <stop_token>
#include <string>
#include <system_error>

#include "dlock/detail/sync_base.hpp"

namespace dlock {

class counting_semaphore : private detail::sync_base {
 public:
  // How long an acquisition's marker lasts (resends and give-backs happen within it).
  static constexpr std::chrono::milliseconds undo_window{30000};

  counting_semaphore(client& c, std::string name);
  using sync_base::name;

  // Waits as long as it takes for `n` permits.
  void acquire(std::uint32_t n = 1);
  void acquire(std::uint32_t n, std::error_code& ec);
  // Until acquired or `stop` is requested (then asio::error::operation_aborted).
  void acquire(std::stop_token stop, std::uint32_t n = 1);
  void acquire(std::stop_token stop, std::uint32_t n, std::error_code& ec);
  bool try_acquire(std::uint32_t n = 1);
  bool try_acquire(std::uint32_t n, std::error_code& ec);
  template <class Rep, class Period>
  bool try_acquire_for(const std::chrono::duration<Rep, Period>& wait, std::uint32_t n = 1) {
    return take_throwing({n, detail::lock_base::to_ms(wait), {}});
  }
  template <class Rep, class Period>
  bool try_acquire_for(const std::chrono::duration<Rep, Period>& wait, std::uint32_t n,
                       std::error_code& ec) {
    return take({n, detail::lock_base::to_ms(wait), {}}, ec);
  }
  template <class Clock, class Duration>
  bool try_acquire_until(const std::chrono::time_point<Clock, Duration>& until,
                         std::uint32_t n = 1) {
    return try_acquire_for(until - Clock::now(), n);
  }
  template <class Clock, class Duration>
  bool try_acquire_until(const std::chrono::time_point<Clock, Duration>& until, std::uint32_t n,
                         std::error_code& ec) {
    return try_acquire_for(until - Clock::now(), n, ec);
  }
  // Completion signature void(std::error_code); errc::timeout when none came in time;
  // cancellation as leased_semaphore's.
  template <asio::completion_token_for<void(std::error_code)> Token>
  auto async_acquire(std::uint32_t n, Token&& token) {
    return initiate_void({n, {}, {}}, std::forward<Token>(token));
  }
  template <asio::completion_token_for<void(std::error_code)> Token>
  auto async_acquire_for(milliseconds wait, std::uint32_t n, Token&& token) {
    return initiate_void({n, wait, {}}, std::forward<Token>(token));
  }

  // Adds `n` permits (any process may) and wakes that many waiters. Not idempotent (as
  // Redisson's): after a connection error it may or may not have been applied; calling again
  // may add n twice.
  void release(std::uint32_t n = 1);
  void release(std::uint32_t n, std::error_code& ec);
  std::int64_t available();
  std::int64_t available(std::error_code& ec);
  bool try_set_permits(std::int64_t n);
  bool try_set_permits(std::int64_t n, std::error_code& ec);
  void add_permits(std::int64_t n);
  void add_permits(std::int64_t n, std::error_code& ec);

 private:
  bool take(const request& r, std::error_code& ec, std::stop_token stop = {});
  bool take_throwing(const request& r);
  template <class Token>
  auto initiate_void(request r, Token&& token) {
    return initiate<void(std::error_code)>(
        r, std::forward<Token>(token),
        [](detail::completion<> done, std::error_code ec, hold_ptr) { done(ec); });
  }
};

}  // namespace dlock
