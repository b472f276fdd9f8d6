// Who waits for which lock in this client, and waking them on pub/sub messages. Strand only.
//
// The first waiter on a channel subscribes it (through the subscriber); the last one to leave
// unsubscribes — or, with a linger (config::subscription_linger), leaves it subscribed that
// long, so that a process that waits on the same lock again soon (a worker loop) neither
// subscribes again nor re-checks after the confirmation: its first attempt went out while the
// channel was subscribed. A wake-up that finds no waiter there (an unlock message, a
// resubscription, one passed on by a waiter that left) is remembered by when it came: a waiter
// that registers after it, with an attempt sent before it, re-checks at once (add()). At most
// max_lingering channels linger; the oldest goes first.
// Waiters of one name share the subscription. The first waiter of all also
// subscribes the client's own channel (keys::waiter_channel), first, on the same connection,
// so it is confirmed before the lock's; it stays subscribed while the client lives.
//
// Messages on the client's own channel (dlock's unlock names the head of a lock's waiter queue,
// keys::waiter_queue, there, and keeps the lock for it: nobody else is woken):
// - a waiter ticket (a decimal number >= 2^32): wakes exactly that waiter (if it has not
//   registered yet, add() wakes it);
// - `-` and a ticket: the next in line behind such a hand-off stands by, re-checking when the
//   hand-off's window ends (in case the named waiter never comes);
// - `=<ticket> <token> <ms> <sent> <window>`: the unlock granted the lock to that waiter (config::grants;
//   mutex_release.lua): it holds the lock (waiter::granted). One that has not registered yet
//   gets it from add(); one that is gone ignores it (its leave releases the grant).
// Its resubscription wakes every waiter of the client (a name may have been missed); its
// refusal takes them all out of the queues (channel_refused). An unlock that finds nobody
// listening on the waiter channel names the waiter on the lock's channel instead (below).
//
// Messages on a lock's channel:
// - `0` (Redisson's unlock, or dlock's with nobody queued): wakes one waiter — the
//   longest-waiting one that is not already re-checking; if all are, the first is told to
//   re-check again when its attempt fails, so the wake-up is never swallowed.
// - a ticket, and `-` and a ticket: an unlock that kept nothing for the named waiter (the lock
//   is free), found nobody listening on its client's channel, or came from a dlock before the
//   waiter channel names it here, then publishes `0`: as on the own channel, and the `0` that
//   follows a ticket is skipped (its wake-up went to the named waiter).
// - `1` wakes all. A (re)subscription wakes all: messages may have been missed.
// Waiters also re-check on their own timers, so a lost message costs latency, never a hang.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <cstdint>
#include <functional>
#include <list>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "transport/subscriptions.hpp"

namespace dlock::detail {

// A grant (mutex_release.lua): the lock was given to the waiter holding `ticket`, with fencing
// token `token`, `since` after its attempt sent at `sent` (its own steady clock) wrote the
// queue record that the unlock read, expiring `window` after it was made (the releaser's
// hand-off window).
struct grant {
  std::uint64_t ticket = 0;
  std::uint64_t token = 0;
  std::chrono::milliseconds since{0};
  std::chrono::steady_clock::time_point sent{};
  std::chrono::milliseconds window{0};
};

class waiter {
 public:
  virtual ~waiter() = default;
  // Re-check now (strand only).
  virtual void wake() = 0;
  // The lock's subscription was refused: this waiter cannot be woken by a message (strand only).
  virtual void channel_refused() {}
  // An unlock named another waiter and kept the lock for it; this one is next in line: re-check
  // once that hand-off's window has passed, in case the named waiter never comes (strand only).
  virtual void stand_by() {}
  // An unlock granted it the lock (strand only).
  virtual void granted(const grant&) {}
  bool attempting = false;    // an acquire attempt is in flight
  bool wake_pending = false;  // woken while attempting: re-check again if the attempt fails
  std::uint64_t ticket = 0;   // its name in the lock's waiter queue (0: none)
  bool named = false;         // an unlock named it (its ticket came): it was popped from the
                              // queue, so a failed attempt should re-enter at the front
};

class waiter_registry {
 public:
  using clock = std::chrono::steady_clock;
  using subscribe_fn = std::function<transport::listener_id(const std::string& channel,
                                                            transport::pubsub_listener)>;
  using unsubscribe_fn = std::function<void(transport::listener_id)>;
  using refused_fn = std::function<void(std::error_code)>;  // a subscription was refused
  using arm_fn = std::function<void(clock::time_point)>;     // call sweep() at this time
  static constexpr std::size_t max_lingering = 64;

  // `own_channel`: this client's keys::waiter_channel (empty: none, tickets come on the lock
  // channels only).
  waiter_registry(subscribe_fn subscribe, unsubscribe_fn unsubscribe, refused_fn refused = {},
                  std::string own_channel = {})
      : subscribe_{std::move(subscribe)},
        unsubscribe_{std::move(unsubscribe)},
        on_refused_{std::move(refused)},
        own_channel_{std::move(own_channel)},
        tag_{random_tag()},
        next_{random_tag()} {}

