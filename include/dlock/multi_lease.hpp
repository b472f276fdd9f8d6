// dlock/multi_lease.hpp — what a multi_lock or a red_lock holds: one lease per member, seen as
// one lease with one deadline, one lost signal and one fencing story.
//
// - multi_lock: every member is held. time_left() is the earliest member's; lost() is requested
//   when any member's lease may be lost. fencing_tokens() gives each member's token (pass each
//   resource the token of the lock that guards it).
// - red_lock: at least `needed` (a majority) of its servers hold the name. time_left() is the
//   needed-th longest trust (Redlock's validity); lost() is requested when fewer than `needed`
//   members are still trusted. fencing_token() is the quorum's token: the largest of the
//   members', written back to every member before the acquisition completed, so any later
//   quorum issues a larger one.
//
// Destroyed (or assigned over) while it holds, it releases every member in the background.
// Thread safety: fencing_token(s), lost(), owns() and time_left() from any thread; the other
// members from one thread at a time.
#pragma once

#include <asio/async_result.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <stop_token>
#include <system_error>
#include <vector>

#include "dlock/detail/completion.hpp"
#include "dlock/lease.hpp"

namespace dlock {

namespace detail {
struct lease_set_state;
}

class multi_lease {
 public:
  multi_lease() noexcept;
  multi_lease(multi_lease&&) noexcept;
  multi_lease& operator=(multi_lease&&) noexcept;
  ~multi_lease();

  // True while it holds (at least the needed members): acquired and not yet unlocked.
  bool owns() const noexcept;
  explicit operator bool() const noexcept { return owns(); }

  // The members' leases, in the order the lock was given them (an empty lease where a red_lock
  // member was not acquired).
  const std::vector<lease>& members() const noexcept { return members_; }
  // Each member's fencing token (0 where not held).
  std::vector<std::uint64_t> fencing_tokens() const;
  // The largest of them (red_lock: the quorum's token); 0 for an empty multi_lease.
  std::uint64_t fencing_token() const noexcept;
  // Local, from the steady clock: multi_lock, the earliest member's time left; red_lock, the
  // needed-th longest. Zero when empty or lost.
  std::chrono::milliseconds time_left() const noexcept;
  // Requested when the lease may be lost (see above). Never requested for an empty multi_lease.
  std::stop_token lost() const noexcept;
  // Runs `fn` once when the lease is lost (at once if it already is), on the I/O thread of the
  // member's client whose loss decided it. It must not block.
  void on_lost(std::function<void()> fn);

  // Releases every member at once; completes once the needed members are released (a
  // red_lock's remaining releases finish in the background). Errors: errc::not_owner (empty),
  // errc::lease_lost (multi_lock: a member's lease was lost; red_lock: fewer than the needed
  // members were still held), or a member's connection error (multi_lock; red_lock: when fewer than
  // the needed members were released); the members it could release are released either way.
  template <asio::completion_token_for<void(std::error_code)> Token>
  auto async_unlock(Token&& token) {
    return asio::async_initiate<Token, void(std::error_code)>(
        [this](auto handler) { start_unlock(detail::erase_handler<>(std::move(handler))); }, token);
  }
  void unlock();
  void unlock(std::error_code& ec);

  // For multi_lock and red_lock.
  multi_lease(std::vector<lease> members, std::size_t needed);

 private:
  void start_unlock(detail::completion<> done);

  std::vector<lease> members_;
  std::shared_ptr<detail::lease_set_state> state_;
};

}  // namespace dlock
