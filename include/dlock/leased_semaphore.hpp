// dlock/leased_semaphore.hpp — Redisson's RPermitExpirableSemaphore in C++: at most N holders
// at a time across processes and hosts, and permits that come back when a holder dies.
//
// The default semaphore: every permit is leased. Without an explicit lease the watchdog renews
// it while the permit object lives (config::watchdog_lease, every third of it), as it renews a
// lock; with one it ends when the lease does. A holder that crashes, hangs or loses Redis stops
// renewing, and its permits return when their lease ends — reclaimed on the server, by the
// server's TIME, by the next call of any client (dlock's or Redisson's) on the semaphore.
//
//   dlock::leased_semaphore reports{client, "report-jobs"};
//   reports.try_set_permits(3);                        // once: 3 permits if it has none yet
//   if (auto p = reports.try_acquire_for(10s)) {       // a dlock::permit: RAII
//     run_report(p.lost());                            // stop when the lease may be lost
//   }                                                  // released here
//
// Guarantees. While a permit's lease is trusted (its local deadline, as a lock's: the last
// confirmed renewal's send time + lease - drift), at most N permits of the semaphore are held,
// N being the permits set (given Redis keeps its data, as for locks). When trust ends early (a
// renewal finds a permit reclaimed, or none is confirmed in time) permit::lost() is requested.
// Releasing a permit whose lease ended returns errc::lease_lost and never adds a permit that
// was already reclaimed. Permits carry no fencing token (N holders share the resource): a
// protected resource should check time_left() before each write, or bound its own work by the
// lease (docs/semaphores.md).
// Waiting. Waiters wake on redisson_sc:{name} (its message is the count available: that many
// waiters of a process wake), at the nearest leased permit's deadline (when it may be
// reclaimed), and at least every config::wait_recheck: no wait is unbounded, a lost message
// costs latency. Not fair: whoever tries first after a release wins.
// Layout (Redisson's): the counter `name` (available permits), the sorted set {name}:timeout of
// permit id (16 random bytes) -> deadline in ms (dlock: the server's TIME; Redisson: its
// client clock, so Redisson hosts' clocks must agree with the server's), channel
// redisson_sc:{name}. Errors as dlock::mutex's (error.hpp); errc::invalid_argument also for 0
// permits or more than max_permits per acquisition. Thread safety: one leased_semaphore object may
// be used from any number of threads at once; a permit is like a lease (lease.hpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <stop_token>
#include <string>
#include <system_error>
#include <vector>

#include "dlock/detail/sync_base.hpp"
#include "dlock/lease.hpp"

namespace dlock {

// Permits taken by one acquisition of a leased_semaphore, released when destroyed (in the
// background, as a lease's unlock). Move-only.
class permit {
 public:
  permit() noexcept = default;

  // True while it holds its permits: acquired and not yet released.
  bool owns() const noexcept { return lease_.owns(); }
  explicit operator bool() const noexcept { return owns(); }
  const std::string& name() const noexcept { return lease_.name(); }
  // The permits it holds (0 when empty) and their ids (32 hex characters each, as Redisson
  // shows them).
  std::uint32_t count() const noexcept;
  std::vector<std::string> ids() const;
  // As lease::time_left, lease::replicated, lease::lost and lease::on_lost.
  std::chrono::milliseconds time_left() const noexcept { return lease_.time_left(); }
  bool replicated() const noexcept { return lease_.replicated(); }
  std::stop_token lost() const noexcept { return lease_.lost(); }
  void on_lost(std::function<void()> fn) { lease_.on_lost(std::move(fn)); }

  // Returns the permits. Errors: errc::lease_lost (their lease ended first; whatever was still
  // leased went back, nothing was counted twice), errc::not_owner (empty), connection errors
  // (calling again is safe).
  void release() { lease_.unlock(); }
  void release(std::error_code& ec) { lease_.unlock(ec); }
  template <asio::completion_token_for<void(std::error_code)> Token>
  auto async_release(Token&& token) {
    return lease_.async_unlock(std::forward<Token>(token));
  }

 private:
  friend class leased_semaphore;
  explicit permit(lease l) noexcept : lease_{std::move(l)} {}
  const detail::hold_state* hold() const noexcept;
  lease lease_;
};

class leased_semaphore : private detail::sync_base {
 public:
  // The most permits one acquisition may take.
  static constexpr std::uint32_t max_permits = 1000;

  leased_semaphore(client& c, std::string name);
  using sync_base::name;

  // Waits as long as it takes (re-checking every config::wait_recheck) for `n` permits. Without
  // a lease: the watchdog lease, renewed while the permit lives.
  permit acquire(std::uint32_t n = 1);
  permit acquire(std::uint32_t n, std::error_code& ec);
  permit acquire(std::uint32_t n, milliseconds lease);
  permit acquire(std::uint32_t n, milliseconds lease, std::error_code& ec);
  // Until acquired or `stop` is requested (then asio::error::operation_aborted).
  permit acquire(std::stop_token stop, std::uint32_t n = 1);
  permit acquire(std::stop_token stop, std::uint32_t n, std::error_code& ec);

