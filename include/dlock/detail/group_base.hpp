// The Lockable / TimedLockable / async machinery that multi_lock and red_lock share. Not used
// directly: see multi_lock.hpp and red_lock.hpp for what they guarantee.
#pragma once

#include <asio/associated_cancellation_slot.hpp>
#include <asio/async_result.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <system_error>
#include <vector>

#include "dlock/detail/completion.hpp"
#include "dlock/detail/lock_base.hpp"
#include "dlock/multi_lease.hpp"

namespace dlock::detail {

// One member: a lock name on a client.
struct group_member {
  std::shared_ptr<client_impl> client;
  std::string name;
};

class group_base {
 public:
  using milliseconds = std::chrono::milliseconds;

  // Waits as long as it takes. Without a lease: the watchdog lease, renewed while held.
  void lock();
  void lock(std::error_code& ec);
  void lock(milliseconds lease);
  void lock(milliseconds lease, std::error_code& ec);
  // Waits until acquired, or until `stop` is requested (then asio::error::operation_aborted).
  void lock(std::stop_token stop);
  void lock(std::stop_token stop, std::error_code& ec);
  // One round.
  bool try_lock();
  bool try_lock(std::error_code& ec);
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& wait) {
    return try_acquire_throwing(lock_base::to_ms(wait), std::nullopt);
  }
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& wait, std::error_code& ec) {
    return try_acquire(lock_base::to_ms(wait), std::nullopt, ec);
  }
  template <class Rep, class Period, class Rep2, class Period2>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& wait,
                    const std::chrono::duration<Rep2, Period2>& lease) {
    return try_acquire_throwing(lock_base::to_ms(wait), lock_base::to_ms(lease));
  }
  template <class Rep, class Period, class Rep2, class Period2>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& wait,
                    const std::chrono::duration<Rep2, Period2>& lease, std::error_code& ec) {
    return try_acquire(lock_base::to_ms(wait), lock_base::to_ms(lease), ec);
  }
  template <class Clock, class Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration>& until) {
    return try_lock_for(until - Clock::now());
  }
  template <class Clock, class Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration>& until, std::error_code& ec) {
    return try_lock_for(until - Clock::now(), ec);
  }
  // Releases one hold of the calling thread (the last one releases every member). Throws only
  // when the thread holds nothing (as lock_base::unlock()); unlock(ec) says what happened.
  void unlock();
  void unlock(std::error_code& ec);

  // The calling thread's hold (local): see multi_lease for each.
  std::vector<std::uint64_t> fencing_tokens() const;
  std::uint64_t fencing_token() const;
  std::stop_token lease_lost() const;
  milliseconds lease_time_left() const;

  // Lease-owned acquisition; completion signature void(std::error_code, dlock::multi_lease).
  // errc::timeout when not acquired in time. Cancellation: every type, through the completion
  // token's cancellation slot; what a round in flight took is released in the background.
  template <asio::completion_token_for<void(std::error_code, multi_lease)> Token>
  auto async_lock(Token&& token) {
    return initiate(std::nullopt, std::nullopt, std::forward<Token>(token));
  }
  template <asio::completion_token_for<void(std::error_code, multi_lease)> Token>
  auto async_lock(milliseconds lease_time, Token&& token) {
    return initiate(std::nullopt, lease_time, std::forward<Token>(token));
  }
  template <asio::completion_token_for<void(std::error_code, multi_lease)> Token>
  auto async_try_lock(Token&& token) {
    return initiate(milliseconds{0}, std::nullopt, std::forward<Token>(token));
  }
  template <asio::completion_token_for<void(std::error_code, multi_lease)> Token>
  auto async_lock_for(milliseconds wait, Token&& token) {
    return initiate(wait, std::nullopt, std::forward<Token>(token));
  }
  template <asio::completion_token_for<void(std::error_code, multi_lease)> Token>
  auto async_lock_for(milliseconds wait, milliseconds lease_time, Token&& token) {
    return initiate(wait, lease_time, std::forward<Token>(token));
  }

  group_base(const group_base&) = delete;
  group_base& operator=(const group_base&) = delete;
  ~group_base();

 protected:
  // `needed`: how many members must be held (all for multi_lock, a majority for red_lock);
  // `floor`: write the largest token back to the members (red_lock).
  group_base(std::vector<group_member> members, std::size_t needed, bool floor);

 private:
  template <class Token>
  auto initiate(std::optional<milliseconds> wait, std::optional<milliseconds> lease_time,
                Token&& token) {
    return asio::async_initiate<Token, void(std::error_code, multi_lease)>(
        [this](auto handler, std::optional<milliseconds> w, std::optional<milliseconds> l) {
          auto slot = asio::get_associated_cancellation_slot(handler);
          auto cancel = start(w, l, erase_handler<multi_lease>(std::move(handler)));
          if (slot.is_connected() && cancel) {
            slot.assign([cancel = std::move(cancel)](asio::cancellation_type) { cancel(); });
          }
        },
        token, wait, lease_time);
  }
  // Returns what cancels it (empty when it completed at once).
  std::function<void()> start(std::optional<milliseconds> wait,
                              std::optional<milliseconds> lease_time, completion<multi_lease> done);
  bool try_acquire(std::optional<milliseconds> wait, std::optional<milliseconds> lease_time,
                   std::error_code& ec, std::stop_token stop = {});
  bool try_acquire_throwing(std::optional<milliseconds> wait,
                            std::optional<milliseconds> lease_time);
  const multi_lease* own() const;  // the calling thread's, or null (mu_ held)

  std::vector<group_member> members_;
  std::size_t needed_;
  bool floor_;
  std::error_code invalid_;  // members that cannot be locked together (reported by every call)
  struct thread_hold {
    multi_lease lease;
    std::uint32_t count = 0;
  };
  mutable std::mutex mu_;
  std::map<std::uint64_t, thread_hold> held_;  // by thread number
};

}  // namespace dlock::detail
