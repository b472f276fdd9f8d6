// dlock/keys.hpp — every Redis key and channel name dlock derives from a lock name, in one
// place (docs/compatibility.md lists them with their contents).
//
// Redisson's rule (RedissonObject.prefixName): `prefix:{name}`, or `prefix:name` when the name
// already carries a hash tag. Either way the derived names hash to the same cluster slot as the
// lock key itself, so one script may touch them all.
#pragma once

#include <string>
#include <string_view>

namespace dlock::keys {

inline std::string prefixed(std::string_view prefix, std::string_view name) {
  std::string out{prefix};
  out += ':';
  if (name.find('{') != std::string_view::npos) {
    out += name;
  } else {
    out += '{';
    out += name;
    out += '}';
  }
  return out;
}

// The pub/sub channel on which an unlock of `name` is announced (Redisson RLock).
inline std::string lock_channel(std::string_view name) {
  return prefixed("redisson_lock__channel", name);
}

// The fencing counter that every lock of a database shares (config fencing=on, the default):
// the last token issued. One key, whatever the number of lock names: a per-name counter stays
// after release, so a service that locks per order or per job would keep a key (~100 bytes) for
// every name it ever locked. Tokens from one counter increase strictly across all locks, so
// they do per lock. (Cluster mode will need one per slot, named to hash to the lock's slot.)
inline constexpr std::string_view shared_fencing_counter = "dlock_fencing_counter";

// The fencing counter of `name` alone, as Redisson's RFencedLock keeps it (config
// fencing=per-lock, for locks that Redisson's RFencedLock also takes). The default mode reads it
// too, and sets it if it exists, so tokens stay above it; it never creates it.
inline std::string fencing_counter(std::string_view name) {
  return prefixed("redisson_lock_token", name);
}

// The waiters of `name` that an unlock may name to wake: a sorted set of waiter tickets scored
// by when each first queued (server µs), so the longest-waiting is named first. dlock only,
// Redisson never reads it. Exists only while dlock clients wait on the lock.
inline std::string waiter_queue(std::string_view name) { return prefixed("dlock_lock_waiters", name); }

// When each queued waiter's entry goes stale and which client it belongs to (a hash: ticket ->
// '<server ms> <client id>'), renewed by its every attempt: an unlock skips the entries of
// waiters that died instead of naming them, and names a live one on its client's channel.
inline std::string waiter_expiry(std::string_view name) {
  return prefixed("dlock_lock_waiter_expiry", name);
}

// The channel on which an unlock names one of this client's queued waiters (its ticket) or
// tells it to stand by ('-' and its ticket): one per client, whatever the lock, so that an
// unlock wakes the one process it names instead of every process waiting on the lock. dlock
// only; an ACL user needs `&dlock_waiter__channel:*` beside `&redisson_lock__channel:*`.
// mutex_release.lua builds the same name from the id that the waiter's queue entry records.
inline std::string waiter_channel(std::string_view client_id) {
  return "dlock_waiter__channel:" + std::string{client_id};
}

// The field of the lock hash that reserves a free lock for one waiter for a moment: an unlock
// that wakes the head of the waiter queue replaces the lock hash by {handoff_field: ticket}
// with a short expiry (config::handoff_window). Every acquire, Redisson's too, sees the lock as
// held; only the named waiter's acquire takes it. No owner field can look like this (owners are
// `<uuid>:<n>`).
inline constexpr std::string_view handoff_field = "dlock:handoff";

// The field of the lock hash that marks a grant not yet confirmed (config::grants): an unlock
// that hands the lock straight to the head of the waiter queue writes that waiter's owner field
// (count 1) and {grant_field: '<ticket> <token>'}; the waiter's confirmation, or its next
// acquire, deletes it. Its leave releases the lock only while this names its ticket.
inline constexpr std::string_view grant_field = "dlock:grant";

// Who holds the lock, for `dlock status`: a hash written by holders that describe themselves
// (the dlock command does), beside the lock hash so that the lock's own layout stays exactly
// Redisson's. Fields `<owner>:host`, `<owner>:pid`, `<owner>:command`, `<owner>:acquired_ms`.
inline std::string holder_info(std::string_view name) { return prefixed("dlock_lock_info", name); }

// Unlock messages (Redisson LockPubSub): 0 wakes one waiter, 1 wakes all of them.
inline constexpr std::string_view unlock_message = "0";
inline constexpr std::string_view read_unlock_message = "1";

}  // namespace dlock::keys
