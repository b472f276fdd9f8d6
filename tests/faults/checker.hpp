// The fault lab's checker: reads the merged history of a scenario (history.hpp) and reports
// what broke. The verdicts, each a field of `report`:
//
//   safety, all in clean()
//     overlaps                 two owners' conflicting sections of one lock at once
//     trust_violations         another owner entered while a holder still trusted its hold
//     token_regressions        an enter whose token is not above every earlier one of its lock
//     fenced_lost_updates      an accepted fenced write replaced a value its holder did not read
//     unfenced_lost_updates    the same on the plain counter
//     fenced_order_violations  the fence accepted a token below one it had accepted before
//     stale_accesses           an access after a newer holder of the lock entered
//     accesses_after_lost      an access after the holder's own `lost`
//     accesses_outside         an access with no section open
//     permit_violations        more than N permits of a semaphore held at once, unexcused
//     final_fenced_consistent  the fenced counter's end value against its increments
//   arrival order, in clean() only when check_options::fifo asks for it
//     fifo_violations          a waiter entered before one that was waiting longer
//   liveness and counts: max_handoff_gap_ns, timeouts, errors, lost_events, ...
//
//   auto r = dlock::faults::check(dlock::faults::read_histories(dir));
//   EXPECT_TRUE(r.overlaps.empty()) << dlock::faults::to_json(r);
//
// Owners and locks. Every process id `p` (a worker, or "w1/t2" for one thread of it) is one
// sequential owner; sections are kept per (owner, lock) and judged per lock, fencing per
// resource. Events without "lock" are all about one lock, so single-lock histories read as before.
//
// Critical sections. An owner's section opens at its `enter` and ends at its `exit`, at its
// `lost` (the holder learnt it may no longer hold the lock), or — when neither came, because the
// process was killed or its history ends — at its last event (`cut`). Two sections of different
// owners overlap when one enters before the other ends: two owners believed they held the lock
// at once. With dlock this happens only when a holder was frozen past its lease, or the server
// lost the lock (restart, failover), and then fencing must keep the resource consistent.
//
// Trust. A section whose `enter` recorded `left` claims that nobody else enters before
// enter + left; its trusted window is [enter, enter + left), cut short by its own `exit` or
// `lost` (a killed holder's claim stands: had it only been frozen, it would still trust). Another
// owner's enter inside the window is a trust violation — unlike a plain overlap, which a holder
// that was told of its loss (or was frozen past its claim) may cause without the lock breaking
// its word.
//
// Fencing order. Accesses the fence accepted on one resource must be monotone in token: one
// that began after another had completed may not carry a lower token. An access began after its
// `invoke` when one was recorded, else after its owner's previous event (never sooner).
//
// Unknown outcomes. A write whose completion says unknown, or whose invoke has no completion,
// may have been applied: it is not judged as a lost update nor an accepted write, and the final
// fenced value may be anything from the accepted writes to those plus the unknown ones.
//
// A stale access: a resource access by a section after another section of its lock entered (a
// newer acquisition took the lock from it). With a correct lock and a holder that checks its
// lease before each access, there are none.
//
// Shared locks. A section whose `enter` recorded "mode":"read" is a read hold of a shared lock
// (dlock::shared_mutex's read side); "write" is its write side; no mode is an exclusive hold
// (mutex, fair_mutex, and every history written before modes). Read holds may overlap each
// other: two read sections at once are counted in shared_overlaps, not reported. Every other pair
// conflicts, so a write hold is judged as an exclusive one against every hold, read or write:
// overlaps, trust violations (a conflicting enter inside a trusted window), stale accesses (a
// reader's access is stale only after a conflicting enter) and token order (a read enter is not
// compared with earlier read enters: concurrent readers record their enters in any order).
//
// Semaphores. A section whose `enter` recorded "mode":"permit" holds a permit of a semaphore of
// "lim" N permits (dlock::leased_semaphore): up to N such sections of one lock may overlap (the
// pairs are counted in shared_overlaps); a permit carries no fencing token (token 0: not judged
// for token order, and only a non-permit enter makes its accesses stale). More than N at once is
// a permit violation unless enough of the open sections were stalled past their lease — their
// claim (enter + left) ran out before the newest entered — and reported it (`lost`): then the
// excess is counted in permit_excess_excused. checker_permits.cpp says what a resource shared by
// permit holders should check instead of a fencing token.
//
// FIFO. A wait runs from `acquire` to the owner's next `enter` (waits ending in a timeout or an
// error, or never ending, are not judged). When two owners waited on one lock at once, the one
// whose acquire came first — by more than fifo_margin_ns — must enter first.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "history.hpp"

