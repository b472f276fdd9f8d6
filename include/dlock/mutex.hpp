// dlock/mutex.hpp — Redisson's RLock in C++: a reentrant distributed lock with leases, fencing
// tokens and a lease-lost signal.
//
// Guarantees. While a hold's lease is trusted, no other owner acquires the same name on the same
// Redis (given Redis keeps its data: see docs/safety). A lease is trusted until
// `send_time + lease - drift` on the local steady clock, where send_time is when the acquire
// was sent; the watchdog extends locks taken without a lease (config::watchdog_lease, renewed
// every third of it). When trust ends early — a renewal finds the hold gone, or none is confirmed
// in time — lease_lost() is requested. Every first acquisition gets a fencing token larger
// than any before it for this name: give it to the resource you protect.
// Liveness. Waiters wake on the unlock message of redisson_lock__channel:{name} and re-check
// at least every config::wait_recheck (and when the holder's lease ends), so a lost message
// costs latency, never a hang. A crashed holder's lock frees itself when its lease ends.
// Compatibility. The Redis layout is Redisson's RLock (docs/compatibility.md): a Java process
// using Redisson and a C++ process using dlock exclude each other on the same name.
//
//   dlock::mutex m{client, "orders:42"};
//   {
//     std::lock_guard guard{m};                    // lock(): throws dlock::lock_error
//     write(m.fencing_token());
//   }
//   if (m.try_lock_for(2s)) { ...; m.unlock(); }   // TimedLockable
//
// Two ways to own it:
// - thread-owned: lock/try_lock*/unlock, owner `<client-uuid>:<thread>`, reentrant per thread
//   (each lock() needs its unlock()); fencing_token() and lease_lost() describe the calling
//   thread's hold.
// - lease-owned: async_lock* complete with a dlock::lease (see lease.hpp), one owner per lease.
//
// Errors (std::error_code forms, or lock_error): errc::invalid_argument (empty or too long name,
// a lease of zero, negative or over a year; a wait of 100 years or more means no deadline),
// errc::wrong_type (the key holds another type: reported at once, never waited on),
// errc::out_of_memory, errc::read_only, errc::no_permission, connection errors,
// errc::would_deadlock (a sync call on the client's I/O thread), errc::shutdown, and on unlock
// errc::not_owner (the thread holds nothing) or errc::lease_lost (its lease was lost; nothing of
// anyone else's was touched). try_lock* return false, not an error, when the lock stays held.
// Thread safety: one mutex object may be used from any number of threads at once.
#pragma once

#include <string>

#include "dlock/detail/lock_base.hpp"

namespace dlock {

// Lockable and TimedLockable (lock, try_lock, try_lock_for, try_lock_until, unlock), with
// leases, stop_token waits, async forms and queries: the members are lock_base's, each
// documented in dlock/detail/lock_base.hpp; what they guarantee is above.
class mutex : public detail::lock_base {
 public:
  mutex(client& c, std::string name) : lock_base{c, std::move(name), detail::lock_kind::mutex} {}
};

}  // namespace dlock
