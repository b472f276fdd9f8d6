// dlock/inspect.hpp — what a lock looks like right now, for operators and tools (`dlock status`).
//
//   auto s = dlock::inspect(client, "orders:42");
//   if (s.held) for (auto& h : s.holders) std::cout << h.owner << " x" << h.count << '\n';
//
// The lock hash, its PTTL, the fencing counter and the holder descriptions are read in one
// script (one consistent snapshot); the number of subscribers to the unlock channel comes from
// a separate PUBSUB NUMSUB (SHARDNUMSUB at the slot's master in a cluster). Holders may describe
// themselves (host, pid, command, acquisition time) with describe_holder(); the `dlock` command
// does. Descriptions live in their own hash (keys::holder_info), so the lock hash keeps Redisson's
// layout exactly, and only descriptions whose owner still holds the lock are reported.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <system_error>
#include <vector>

#include "dlock/client.hpp"

namespace dlock {

struct holder {
  std::string owner;  // the owner field, <client-uuid>:<n>
  std::uint32_t count = 0;
  // Set when the holder described itself (describe_holder); empty / 0 otherwise.
  std::string host;
  std::int64_t pid = 0;
  std::string command;
  std::int64_t acquired_unix_ms = 0;
};

struct lock_status {
  bool held = false;                              // by a holder
  std::vector<holder> holders;                    // one for a mutex
  std::chrono::milliseconds remaining_lease{-2};  // PTTL: -2 free, -1 no expiry
  // The last token issued to any lock of this name's cluster slot (keys::slot_fencing_counter);
  // 0 if none, or with fencing off.
  std::uint64_t fencing_counter = 0;
  std::int64_t queued = 0;  // dlock waiters in the lock's queue (keys::waiter_queue)
  std::int64_t subscribers =
      0;  // processes subscribed to the unlock channel (Redisson's and dlock's)
};

// Errors: errc::invalid_argument (bad name), errc::wrong_type, connection errors.
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
