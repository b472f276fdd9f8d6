// The Lockable / TimedLockable / async machinery that dlock's exclusive locks share (mutex,
// fair_mutex, and each side of shared_mutex). Not used directly: see mutex.hpp for what every
// member does and guarantees; the kinds differ only in their Redis layout and scripts.
#pragma once

#include <asio/associated_cancellation_slot.hpp>
#include <asio/async_result.hpp>
#include <asio/cancellation_type.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <system_error>

#include "dlock/client.hpp"
#include "dlock/detail/completion.hpp"
#include "dlock/lease.hpp"

namespace dlock::detail {

// Which Redisson layout a hold lives in (src/sync/kinds.cpp: its scripts and keys).
enum class lock_kind : std::uint8_t {
  mutex,  // RLock: the hash `name`, owner -> count
  fair,  // RFairLock: the same hash, plus redisson_lock_queue:{name} / redisson_lock_timeout:{name}
  read,  // RReadWriteLock's read side: `mode`=read, owner -> count, one timeout key per hold
  write,  // RReadWriteLock's write side: `mode`=write, `<owner>:write` -> count
  // The synchronizers that hold no lock hash (their acquisitions go through the same machinery):
  permits,   // leased_semaphore (RPermitExpirableSemaphore): counter `name`, ids in {name}:timeout
  counting,  // counting_semaphore (RSemaphore): counter `name`; no lease, nothing renewed
  latch,     // latch (RCountDownLatch): counter `name`; an "acquisition" is the latch found open
};

class lock_base {
 public:
  using milliseconds = std::chrono::milliseconds;

  const std::string& name() const noexcept { return name_; }

  // Waits as long as it takes. Without a lease: the watchdog lease, renewed while held.
  void lock();
  void lock(std::error_code& ec);
  void lock(milliseconds lease);
  void lock(milliseconds lease, std::error_code& ec);

  // Waits until acquired, or until `stop` is requested (Redisson's lockInterruptibly): then it
  // fails with asio::error::operation_aborted at once, and whatever an attempt in flight may
  // have taken is given back in the background.
  void lock(std::stop_token stop);
  void lock(std::stop_token stop, std::error_code& ec);

