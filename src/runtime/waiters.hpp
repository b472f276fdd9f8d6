// Who waits for which lock in this client, and waking them on pub/sub messages. Strand only
// (make_ticket is thread-safe).
//
// Waiters are grouped by topic (wait_topic): what they listen to, by lock kind. The first waiter
// of a topic subscribes its channels (dlock/keys.hpp), the last one to leave unsubscribes them.
// - fair_mutex: each waiter its own channel, redisson_lock__channel:{name}:<owner>, on which the
//   unlock tells the queue's head its turn (`0`);
// - shared_mutex: redisson_rwlock:{name}, where `0` and `1` both wake every waiter of the name
//   (a freed read-write lock may admit all of them: readers, or the writer first);
// - semaphores (both layouts share the topic): redisson_sc:{name}, whose message is the count
//   available: it wakes that many waiters, in turn;
// - latch: redisson_countdownlatch__channel__{name}: `0` (open) wakes every waiter;
// - mutex: three channels:
// - this client's waiter channel of the name: an unlock handed the lock to the waiter whose
//   ticket the message carries; that waiter is woken (its next attempt takes the hold). A
//   ticket for a waiter not registered yet (the message overtook the reply that queued it) is
//   kept, and add() reports it;
// - dlock's channel of the name: `y` means the unlock left the lock to Redisson's waiters: the
//   next `0` on Redisson's channel is not for dlock's waiters, and they re-check once the yield
//   has passed (in case no Redisson waiter came);
// - Redisson's channel: `0` wakes one waiter (the longest waiting first, in turn), `1` wakes all;
//   such a wake-up is `foreign`: the yield marker does not hold its attempt back.
// The confirmation of Redisson's channel, and every resubscription after a reconnect, wakes all
// waiters of the name: messages may have been missed. Waiters also re-check on their own
// timers, so a lost message costs latency, never a hang.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <utility>
#include <vector>

#include "dlock/detail/lock_base.hpp"
#include "transport/subscriptions.hpp"

namespace dlock::detail {

// What a waiter listens to: the lock's kind and name, and for a fair lock its owner.
struct wait_topic {
  lock_kind kind = lock_kind::mutex;
  std::string name;
  std::string owner;  // fair: the waiter's own channel
  // The registry's key: the name itself for a mutex (pass_on takes it).
  std::string key() const;
};

class waiter {
 public:
  using clock = std::chrono::steady_clock;
  virtual ~waiter() = default;
  // Re-check now; `foreign`: a Redisson unlock woke it.
  virtual void wake(bool foreign) = 0;
  // Re-check by `at` at the latest (a yield to Redisson's waiters).
  virtual void wake_by(clock::time_point at) = 0;
  std::uint64_t ticket = 0;  // its name in the lock's waiter queue
  // When a release message (an unlock, a hand-off naming it, a yield) last woke it, set by the
  // registry before waking it: the start of a hand-off, for metrics. Strand only.
  std::optional<clock::time_point> released_at;
};

class waiter_registry {
 public:
  using clock = std::chrono::steady_clock;
  using channel_listeners = std::vector<std::pair<std::string, transport::pubsub_listener>>;
  // Subscribes the channels in one command; returns the listener ids in order.
  using subscribe_fn = std::function<std::vector<transport::listener_id>(channel_listeners)>;
  using unsubscribe_fn = std::function<void(std::vector<transport::listener_id>)>;
  using refused_fn = std::function<void(std::error_code)>;  // a subscription was refused
  // How long an unlock leaves a free lock to Redisson's waiters (mutex_release.lua ARGV[7]).
  static constexpr std::chrono::milliseconds yield_window{20};

  waiter_registry(subscribe_fn subscribe, unsubscribe_fn unsubscribe, refused_fn refused,
                  std::string client_id);

  // A ticket for a new waiter (thread-safe): a random 31-bit tag in the high half, a counter in
  // the low one, so a ticket is never the message 0 or 1 and fits a Java long.
  std::uint64_t make_ticket();
  // The ticket a message names, or 0 if it is not one.
  static std::uint64_t parse_ticket(std::string_view payload);

  // A mark of what the registry has heard so far (strand only): taken when an attempt is sent.
  std::uint64_t mark() const noexcept { return heard_; }
  // Registers `w` as a waiter of `topic`. Returns true when the caller must wake it: its ticket
  // was named already, or the topic heard something (a message, a confirmation) after `since`,
  // the mark of the attempt that found the lock held — a message published after that attempt
  // ran may have come before the waiter was registered. A topic subscribed now needs no wake:
  // its confirmation wakes every waiter.
  bool add(const wait_topic& topic, waiter* w, std::uint64_t since = ~std::uint64_t{0});
  void remove(const wait_topic& topic, waiter* w);
  // A waiter that a `0` woke ends without the lock: the wake-up goes to the next waiter of the
  // name in this process, as the `0` would have (the lock may be free).
  void pass_on(const std::string& name);

  // A pub/sub event on one of the name's channels (the listeners call these; a topic's key for
  // on_redisson).
  void on_handoff(const std::string& name, const transport::pubsub_event& ev);
  void on_dlock(const std::string& name, const transport::pubsub_event& ev);
  void on_redisson(const std::string& name, const transport::pubsub_event& ev);
  void on_permits(const std::string& key, const transport::pubsub_event& ev);  // redisson_sc

  std::size_t names() const noexcept { return name_count_.load(); }  // thread-safe
  std::size_t waiters(const std::string& key) const;                 // strand only
  // Subscriptions the server refused (e.g. NOPERM on channels): waiters fall back to re-checks.
  std::uint64_t refused() const noexcept { return refused_.load(); }

 private:
  struct entry {
    std::vector<transport::listener_id> ids;
    std::list<waiter*> waiters;
    bool skip_zero = false;        // a `y` came: the next `0` is Redisson's waiters'
    bool zero_wakes_all = false;   // shared_mutex: `0` frees the lock for every waiter
    std::uint64_t last_heard = 0;  // heard_ at the topic's latest event
  };
  channel_listeners channels_of(const wait_topic& topic, const std::string& key);
  void wake_all(entry& e, bool foreign);
  bool common(entry& e, const transport::pubsub_event& ev);  // confirmation, refusal: handled
  entry* find(const std::string& name);

  subscribe_fn subscribe_;
  unsubscribe_fn unsubscribe_;
  refused_fn on_refused_;
  const std::string client_id_;
  std::unordered_map<std::string, entry> names_;
  std::deque<std::uint64_t> named_early_;  // bounded; oldest dropped
  std::uint32_t tag_;
  std::atomic<std::uint32_t> next_;
  std::atomic<std::uint64_t> refused_{0};
  std::atomic<std::size_t> name_count_{0};
  std::uint64_t heard_ = 0;  // events heard on any topic (see mark())
};

}  // namespace dlock::detail
