// dlock/shared_mutex.hpp — Redisson's RReadWriteLock in C++: many readers or one writer.
//
// SharedTimedLockable: lock/try_lock/try_lock_for/try_lock_until/unlock take the write side,
// lock_shared/try_lock_shared/try_lock_shared_for/try_lock_shared_until/unlock_shared the read
// side, so std::unique_lock and std::shared_lock work. Each side has the rest of dlock::mutex's
// API (leases, stop_token waits, fencing tokens, lease_lost, async forms with cancellation):
// through write_side() and read_side(), or the async_*/async_*_shared forwarders below.
//
//   dlock::shared_mutex rw{client, "catalog"};
//   { std::shared_lock r{rw}; read(rw.read_side().fencing_token()); }
//   { std::unique_lock w{rw}; write(rw.write_side().fencing_token()); }
//
// Rules:
// - Both sides are reentrant per owner (a thread, or a lease).
// - A writer may take read holds (a downgrade: lock, lock_shared, unlock keeps the read hold).
// - A reader asking for the write side is refused at once with errc::upgrade_refused (Redisson
//   deadlocks there): release the read holds first.
// - Writers are not starved: while a writer waits, new readers (owners without a read hold)
//   queue behind it; readers already holding may re-enter. A waiting writer announces itself in
//   the sorted set {name}:dlock_writers (server-time deadlines, renewed by its attempts, purged
//   config::wait_recheck + 2 s after a dead writer's last one). Redisson's readers do not look
//   at it: in a mixed fleet they can still starve a writer, as among Redisson processes.
// - The watchdog renews only this owner's read holds (its timeout keys and the hash), never
//   another reader's: a reader killed with -9 expires with its lease.
// - Every first acquisition on either side gets a fencing token.
// - Kinds do not mix: the read-write hash has a `mode` field. A mutex or fair_mutex finding it,
//   or a shared_mutex finding a lock hash without it, fails with errc::wrong_kind at once.
// Layout (Redisson's): the hash `name` with `mode` = read|write, readers' fields `<owner>` ->
// count, the writer's `<owner>:write` -> count; one key {name}:<owner>:rwlock_timeout:<n> per
// read hold, with its lease; channel redisson_rwlock:{name} (`0`: a read unlock freed the lock,
// `1`: a write unlock did).
#pragma once

#include <chrono>
#include <string>

#include "dlock/detail/lock_base.hpp"

namespace dlock {

class shared_mutex {
 public:
  using milliseconds = std::chrono::milliseconds;

  shared_mutex(client& c, const std::string& name)
      : write_{c, name, detail::lock_kind::write}, read_{c, name, detail::lock_kind::read} {}

  const std::string& name() const noexcept { return write_.name(); }

  // The write side (exclusive).
  void lock() { write_.lock(); }
  void lock(std::error_code& ec) { write_.lock(ec); }
  bool try_lock() { return write_.try_lock(); }
  bool try_lock(std::error_code& ec) { return write_.try_lock(ec); }
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& wait) {
    return write_.try_lock_for(wait);
  }
  template <class Clock, class Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration>& until) {
    return write_.try_lock_until(until);
  }
  void unlock() { write_.unlock(); }
  void unlock(std::error_code& ec) { write_.unlock(ec); }

  // The read side (shared).
  void lock_shared() { read_.lock(); }
  void lock_shared(std::error_code& ec) { read_.lock(ec); }
  bool try_lock_shared() { return read_.try_lock(); }
  bool try_lock_shared(std::error_code& ec) { return read_.try_lock(ec); }
  template <class Rep, class Period>
  bool try_lock_shared_for(const std::chrono::duration<Rep, Period>& wait) {
    return read_.try_lock_for(wait);
  }
  template <class Clock, class Duration>
  bool try_lock_shared_until(const std::chrono::time_point<Clock, Duration>& until) {
    return read_.try_lock_until(until);
  }
  void unlock_shared() { read_.unlock(); }
  void unlock_shared(std::error_code& ec) { read_.unlock(ec); }

  // Lease-owned acquisitions (completion signature void(std::error_code, dlock::lease)); see
  // dlock::mutex::async_lock* for cancellation and errors.
  template <class Token>
  auto async_lock(Token&& token) {
    return write_.async_lock(std::forward<Token>(token));
  }
  template <class Token>
  auto async_lock_for(milliseconds wait, Token&& token) {
    return write_.async_lock_for(wait, std::forward<Token>(token));
  }
  template <class Token>
  auto async_lock_shared(Token&& token) {
    return read_.async_lock(std::forward<Token>(token));
  }
  template <class Token>
  auto async_lock_shared_for(milliseconds wait, Token&& token) {
    return read_.async_lock_for(wait, std::forward<Token>(token));
  }

  // Everything else of each side: leases, stop_token waits, fencing_token(), lease_lost(),
  // lease_time_left(), hold_count(), is_held_by_current_thread(), async forms with a lease.
  detail::lock_base& write_side() noexcept { return write_; }
  detail::lock_base& read_side() noexcept { return read_; }
  const detail::lock_base& write_side() const noexcept { return write_; }
  const detail::lock_base& read_side() const noexcept { return read_; }

 private:
  detail::lock_base write_, read_;
};

}  // namespace dlock
