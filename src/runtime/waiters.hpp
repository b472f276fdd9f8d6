// Who waits for which lock in this client, and waking them on pub/sub messages. Strand only.
//
// The first waiter on a channel subscribes it (through the subscriber); the last one to leave
// unsubscribes. Waiters of one name share the subscription. An unlock message `0` wakes one
// waiter — the longest-waiting one that is not already re-checking; if all are, the first is
// told to re-check again when its attempt fails, so the wake-up is never swallowed. `1` wakes
// all. A (re)subscription wakes all: messages may have been missed. Waiters also re-check on
// their own timers, so a lost message costs latency, never a hang.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <list>
#include <string>
#include <unordered_map>

#include "transport/subscriptions.hpp"

namespace dlock::detail {

class waiter {
 public:
  virtual ~waiter() = default;
  // Re-check now (strand only).
  virtual void wake() = 0;
  bool attempting = false;    // an acquire attempt is in flight
  bool wake_pending = false;  // woken while attempting: re-check again if the attempt fails
};

class waiter_registry {
 public:
  using subscribe_fn = std::function<transport::listener_id(const std::string& channel,
                                                            transport::pubsub_listener)>;
  using unsubscribe_fn = std::function<void(transport::listener_id)>;
  using refused_fn = std::function<void(std::error_code)>;  // a subscription was refused

  waiter_registry(subscribe_fn subscribe, unsubscribe_fn unsubscribe, refused_fn refused = {})
      : subscribe_{std::move(subscribe)},
        unsubscribe_{std::move(unsubscribe)},
        on_refused_{std::move(refused)} {}

  void add(const std::string& channel, waiter* w);
  void remove(const std::string& channel, waiter* w);

  // Wakes one waiter of `channel` as an unlock message would (a waiter leaving with a wake-up
  // it did not use passes it on).
  void wake_one(const std::string& channel);

  // A pub/sub event for `channel` (called by the subscription's listener).
  void on_event(const std::string& channel, const transport::pubsub_event& ev);

  // Channels with waiters (thread-safe; for tests and metrics).
  std::size_t channels() const noexcept { return channel_count_.load(); }
  std::size_t waiters(const std::string& channel) const;  // strand only
  // Subscriptions the server refused (e.g. NOPERM on channels); waiting falls back to re-checks.
  std::uint64_t refused() const noexcept { return refused_.load(); }

 private:
  struct entry {
    transport::listener_id listener = 0;
    std::list<waiter*> waiters;
  };
  void wake_one(entry& e);
  void wake_all(const std::string& channel);

  subscribe_fn subscribe_;
  unsubscribe_fn unsubscribe_;
  refused_fn on_refused_;
  std::unordered_map<std::string, entry> channels_;
  std::atomic<std::uint64_t> refused_{0};
  std::atomic<std::size_t> channel_count_{0};
};

}  // namespace dlock::detail