  // One attempt.
  bool try_lock();
  bool try_lock(std::error_code& ec);

  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& wait) {
    return try_acquire_throwing(to_ms(wait), std::nullopt);
  }
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& wait, std::error_code& ec) {
    return try_acquire(to_ms(wait), std::nullopt, ec);
  }
  template <class Rep, class Period, class Rep2, class Period2>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& wait,
                    const std::chrono::duration<Rep2, Period2>& lease) {
    return try_acquire_throwing(to_ms(wait), to_ms(lease));
  }
  template <class Rep, class Period, class Rep2, class Period2>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& wait,
                    const std::chrono::duration<Rep2, Period2>& lease, std::error_code& ec) {
    return try_acquire(to_ms(wait), to_ms(lease), ec);
  }
  template <class Clock, class Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration>& until) {
    return try_lock_for(until - Clock::now());
  }
  template <class Clock, class Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration>& until, std::error_code& ec) {
    return try_lock_for(until - Clock::now(), ec);
  }

  // Releases one hold of the calling thread. The throwing form throws only when the thread holds
  // nothing (errc::not_owner), so guards may call it from destructors: a lost lease was reported
  // already (lease_lost(), config::on_event, metrics), and a last release that fails is left to
  // the lease on Redis. unlock(ec) says what happened.
  void unlock();
  void unlock(std::error_code& ec);

  // Deletes the lock whoever holds it and wakes its waiters; true if it was held.
  bool force_unlock();
  bool force_unlock(std::error_code& ec);
  // Asks Redis.
  bool is_locked();
  bool is_locked(std::error_code& ec);
  bool is_held_by_current_thread();
  bool is_held_by_current_thread(std::error_code& ec);
  std::uint32_t hold_count();  // the calling thread's holds, as Redis counts them
  std::uint32_t hold_count(std::error_code& ec);
  // PTTL of the lock: milliseconds left, -2 when free, -1 when held without expiry.
  milliseconds remaining_lease();
  milliseconds remaining_lease(std::error_code& ec);

  // The calling thread's hold (local; no round trip): its fencing token (0 if none) and the
  // stop_token requested when its lease may be lost (never requested if it holds nothing).
  std::uint64_t fencing_token() const;
  std::stop_token lease_lost() const;
  // Time left until the calling thread's hold reaches its local deadline (see
  // lease::time_left); zero if it holds nothing or its lease is lost.
  milliseconds lease_time_left() const;
  // Whether the calling thread's hold was acknowledged by the replicas config::wait_replicas
  // asks for (see lease::replicated); false if it holds nothing.
  bool lease_replicated() const;

  // Lease-owned acquisition; completion signature void(std::error_code, dlock::lease).
  // errc::timeout when not acquired in time.
  // Cancellation: per-operation cancellation of every type (terminal, partial, total) through
  // the completion token's cancellation slot, e.g. `async_lock(use_awaitable) ||
  // timer.async_wait(use_awaitable)`: the operation completes at once with
  // asio::error::operation_aborted, holding nothing; an attempt still in flight, or a hand-off
  // on its way, is given back in the background.
  template <asio::completion_token_for<void(std::error_code, lease)> Token>
  auto async_lock(Token&& token) {
    return initiate(std::nullopt, std::nullopt, std::forward<Token>(token));
  }
  template <asio::completion_token_for<void(std::error_code, lease)> Token>
  auto async_lock(milliseconds lease_time, Token&& token) {
    return initiate(std::nullopt, lease_time, std::forward<Token>(token));
  }
  template <asio::completion_token_for<void(std::error_code, lease)> Token>
  auto async_try_lock(Token&& token) {
    return initiate(milliseconds{0}, std::nullopt, std::forward<Token>(token));
  }
  template <asio::completion_token_for<void(std::error_code, lease)> Token>
  auto async_lock_for(milliseconds wait, Token&& token) {
    return initiate(wait, std::nullopt, std::forward<Token>(token));
  }
  template <asio::completion_token_for<void(std::error_code, lease)> Token>
  auto async_lock_for(milliseconds wait, milliseconds lease_time, Token&& token) {
    return initiate(wait, lease_time, std::forward<Token>(token));
  }

  // For the wrappers (mutex, fair_mutex, shared_mutex), not for users.
  lock_base(client& c, std::string name, lock_kind kind);
  // The calling thread's field in the lock hash (`<client-uuid>:<thread>`, `...:write` for a
  // write hold).
  std::string own_field() const;
  std::shared_ptr<client_impl> client_;
  std::string name_;
  lock_kind kind_;

  template <class Rep, class Period>
  static milliseconds to_ms(const std::chrono::duration<Rep, Period>& d) {
    // Saturating: a duration beyond what milliseconds can hold (hours::max()...) would
    // overflow in the conversion; as a wait it means "forever", as a lease it is refused.
    // A floating-point NaN counts as the most negative: one try as a wait, refused as a lease.
    using limit = std::chrono::duration<long double, std::milli>;
    const limit x = d;
    if (x.count() != x.count()) return milliseconds::min();
    if (x >= limit{static_cast<long double>(milliseconds::max().count())})
      return milliseconds::max();
    if (x <= limit{static_cast<long double>(milliseconds::min().count())})
      return milliseconds::min();
    return std::chrono::ceil<milliseconds>(d);
  }
  template <class Token>
  auto initiate(std::optional<milliseconds> wait, std::optional<milliseconds> lease_time,
                Token&& token) {
    return asio::async_initiate<Token, void(std::error_code, lease)>(
        [this](auto handler, std::optional<milliseconds> w, std::optional<milliseconds> l) {
          auto slot = asio::get_associated_cancellation_slot(handler);
          auto cancel = start_lease(w, l, erase_handler<lease>(std::move(handler)));
          if (slot.is_connected() && cancel) {
            slot.assign([cancel = std::move(cancel)](asio::cancellation_type) { cancel(); });
          }
        },
        token, wait, lease_time);
  }
  std::shared_ptr<hold_state> own_hold() const;  // the calling thread's hold, or null
  // Returns what cancels it (empty when it completed at once).
  std::function<void()> start_lease(std::optional<milliseconds> wait,
                                    std::optional<milliseconds> lease_time, completion<lease> done);
  bool try_acquire(std::optional<milliseconds> wait, std::optional<milliseconds> lease_time,
                   std::error_code& ec, std::stop_token stop = {});
  bool try_acquire_throwing(std::optional<milliseconds> wait,
                            std::optional<milliseconds> lease_time);
};

}  // namespace dlock::detail