namespace dlock::faults {

struct section {
  enum class ending { exit, lost, cut };
  std::string proc;
  std::uint64_t token = 0;
  std::int64_t enter = 0;  // ns, monotonic
  std::int64_t end = 0;    // exit, lost, or the last event when cut
  ending how = ending::cut;
  std::size_t accesses = 0;
  std::string lock;           // "" in single-lock histories
  std::int64_t left_ms = -1;  // the trust claimed at enter, -1 for none
  std::string mode;           // "read", "write", "permit", or "" (exclusive)
  std::int64_t limit = 0;     // a permit's semaphore: its permits N (0 when not recorded)
};

// Whether two holds of one lock may not be held at once: all but two read holds, and two
// permits (those are judged together: at most N at once, judge_permits).
inline bool conflicting(const section& a, const section& b) {
  if (a.mode == "permit" && b.mode == "permit") return false;
  return a.mode != "read" || b.mode != "read";
}

struct overlap {
  std::size_t first = 0, second = 0;  // indices into report::sections, first entered first
  std::int64_t from = 0, to = 0;      // the time both believed they held the lock
};

struct check_options {
  bool fifo = false;  // the locks of the history claim arrival order: judge it
  // Acquires closer than this are taken as simultaneous: which arrived first is not known from
  // the history (each is stamped before its request is sent).
  std::int64_t fifo_margin_ns = 0;
};

struct report {
  std::vector<section> sections;            // by enter time
  std::vector<overlap> overlaps;            // conflicting sections at once
  std::size_t shared_overlaps = 0;          // pairs of read sections, or of permit sections,
                                            // at once (allowed)
  std::size_t trust_violations = 0;         // enters inside another owner's trusted window
  std::size_t token_regressions = 0;        // an enter whose token is not above every earlier one
  std::size_t fenced_lost_updates = 0;      // accepted fenced writes that replaced a value other
                                            // than the one their holder read
  std::size_t unfenced_lost_updates = 0;    // the same for the plain counter
  std::size_t fenced_order_violations = 0;  // accepted accesses below an earlier accepted token
  std::size_t stale_accesses = 0;           // accesses after a newer holder entered
  std::size_t accesses_after_lost = 0;      // accesses after the holder's own `lost`
  std::size_t accesses_outside = 0;         // accesses with no section open
  std::size_t permit_violations = 0;  // enters that made more than N permits held at once, with
                                      // too few of the holders stalled past their lease and lost
  std::size_t permit_excess_excused = 0;  // enters that made more than N, excused by holders
                                          // stalled past their lease that reported it
  std::size_t max_permit_holders = 0;     // the most permit sections of one lock at once
  std::size_t fenced_writes_accepted = 0;
  std::size_t fenced_writes_unknown = 0;  // outcome unknown, or never completed: maybe applied
  std::size_t fenced_rejections = 0;      // fenced reads and writes refused by the fence
  std::size_t unfenced_writes = 0;
  std::size_t unfenced_writes_unknown = 0;
  std::size_t incomplete = 0;  // invokes with no completion (the process died mid-access)
  std::optional<std::int64_t> final_fenced, final_unfenced;  // from a `final` event
  bool fifo_checked = false;                                 // check_options::fifo
  std::size_t fifo_violations = 0;
  std::size_t lost_events = 0;
  std::size_t timeouts = 0;             // acquisitions that gave up after their wait
  std::size_t errors = 0;               // user-visible errors
  std::int64_t max_handoff_gap_ns = 0;  // longest time, on one lock, from the end of the
                                        // sections so far to the next enter (liveness)
  std::vector<std::string> notes;       // one line per violation (the first 50)

  // The fenced counter's end value against its increments, when a final is known: each
  // accepted write added one, each unknown one may have.
  bool final_fenced_consistent() const {
    const auto accepted = static_cast<std::int64_t>(fenced_writes_accepted);
    return !final_fenced ||
           (*final_fenced >= accepted &&
            *final_fenced <= accepted + static_cast<std::int64_t>(fenced_writes_unknown));
  }
  // No safety violation at all (overlaps included; arrival order when it was checked).
  bool clean() const {
    return overlaps.empty() && trust_violations == 0 && token_regressions == 0 &&
           fenced_lost_updates == 0 && unfenced_lost_updates == 0 && fenced_order_violations == 0 &&
           stale_accesses == 0 && accesses_after_lost == 0 && accesses_outside == 0 &&
           permit_violations == 0 && final_fenced_consistent() &&
           (!fifo_checked || fifo_violations == 0);
  }
};

// `events` in time order (read_histories sorts them).
report check(const std::vector<event>& events, const check_options& options = {});

// The report as one JSON object (times in ms relative to the first section's enter).
std::string to_json(const report& r);

// The first section entered at or after `t` (by `proc` when not empty), or nullptr.
const section* first_enter_after(const report& r, std::int64_t t, std::string_view proc = {});

// The events of one kind (and one process when `proc` is not empty), in time order.
std::vector<event> select(const std::vector<event>& events, std::string_view kind,
                          std::string_view proc = {});

}  // namespace dlock::faults
