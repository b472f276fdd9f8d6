// Deliberately broken Redis locks, each with one classic flaw (FAILURES.md #1, #29), for the
// fault lab's self-test: run through the same workload and faults as dlock, the checker must
// flag them.
//
// All take the lock with `SET name <owner> NX PX lease` (polling every 10 ms while it is held)
// and a fencing token from INCR of the per-lock counter redisson_lock_token:{name}.
// - no_owner_check: the holder checks its lease locally (it stops at send time + lease, like a
//   correct client) but releases with a plain DEL, so a holder whose lease ran out deletes the
//   next holder's lock and a third process walks in beside the second.
// - no_expiry_check: releases correctly (compare-and-delete) but never checks its lease: a
//   holder frozen past its lease goes on using the resource beside the next holder.
// - reuses_tokens: as no_expiry_check, and its token is the counter's GET + 1 instead of INCR,
//   so every holder carries the same token: the fence, which saves no_expiry_check, lets the
//   frozen holder's write through (fencing is only as good as its tokens).
// - over_reports_trust: as no_owner_check's local check, but it believes (and reports, as
//   time left) a lease three times the one it set, and goes on using the resource for that
//   long: the next holder enters while it still claims the lock.
// One thread at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include "dlock/client.hpp"

namespace dlock::faults {

class broken_lock {
 public:
  enum class flaw { no_owner_check, no_expiry_check, reuses_tokens, over_reports_trust };

  broken_lock(dlock::client& c, std::string name, flaw f, std::chrono::milliseconds lease);

  // The flaw dlock_fault_worker's --lock names: "broken-no-owner-check", "broken-no-expiry",
  // "broken-reuses-tokens", "broken-over-reports-trust"; nullopt for any other name.
  static std::optional<flaw> flaw_named(std::string_view lock);

  // Polls until acquired or `wait` passes (errc::timeout). Sets `token`.
  std::error_code acquire(std::chrono::milliseconds wait, std::uint64_t& token);
  // Whether the holder believes its lease is over (never, when it does not check).
  bool expired() const;
  // Lease left by the local clock; -1 when the lock does not look (no_expiry_check,
  // reuses_tokens).
  std::int64_t time_left_ms() const;
  std::error_code release();

 private:
  bool checks_lease() const;
  std::error_code take_token(std::uint64_t& token);

  dlock::client& client_;
  std::string name_;
  flaw flaw_;
  std::chrono::milliseconds lease_;
  std::string owner_;
  std::chrono::steady_clock::time_point deadline_{};
};

}  // namespace dlock::faults
