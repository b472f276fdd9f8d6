// dlock/inspect.hpp — what a lock looks like right now, for operators and tools (`dlock status`).
//
//   auto s = dlock::inspect(client, "orders:42");
//   if (s.held) for (auto& h : s.holders) std::cout << h.owner << " x" << h.count << '\n';
//
// Every kind is recognised: a mutex (RLock), a fair_mutex (RFairLock: also its queue) and a
// shared_mutex (RReadWriteLock: its mode, readers and writer, and dlock's waiting writers); and
// the counters: a leased_semaphore (RPermitExpirableSemaphore: its permits available and those
// leased, each with its time left), or a bare counter, which a counting_semaphore (RSemaphore), a
// latch (RCountDownLatch) and a leased_semaphore with no permit leased all look like.
// The lock hash, its PTTL, the fencing counter, the holder descriptions and the queues are read
// in one script (one consistent snapshot); the number of subscribers to the unlock channels
// comes from a separate PUBSUB NUMSUB (SHARDNUMSUB at the slot's master in a cluster). Holders may
// describe themselves (host, pid, command, acquisition time) with describe_holder(); the `dlock`
// command does. Descriptions live in their own hash (keys::holder_info), so the lock hash keeps
// Redisson's layout exactly, and only descriptions whose owner still holds the lock are reported.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "dlock/client.hpp"

namespace dlock {

struct holder {
  std::string owner;  // the owner field, <client-uuid>:<n> (a writer's without `:write`)
  std::uint32_t count = 0;
  // Set when the holder described itself (describe_holder); empty / 0 otherwise.
  std::string host;
  std::int64_t pid = 0;
  std::string command;
  std::int64_t acquired_unix_ms = 0;
  // A read-write lock's hold: "read" (the field <owner>) or "write" (<owner>:write; a writer
  // that downgraded appears twice, once of each). Empty for a mutex or fair lock. Last, so that
  // aggregate initialisations written before it still mean the same.
  std::string mode{};
};

// Which layout the keys of a name show.
enum class lock_layout : std::uint8_t {
  none,        // no lock hash, no fair queue, no waiting writer
  mutex,       // RLock's hash (a fair lock nobody waits for has exactly this layout)
  fair,        // RFairLock: its queue (keys::fair_queue) is not empty
  read_write,  // RReadWriteLock: the hash has a `mode` field, or dlock writers wait for it
  // A leased_semaphore (RPermitExpirableSemaphore): permits are leased ({name}:timeout is not
  // empty). `counter` is its available permits.
  semaphore,
  // A string counter and no leased permits: a counting_semaphore's (RSemaphore) available
  // permits, a latch's (RCountDownLatch) count, or an idle leased_semaphore's available permits.
  // The keys do not tell which.
  counter,
};

// A leased permit of a leased_semaphore, with its holder's description if it gave one
// (describe_holder with the permit id as the owner: `dlock exec --permits` does).
struct leased_permit {
  std::string id;  // 32 hex characters (the 16 raw bytes of the sorted set's member)
  // Until its deadline, by the server's clock (negative: passed; the next call on the semaphore
  // reclaims it). nullopt: it never expires (a Redisson permit acquired without a lease time).
  std::optional<std::chrono::milliseconds> expires_in;
  std::string host;
  std::int64_t pid = 0;
  std::string command;
  std::int64_t acquired_unix_ms = 0;
};

// An owner waiting in a fair lock's queue, or a dlock writer waiting for a read-write lock.
struct waiting_owner {
  std::string owner;
  // Until its entry counts as gone unless its next attempt renews it, by the server's clock
  // (negative: passed; Redisson's fair waiters write their client clock's deadlines). nullopt:
  // a fair queue entry without a deadline.
  std::optional<std::chrono::milliseconds> expires_in;
};

struct lock_status {
  bool held = false;                              // by a holder
  std::vector<holder> holders;                    // one for a mutex; readers and the writer
  std::chrono::milliseconds remaining_lease{-2};  // PTTL: -2 free, -1 no expiry
  // The last token issued to any lock of this name's cluster slot (keys::slot_fencing_counter);
  // 0 if none, or with fencing off.
  std::uint64_t fencing_counter = 0;
  std::int64_t queued = 0;  // dlock waiters in a mutex's queue (keys::waiter_queue)
  // Clients subscribed to the unlock channels: Redisson's lock channel, the read-write one and
  // each listed fair waiter's own (Redisson's waiters and dlock's).
  std::int64_t subscribers = 0;

  lock_layout layout = lock_layout::none;
  std::string mode;  // read_write: the hash's `mode`, "read" or "write" ("" while free)
  // fair: the queue in order (its first `listed_max` owners) and its length.
  std::vector<waiting_owner> fair_queue;
  std::int64_t fair_queue_length = 0;
  // read_write: dlock's waiting writers, earliest deadline first (the first `listed_max`), and
  // their number. New dlock readers wait behind them.
  std::vector<waiting_owner> waiting_writers;
  std::int64_t waiting_writers_count = 0;

  // semaphore, counter: the counter's value (0 if absent or not a number).
  std::int64_t counter = 0;
  // semaphore: the leased permits, earliest deadline first (the first `listed_max`), and their
  // number (expired ones not yet reclaimed included). held: there are some.
  std::vector<leased_permit> permits;
  std::int64_t permits_leased = 0;
  // semaphore, counter: clients subscribed to redisson_sc:{name} (semaphore waiters) and to the
  // latch channel (latch waiters); `subscribers` is their sum.
  std::int64_t semaphore_subscribers = 0;
  std::int64_t latch_subscribers = 0;

  static constexpr std::size_t listed_max = 100;
};

// Errors: errc::invalid_argument (bad name), errc::wrong_type (a key of another type: a list,
// a set...), connection errors.
lock_status inspect(client& c, const std::string& name);
lock_status inspect(client& c, const std::string& name, std::error_code& ec);

// Publishes a description of `h.owner`'s hold of `name` for inspect(), expiring after `ttl`
// (refresh it while holding). forget_holder removes it.
void describe_holder(client& c, const std::string& name, const holder& h,
                     std::chrono::milliseconds ttl, std::error_code& ec);
void forget_holder(client& c, const std::string& name, const std::string& owner,
                   std::error_code& ec);
// The fields of keys::holder_info(name) that describe `owner`.
std::vector<std::string> holder_fields(const std::string& owner);

}  // namespace dlock