  // A ticket for a new waiter of this client (thread-safe): this client's random tag in the high 32 bits
  // (never 0, so a ticket is never the message 0 or 1), a counter in the low ones.
  std::uint64_t make_ticket();
  static std::string ticket_text(std::uint64_t t) { return std::to_string(t); }
  // The ticket a message names, or 0 if it is not a ticket.
  static std::uint64_t parse_ticket(std::string_view payload);
  // The ticket a stand-by message ('-' and a ticket) names, or 0.
  static std::uint64_t parse_standby(std::string_view payload);
  // The grant a message `=<ticket> <token> <ms> <sent> <window>` makes, or nullopt.
  static std::optional<grant> parse_grant(std::string_view payload);

  // Keep a lock channel subscribed for `linger` after its last waiter leaves (0: unsubscribe
  // at once, the default). `arm` asks for a sweep() at a time; a later request replaces it.
  void set_linger(clock::duration linger, arm_fn arm) {
    linger_ = linger;
    arm_ = std::move(arm);
  }
  // Unsubscribes the channels that have lingered `linger` by `now`, and asks for the next sweep.
  void sweep(clock::time_point now);
  // Unsubscribes every lingering channel now (shutdown).
  void drop_lingering();

  // Registers `w` on `channel` after an attempt sent at `sent` found the lock held. If the
  // channel is subscribed already and a wake-up came while nobody waited on it, after `sent`,
  // the waiter is told to re-check (wake_pending): it may be the unlock it waits for.
  void add(const std::string& channel, waiter* w, clock::time_point sent = clock::time_point::max());
  void remove(const std::string& channel, waiter* w);

  // Wakes one waiter of `channel` as an unlock message would (a waiter leaving with a wake-up
  // it did not use passes it on).
  void wake_one(const std::string& channel);

  // A pub/sub event for `channel` (called by the subscription's listener).
  void on_event(const std::string& channel, const transport::pubsub_event& ev);
  // A pub/sub event on the client's own channel.
  void on_own_event(const transport::pubsub_event& ev);

  // Channels with waiters (thread-safe; for tests and metrics).
  std::size_t channels() const noexcept { return channel_count_.load(); }
  // Channels subscribed with no waiter, lingering (thread-safe; for tests and metrics).
  std::size_t lingering() const noexcept { return lingering_count_.load(); }
  std::size_t waiters(const std::string& channel) const;  // strand only
  // Subscriptions the server refused (e.g. NOPERM on channels); waiting falls back to re-checks.
  std::uint64_t refused() const noexcept { return refused_.load(); }

 private:
  struct entry {
    transport::listener_id listener = 0;
    std::list<waiter*> waiters;
    bool announced = false;  // a ticket came: skip the `0` that follows it
    bool refused = false;    // its subscription was refused: it never lingers
    // A wake-up that came while nobody waited (a waiter with an earlier attempt re-checks).
    clock::time_point unheard = clock::time_point::min();
    // Lingering since (no waiters; its place in lingering_), if it lingers.
    std::optional<std::list<std::string>::iterator> lingers;
    clock::time_point idle_since{};
  };
  // The channel's entry (without waiters) leaves and its subscription ends.
  void drop(std::unordered_map<std::string, entry>::iterator it);
  void drop_oldest();  // the channel that has lingered longest
  void wake_one(entry& e);
  // This client's registered waiter holding `ticket`, or null.
  waiter* ours(const entry& e, std::uint64_t ticket) const;
  // ... of any lock.
  waiter* ours(std::uint64_t ticket) const;
  // A ticket of ours named before its waiter registered: add() wakes it.
  void named_early(std::uint64_t ticket);
  static void wake(waiter* w);
  void wake_all(const std::string& channel);
  std::vector<std::string> channel_names() const;
  // A subscription was refused: counted, reported, and the waiters of `channels` leave the queue.
  void refuse(std::error_code why, const std::vector<std::string>& channels);
  static std::uint32_t random_tag();

  subscribe_fn subscribe_;
  unsubscribe_fn unsubscribe_;
  refused_fn on_refused_;
  const std::string own_channel_;
  bool own_subscribed_ = false;  // own_channel_'s subscription was made (kept while the client lives)
  std::unordered_map<std::string, entry> channels_;
  clock::duration linger_{0};
  arm_fn arm_;
  std::list<std::string> lingering_;  // channels lingering, oldest first
  // Tickets of this client an unlock named before their waiter registered (the name can
  // arrive on the subscriber connection before the reply that queued the waiter): add() gives
  // the waiter its wake-up. Bounded; oldest dropped.
  std::deque<std::uint64_t> named_early_;
  // Grants that came before their waiter registered (as named_early_). Bounded; oldest dropped.
  std::deque<grant> granted_early_;
  std::uint32_t tag_;  // this client's ticket prefix
  std::atomic<std::uint32_t> next_;  // ticket counter, from a random start (clients sharing a tag rarely collide)
  std::atomic<std::uint64_t> refused_{0};
  std::atomic<std::size_t> channel_count_{0};
  std::atomic<std::size_t> lingering_count_{0};
};

}  // namespace dlock::detail
