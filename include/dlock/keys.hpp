// dlock/keys.hpp — every Redis key and channel name dlock derives from a lock name, in one
// place (docs/compatibility.md lists them with their contents).
//
// Redisson's rule (RedissonObject.prefixName / suffixName): `prefix:{name}` and `{name}:suffix`,
// or `prefix:name` and `name:suffix` when the name carries a hash tag of its own. Either way every
// derived name hashes to the lock key's cluster slot, so one script may touch them all; a name
// for which that fails (`a{b`, `x{}y`, `a}b`) is refused (same_slot()).
#pragma once

#include <cstdint>
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

inline std::string suffixed(std::string_view name, std::string_view suffix) {
  std::string out;
  if (name.find('{') != std::string_view::npos) {
    out = name;
  } else {
    out = '{';
    out += name;
    out += '}';
  }
  out += ':';
  out += suffix;
  return out;
}

// The Redis Cluster slot of a key: CRC16 (XMODEM) of its hash tag, or of the whole key when it
// has none, mod 16384.
std::uint16_t slot(std::string_view key);

// True when every key and channel below hashes to the slot of `name` itself.
bool same_slot(std::string_view name);

// The pub/sub channel on which an unlock of `name` is announced (Redisson RLock): `0` wakes one
// waiter, `1` all of them. Messages stay integers (Redisson decodes them as Long).
inline std::string lock_channel(std::string_view name) {
  return prefixed("redisson_lock__channel", name);
}

// dlock's channel of `name`: every dlock client that waits on the lock subscribes it beside the
// Redisson channel, so that an unlock script can count the Redisson processes waiting (NUMSUB of
// the Redisson channel minus NUMSUB of this one). It carries one message, `y`: the unlock left
// the lock to Redisson's waiters (the `0` that follows on the Redisson channel is theirs).
inline std::string dlock_channel(std::string_view name) {
  return prefixed("dlock_lock__channel", name);
}

// The channel on which an unlock tells one dlock client that it handed `name` to one of its
// waiters (the message is the waiter's ticket). One per lock and client, so the unlock reaches
// exactly the process it names, and PUBLISH's count tells it whether that process still listens.
inline std::string waiter_channel(std::string_view name, std::string_view client_id) {
  std::string out = dlock_channel(name);
  out += ':';
  out += client_id;
  return out;
}

// The dlock waiters of `name` in arrival order: a sorted set of tickets scored by the server
// time (µs) each first queued. Redisson never reads it. Exists only while dlock clients wait.
inline std::string waiter_queue(std::string_view name) {
  return prefixed("dlock_lock_queue", name);
}

// Each queued waiter's record (a hash: ticket -> `<stale-at server ms> <client id> <owner>
// <lease ms> <fenced 0|1>`), renewed by its every attempt; after the lock was handed to it,
// `g <token>` until its attempt takes the hold.
inline std::string waiter_records(std::string_view name) {
  return prefixed("dlock_lock_records", name);
}

// Set for a moment by an unlock that left the lock to Redisson's waiters: dlock attempts that
// were not woken by a Redisson unlock do not take the free lock meanwhile.
inline std::string yield_marker(std::string_view name) { return suffixed(name, "dlock_yield"); }

// The fencing counter of the lock's slot: the last token issued to any lock of that slot. One
// key per slot at most (16,384), whatever the number of lock names, named with a tag from a
// table built once that hashes to the slot.
std::string slot_fencing_counter(std::uint16_t slot);
inline std::string slot_fencing_counter_of(std::string_view name) {
  return slot_fencing_counter(slot(name));
}

// The fencing counter of `name` alone, as Redisson's RFencedLock keeps it. dlock reads it and
// advances it when it exists, so tokens stay above RFencedLock's; it never creates it.
inline std::string fencing_counter(std::string_view name) {
  return prefixed("redisson_lock_token", name);
}

// Who holds the lock, for `dlock status`: a hash written by holders that describe themselves
// (the dlock command does), beside the lock hash so that the lock's own layout stays exactly
// Redisson's. Fields `<owner>:host`, `<owner>:pid`, `<owner>:command`, `<owner>:acquired_ms`.
inline std::string holder_info(std::string_view name) { return prefixed("dlock_lock_info", name); }

// RFairLock: the waiting owners in arrival order (a list), and each one's deadline (a sorted set
// of owner -> server ms after which it counts as gone; Redisson writes client-clock ms there).
inline std::string fair_queue(std::string_view name) {
  return prefixed("redisson_lock_queue", name);
}
inline std::string fair_timeouts(std::string_view name) {
  return prefixed("redisson_lock_timeout", name);
}
// The channel on which a fair unlock tells the queue's head `owner` that it is its turn.
inline std::string fair_waiter_channel(std::string_view name, std::string_view owner) {
  std::string out = lock_channel(name);
  out += ':';
  out += owner;
  return out;
}

// RReadWriteLock: the unlock channel (`0` a read unlock freed the lock, `1` a write unlock).
inline std::string rwlock_channel(std::string_view name) {
  return prefixed("redisson_rwlock", name);
}
// The key of `owner`'s n-th read hold ({name}:<owner>:rwlock_timeout:<n>), which carries that
// hold's lease: the hash lives as long as its longest read hold.
inline std::string read_hold_key(std::string_view name, std::string_view owner, std::uint32_t n) {
  std::string out = suffixed(name, owner);
  out += ":rwlock_timeout:";
  out += std::to_string(n);
  return out;
}
// dlock's writers waiting for a read-write lock: a sorted set of owner -> server ms after which
// the entry counts as gone. New dlock readers queue behind it (writer non-starvation). Apart from
// the hash: Redisson's write unlock deletes the hash only when `mode` is its last field.
inline std::string waiting_writers(std::string_view name) {
  return suffixed(name, "dlock_writers");
}

// RSemaphore / RPermitExpirableSemaphore: the counter is the name itself; the channel on which
// every change that frees permits publishes the new count (Redisson wakes that many waiters).
inline std::string semaphore_channel(std::string_view name) {
  return prefixed("redisson_sc", name);
}
// RPermitExpirableSemaphore's leased permits: a sorted set of permit id (16 raw bytes) ->
// deadline in ms (server TIME for dlock, the client's clock for Redisson).
inline std::string permit_timeouts(std::string_view name) { return suffixed(name, "timeout"); }
// dlock's marker of one counting_semaphore acquisition by `owner`, for a short while: a resend
// of the attempt takes nothing more, and a give-back returns exactly what it took.
inline std::string counting_marker(std::string_view name, std::string_view owner) {
  std::string out = suffixed(name, "dlock_taken:");
  out += owner;
  return out;
}
// RCountDownLatch: the counter is the name; its channel (`0`: the latch opened, `1`: a new
// count was set) always wraps the raw name in braces, as Redisson does, so for a name with a
// hash tag of its own it hashes elsewhere (dlock refuses such latch names in a Redis Cluster).
inline std::string latch_channel(std::string_view name) {
  std::string out = "redisson_countdownlatch__channel__{";
  out += name;
  out += '}';
  return out;
}

// Unlock messages (Redisson LockPubSub): 0 wakes one waiter, 1 wakes all of them.
inline constexpr std::string_view unlock_message = "0";
inline constexpr std::string_view read_unlock_message = "1";

}  // namespace dlock::keys
