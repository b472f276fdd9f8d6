// What dlock's semaphores and latch share: a name on a client, and acquisitions run by the same
// machinery as the locks' (the acquire machine: bounded waits, re-checks, wake-ups on pub/sub,
// cancellation that gives back whatever an attempt in flight took). Not used directly.
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
#include <string_view>
#include <system_error>
#include <utility>

#include "dlock/client.hpp"
#include "dlock/detail/completion.hpp"
#include "dlock/detail/lock_base.hpp"

namespace dlock::detail {

struct hold_state;

class sync_base {
 public:
  using milliseconds = std::chrono::milliseconds;
  const std::string& name() const noexcept { return name_; }

  // For the synchronizers, not for users.
  sync_base(client& c, std::string name, lock_kind kind);
  struct request {
    std::uint32_t permits = 1;
    std::optional<milliseconds> wait;   // nullopt: as long as it takes; 0: one try
    std::optional<milliseconds> lease;  // leased_semaphore: nullopt = the watchdog lease
  };
  using hold_ptr = std::shared_ptr<hold_state>;
  // One acquisition, waited for on the calling thread (errc::would_deadlock on the client's I/O
  // thread); errc::timeout when `wait` passed, asio::error::operation_aborted when `stop` was
  // requested.
  hold_ptr acquire(const request& r, std::error_code& ec, std::stop_token stop = {});
  // The same, asynchronously; returns what cancels it (empty when it completed at once).
  std::function<void()> start(const request& r, completion<hold_ptr> done);
  // One of the kind's update scripts (semaphore_update.lua, latch_update.lua) with `op` and
  // `n`; the integer reply (0 for nil).
  std::int64_t update(std::string_view op, std::int64_t n, std::error_code& ec);
  std::shared_ptr<client_impl> client_;
  std::string name_;
  lock_kind kind_;

  template <class Sig, class Token, class Convert>
  auto initiate(request r, Token&& token, Convert convert) {
    return asio::async_initiate<Token, Sig>(
        [this, convert](auto handler, request req) {
          auto slot = asio::get_associated_cancellation_slot(handler);
          auto done = erase_handler_for<Sig>(std::move(handler));
          auto cancel =
              start(req, [convert, done = std::move(done)](std::error_code ec, hold_ptr h) mutable {
                convert(std::move(done), ec, std::move(h));
              });
          if (slot.is_connected() && cancel) {
            slot.assign([cancel = std::move(cancel)](asio::cancellation_type) { cancel(); });
          }
        },
        token, r);
  }

 private:
  template <class Sig>
  struct erased;
  template <class... T>
  struct erased<void(std::error_code, T...)> {
    template <class Handler>
    static completion<T...> make(Handler&& h) {
      return erase_handler<T...>(std::forward<Handler>(h));
    }
  };
  template <class Sig, class Handler>
  static auto erase_handler_for(Handler&& h) {
    return erased<Sig>::make(std::forward<Handler>(h));
  }
};

}  // namespace dlock::detail