  // One attempt; an empty permit when too few are available.
  permit try_acquire(std::uint32_t n = 1);
  permit try_acquire(std::uint32_t n, std::error_code& ec);
  // Waits up to `wait`; an empty permit (not an error) when none came in time.
  template <class Rep, class Period>
  permit try_acquire_for(const std::chrono::duration<Rep, Period>& wait, std::uint32_t n = 1) {
    return get_throwing({n, detail::lock_base::to_ms(wait), {}});
  }
  template <class Rep, class Period>
  permit try_acquire_for(const std::chrono::duration<Rep, Period>& wait, std::uint32_t n,
                         std::error_code& ec) {
    return get({n, detail::lock_base::to_ms(wait), {}}, ec);
  }
  template <class Rep, class Period>
  permit try_acquire_for(const std::chrono::duration<Rep, Period>& wait, std::uint32_t n,
                         milliseconds lease) {
    return get_throwing({n, detail::lock_base::to_ms(wait), lease});
  }
  template <class Rep, class Period>
  permit try_acquire_for(const std::chrono::duration<Rep, Period>& wait, std::uint32_t n,
                         milliseconds lease, std::error_code& ec) {
    return get({n, detail::lock_base::to_ms(wait), lease}, ec);
  }
  template <class Clock, class Duration>
  permit try_acquire_until(const std::chrono::time_point<Clock, Duration>& until,
                           std::uint32_t n = 1) {
    return try_acquire_for(until - Clock::now(), n);
  }
  template <class Clock, class Duration>
  permit try_acquire_until(const std::chrono::time_point<Clock, Duration>& until, std::uint32_t n,
                           std::error_code& ec) {
    return try_acquire_for(until - Clock::now(), n, ec);
  }

  // Completion signature void(std::error_code, dlock::permit); errc::timeout when none came in
  // time. Cancellation as mutex::async_lock's: completes at once with
  // asio::error::operation_aborted; an attempt in flight is given back in the background.
  template <asio::completion_token_for<void(std::error_code, permit)> Token>
  auto async_acquire(std::uint32_t n, Token&& token) {
    return initiate_permit({n, {}, {}}, std::forward<Token>(token));
  }
  template <asio::completion_token_for<void(std::error_code, permit)> Token>
  auto async_acquire(std::uint32_t n, milliseconds lease, Token&& token) {
    return initiate_permit({n, {}, lease}, std::forward<Token>(token));
  }
  template <asio::completion_token_for<void(std::error_code, permit)> Token>
  auto async_try_acquire(std::uint32_t n, Token&& token) {
    return initiate_permit({n, milliseconds{0}, {}}, std::forward<Token>(token));
  }
  template <asio::completion_token_for<void(std::error_code, permit)> Token>
  auto async_acquire_for(milliseconds wait, std::uint32_t n, Token&& token) {
    return initiate_permit({n, wait, {}}, std::forward<Token>(token));
  }
  template <asio::completion_token_for<void(std::error_code, permit)> Token>
  auto async_acquire_for(milliseconds wait, std::uint32_t n, milliseconds lease, Token&& token) {
    return initiate_permit({n, wait, lease}, std::forward<Token>(token));
  }

  // The permits available now, after reclaiming expired ones (0 when none were ever set).
  std::int64_t available();
  std::int64_t available(std::error_code& ec);
  // The permits leased now (by anyone), after reclaiming expired ones.
  std::int64_t leased();
  std::int64_t leased(std::error_code& ec);
  // Sets the available permits to `n` (0 to 2^31 - 1, Redisson's int) if the semaphore has no
  // counter yet: true if it did.
  bool try_set_permits(std::int64_t n);
  bool try_set_permits(std::int64_t n, std::error_code& ec);
  // Adds `n` (negative: takes away; |n| < 2^31) to the available permits, waking waiters when
  // positive. Not idempotent: after a connection error it may or may not have been applied, so
  // read available() before adding again.
  void add_permits(std::int64_t n);
  void add_permits(std::int64_t n, std::error_code& ec);

 private:
  permit get(const request& r, std::error_code& ec, std::stop_token stop = {});
  permit get_throwing(const request& r);
  static permit make_permit(std::weak_ptr<detail::client_impl> c, hold_ptr h);
  template <class Token>
  auto initiate_permit(request r, Token&& token) {
    return initiate<void(std::error_code, permit)>(
        r, std::forward<Token>(token),
        [weak = std::weak_ptr<detail::client_impl>{client_}](completion<permit> done,
                                                             std::error_code ec, hold_ptr h) {
          if (ec) return done(ec, permit{});
          done({}, make_permit(weak, std::move(h)));
        });
  }
  template <class... T>
  using completion = detail::completion<T...>;
};

}  // namespace dlock
