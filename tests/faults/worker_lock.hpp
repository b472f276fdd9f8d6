// The lock a dlock_fault_worker (fault_worker.cpp) runs its sections under: any kind of dlock's
// (`--kind`), or a deliberately broken lock (`--lock`, broken_lock.hpp).
//
//   --kind mutex     dlock::mutex (the default)
//   --kind fair      dlock::fair_mutex
//   --kind read      dlock::shared_mutex's read side: its sections record "mode":"read" and
//                    only read the resource (a reader does not write)
//   --kind write     dlock::shared_mutex's write side: "mode":"write", reads and writes
//   --kind broken-read-as-write
//                    a broken worker, for the checker's self-check: it takes the read side but
//                    treats that as permission to write exclusively — its sections record
//                    "mode":"write" (what it believes it holds) and write
//   --kind permits   one permit of a dlock::leased_semaphore of --permits N: its sections record
//                    "mode":"permit" and the limit N, carry token 0 (permits have no fencing
//                    token) and only read the resource (N holders share it)
//   --kind broken-permits-adds-one
//                    a broken worker, for the checker's self-check: as `permits`, but it behaves
//                    as if N were N + 1 — it adds a permit to the semaphore before taking one
//                    (and takes it away after its release), so it gets in beside N holders
// The lock kinds are dlock::detail::lock_base on one lock name, the permit kinds a
// dlock::leased_semaphore; the broken locks are mutexes.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <system_error>

#include "dlock/client.hpp"

namespace dlock::faults {

// What the worker's section loop needs from a lock: dlock's lease, or a broken lock.
class held_lock {
 public:
  virtual ~held_lock() = default;
  // errc::timeout when not acquired within `wait`.
  virtual std::error_code acquire(std::chrono::milliseconds wait, std::uint64_t& token) = 0;
  // True once the holder must stop: the lease-lost signal, or no time left.
  virtual bool lost() const = 0;
  virtual std::int64_t left_ms() const = 0;  // -1 unknown
  // Sleeps `d`, or less if the lease is lost first.
  virtual void hold_for(std::chrono::milliseconds d) = 0;
  // `fn` runs (on any thread) when the lease-lost signal fires; at most once per acquisition.
  virtual void on_lost(std::function<void()> fn) = 0;
  virtual std::error_code release() = 0;
  // The history's "mode" of a hold ("" exclusive, "read", "write"), and whether the holder
  // writes the resource (readers do not).
  virtual std::string mode() const { return {}; }
  virtual bool writes() const { return true; }
  // A semaphore's permits N (the history's "lim"); 0 for a lock.
  virtual std::int64_t limit() const { return 0; }
};

// The lock `lock` (dlock_fault_worker's --lock: "dlock" or a broken lock's name) of kind `kind`
// (--kind) on `name`, with `lease` (0: dlock's watchdog lease; a broken lock needs one) and, for
// the permit kinds, `permits` (--permits). Null, with `error` set, for a name, kind, lease or
// permits that do not go together.
std::unique_ptr<held_lock> make_held_lock(dlock::client& c, const std::string& name,
                                          const std::string& lock, const std::string& kind,
                                          std::chrono::milliseconds lease, std::int64_t permits,
                                          std::string& error);

}  // namespace dlock::faults
