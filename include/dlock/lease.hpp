// dlock/lease.hpp — a lock held by a lease rather than by a thread.
//
// A lease comes from mutex::async_lock / async_try_lock / async_lock_for. It is owned by
// `<client-uuid>:<lease-id>`, not by a thread, so it may move between threads and coroutines.
// It carries the lock's fencing token (strictly increasing per lock name) and a stop_token that
// is requested the moment the lease may be gone: a renewal found the hold gone, or none was
// confirmed before `send_time + lease - drift`. Check it before every protected write, and
// pass the fencing token to whatever you write to, so a stale holder is refused.
//
//   auto [ec, lease] = co_await m.async_lock_for(5s, as_tuple(use_awaitable));
//   std::stop_callback stop{lease.lost(), [&] { batch.cancel(); }};
//   co_await run_batch(lease.fencing_token());
//   co_await lease.async_unlock(use_awaitable);
//
// Destroyed (or assigned over) while it holds the lock, a lease sends its own unlock without
// waiting for it. A lease must not outlive its client; if it does, its unlock is skipped (the
// client's shutdown already stopped everything) and the lock expires with its lease.
// Thread safety: fencing_token(), lost() and owns() may be called from any thread; the other
// members from one thread at a time.
#pragma once

#include <asio/async_result.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>
#include <system_error>

#include "dlock/detail/completion.hpp"

namespace dlock {

class leased_semaphore;
class permit;

namespace detail {
class client_impl;
struct hold_state;
class lock_base;
struct lease_access;
}  // namespace detail

class lease {
 public:
  lease() noexcept;
  lease(lease&& other) noexcept;
  lease& operator=(lease&& other) noexcept;
  ~lease();
  lease(const lease&) = delete;
  lease& operator=(const lease&) = delete;

  // True while this lease holds (or believes it holds) its lock: acquired and not yet unlocked.
  bool owns() const noexcept;
  explicit operator bool() const noexcept { return owns(); }

  // The lock's name and this lease's owner field in the lock hash; empty when !owns().
  const std::string& name() const noexcept;
  const std::string& owner() const noexcept;
  // The fencing token of this acquisition; 0 for an empty lease.
  std::uint64_t fencing_token() const noexcept;
  // Time left until the lease's local deadline: the send time of the last acquire or renewal
  // Redis confirmed, plus the lease, minus a drift margin. Computed on the calling thread from
  // the steady clock (no round trip, no wait for the client's I/O thread), so a holder resuming
  // from a pause sees zero at once. Zero for an empty or lost lease. Check it before every
  // protected write; pass fencing_token() along as well.
  std::chrono::milliseconds time_left() const noexcept;
  // False when the acquisition was not acknowledged by config::wait_replicas replicas in time
  // and config::on_shortfall is accept: a failover now could lose the lock. True otherwise
  // (also when no replicas were asked for).
  bool replicated() const noexcept;
  // Requested when the lease may be lost. An empty lease gives a token that is never requested.
  std::stop_token lost() const noexcept;
  // Runs `fn` on the client's I/O thread when the lease is lost (at once if it already is).
  // It must not block.
  void on_lost(std::function<void()> fn);

  // Releases the lock. Errors: errc::lease_lost (it was lost before; nothing of anyone else's
  // was touched), errc::not_owner (empty lease), connection errors (calling again is safe).
  template <asio::completion_token_for<void(std::error_code)> Token>
  auto async_unlock(Token&& token) {
    return asio::async_initiate<Token, void(std::error_code)>(
        [this](auto handler) { start_unlock(detail::erase_handler<>(std::move(handler))); }, token);
  }
  void unlock();
  void unlock(std::error_code& ec);

 private:
  friend class detail::lock_base;
  friend struct detail::lease_access;
  friend class leased_semaphore;
  friend class permit;
  lease(std::weak_ptr<detail::client_impl> c, std::shared_ptr<detail::hold_state> h) noexcept;
  void start_unlock(detail::completion<> done);
  void release_in_background() noexcept;

  std::weak_ptr<detail::client_impl> client_;
  std::shared_ptr<detail::hold_state> hold_;
};

}  // namespace dlock
