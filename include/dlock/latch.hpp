// dlock/latch.hpp — Redisson's RCountDownLatch in C++: processes wait until a count reaches 0.
//
//   dlock::latch loaded{client, "batch:shards-loaded"};
//   loaded.try_set_count(5);               // the coordinator, once
//   loaded.count_down();                   // each of the 5 shard loaders, when done
//   if (loaded.wait_for(10min)) start();   // whoever starts the batch
//
// The names of std::latch (count_down, try_wait, wait, arrive_and_wait) plus Redisson's
// try_set_count and count, with bounded and cancellable waits and async forms.
// - A latch whose key is absent reads as count 0, i.e. open: wait() before try_set_count()
//   returns at once. Set the count before any waiter may look.
// - Waiters wake on `0` on redisson_countdownlatch__channel__{name}, when the counter's key
//   expires (if it has an expiry), and re-check at least every config::wait_recheck: a lost
//   message costs at most that (Redisson's await() then waits forever).
// - count_down(n) that takes the count to 0 or below deletes the key and publishes `0`, also
//   when it goes past 0 (Redisson publishes only at exactly 0, so its waiters would miss it).
// Layout (Redisson's): the counter `name`; the channel above (always the raw name in braces: for
// a name with a hash tag of its own it is in another cluster slot, so such names are refused
// with errc::invalid_argument in a Redis Cluster).
// Errors as dlock::mutex's (error.hpp). Thread safety: any number of threads at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <stop_token>
#include <string>
#include <system_error>

#include "dlock/detail/sync_base.hpp"

namespace dlock {

class latch : private detail::sync_base {
 public:
  latch(client& c, std::string name);
  using sync_base::name;

  // Sets the count to `n` (1 to 2^31 - 1) if the latch has none: true if it did.
  bool try_set_count(std::int64_t n);
  bool try_set_count(std::int64_t n, std::error_code& ec);
  // The count now (0 when open or never set).
  std::int64_t count();
  std::int64_t count(std::error_code& ec);
  // Takes `n` (1 to 2^31 - 1) from the count; opens the latch at 0 or below. Not idempotent (as
  // Redisson's countDown): after a connection error it may or may not have been applied, and
  // calling again may count twice — read count() first where that matters.
  void count_down(std::int64_t n = 1);
  void count_down(std::int64_t n, std::error_code& ec);
  // True if the count is 0 (one round trip).
  bool try_wait();
  bool try_wait(std::error_code& ec);
  // Waits until the count is 0.
  void wait();
  void wait(std::error_code& ec);
  void wait(std::stop_token stop);  // asio::error::operation_aborted when stopped
  void wait(std::stop_token stop, std::error_code& ec);
  // count_down(n), then wait().
  void arrive_and_wait(std::int64_t n = 1);
  void arrive_and_wait(std::int64_t n, std::error_code& ec);
  // False (not an error) when still closed at the end of the wait.
  template <class Rep, class Period>
  bool wait_for(const std::chrono::duration<Rep, Period>& wait) {
    return wait_throwing(detail::lock_base::to_ms(wait));
  }
  template <class Rep, class Period>
  bool wait_for(const std::chrono::duration<Rep, Period>& wait, std::error_code& ec) {
    return wait_ms(detail::lock_base::to_ms(wait), ec);
  }
  template <class Clock, class Duration>
  bool wait_until(const std::chrono::time_point<Clock, Duration>& until) {
    return wait_for(until - Clock::now());
  }
  template <class Clock, class Duration>
  bool wait_until(const std::chrono::time_point<Clock, Duration>& until, std::error_code& ec) {
    return wait_for(until - Clock::now(), ec);
  }
  // Completion signature void(std::error_code): {} once open, errc::timeout when still closed
  // after `wait`; cancellation completes at once with asio::error::operation_aborted.
  template <asio::completion_token_for<void(std::error_code)> Token>
  auto async_wait(Token&& token) {
    return initiate_void({1, {}, {}}, std::forward<Token>(token));
  }
  template <asio::completion_token_for<void(std::error_code)> Token>
  auto async_wait_for(milliseconds wait, Token&& token) {
    return initiate_void({1, wait, {}}, std::forward<Token>(token));
  }

 private:
  bool wait_ms(std::optional<milliseconds> wait, std::error_code& ec, std::stop_token stop = {});
  bool wait_throwing(std::optional<milliseconds> wait);
  template <class Token>
  auto initiate_void(request r, Token&& token) {
    return initiate<void(std::error_code)>(
        r, std::forward<Token>(token),
        [](detail::completion<> done, std::error_code ec, hold_ptr) { done(ec); });
  }
};

}  // namespace dlock
