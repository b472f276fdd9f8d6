// The fault lab's checker: reads the merged history of a scenario (history.hpp) and reports
// what broke — safety (overlapping critical sections, fencing tokens going backwards, lost
// updates on the fenced and the unfenced counter, holders touching the resource after a newer
// holder entered or after their own lease-lost signal) and liveness (hand-off gaps).
//
//   auto r = dlock::faults::check(dlock::faults::read_histories(dir));
//   EXPECT_TRUE(r.overlaps.empty()) << dlock::faults::to_json(r);
//
// Critical sections. A worker's section opens at its `enter` and ends at its `exit`, at its
// `lost` (the holder learnt it may no longer hold the lock), or — when neither came, because the
// process was killed or its history ends — at its last event. Two sections of different
// processes overlap when one enters before the other ends: two processes believed they held
// the lock at once. With dlock this happens only when a holder was frozen past its lease, and
// then fencing must keep the resource consistent.
//
// A stale access: a resource access by a section after another section entered (a newer
// acquisition took the lock from it). With a correct lock and a holder that checks its lease
// before each access, there are none.
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
};

struct overlap {
  std::size_t first = 0, second = 0;  // indices into report::sections, first entered first
  std::int64_t from = 0, to = 0;      // the time both believed they held the lock
};

struct report {
  std::vector<section> sections;  // by enter time
  std::vector<overlap> overlaps;
  std::size_t token_regressions = 0;      // an enter whose token is not above every earlier one
  std::size_t fenced_lost_updates = 0;    // accepted fenced writes that replaced a value other
                                          // than the one their holder read
  std::size_t unfenced_lost_updates = 0;  // the same for the plain counter
  std::size_t stale_accesses = 0;         // accesses after a newer holder entered
  std::size_t accesses_after_lost = 0;    // accesses after the holder's own `lost`
  std::size_t accesses_outside = 0;       // accesses with no section open
  std::size_t fenced_writes_accepted = 0;
  std::size_t fenced_rejections = 0;  // fenced reads and writes refused by the fence
  std::size_t unfenced_writes = 0;
  std::optional<std::int64_t> final_fenced, final_unfenced;  // from a `final` event
  std::size_t lost_events = 0;
  std::size_t timeouts = 0;             // acquisitions that gave up after their wait
  std::size_t errors = 0;               // user-visible errors
  std::int64_t max_handoff_gap_ns = 0;  // longest time from the end of the sections so far
                                        // to the next enter (liveness)
  std::vector<std::string> notes;       // one line per violation (the first 50)

  // The fenced counter's end value against its accepted increments, when a final is known.
  bool final_fenced_consistent() const {
    return !final_fenced || *final_fenced == static_cast<std::int64_t>(fenced_writes_accepted);
  }
  // No safety violation at all (overlaps included).
  bool clean() const {
    return overlaps.empty() && token_regressions == 0 && fenced_lost_updates == 0 &&
           unfenced_lost_updates == 0 && stale_accesses == 0 && accesses_after_lost == 0 &&
           accesses_outside == 0 && final_fenced_consistent();
  }
};

// `events` in time order (read_histories sorts them).
report check(const std::vector<event>& events);

// The report as one JSON object (times in ms relative to the first section's enter).
std::string to_json(const report& r);

// The first section entered at or after `t` (by `proc` when not empty), or nullptr.
const section* first_enter_after(const report& r, std::int64_t t, std::string_view proc = {});

// The events of one kind (and one process when `proc` is not empty), in time order.
std::vector<event> select(const std::vector<event>& events, std::string_view kind,
                          std::string_view proc = {});

}  // namespace dlock::faults
