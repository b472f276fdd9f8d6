// The checker's inside (checker.hpp): one pass over the events builds the sections and the facts
// the verdicts judge (checker.cpp); the verdicts judge them afterwards (checker_verdicts.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "checker.hpp"
#include "history.hpp"

namespace dlock::faults::detail {

// `ns` as milliseconds after `origin`, one decimal.
std::string ms(std::int64_t ns, std::int64_t origin);

struct access_ref {
  std::size_t section;  // index into report::sections
  std::int64_t t;
  std::string kind;
};

// An access the fence accepted: sent no sooner than `invoked`, answered at `completed`.
struct fenced_access {
  std::string resource;
  std::string proc;
  std::uint64_t token = 0;
  std::int64_t invoked = 0, completed = 0;
};

// A wait that ended with an enter.
struct wait_span {
  std::string proc, lock;
  std::int64_t acquire = 0, enter = 0;
};

struct facts {
  report r;
  std::int64_t origin = 0;  // the first event's time, for notes
  std::vector<access_ref> accesses;
  std::vector<fenced_access> fenced;
  std::vector<wait_span> waits;

  void note(std::string s);
};

// The pass over the events (in time order): sections by enter time, counts of what single events
// show (lost updates, rejections, unknown outcomes, errors, accesses outside a section).
facts walk(const std::vector<event>& events);

// The verdicts on several events.
void judge_sections(facts& f);  // overlaps, hand-off gaps, trust, token order, stale accesses
void judge_fencing_order(facts& f);
void judge_permits(facts& f);  // checker_permits.cpp: at most N permits at once
void judge_fifo(facts& f, const check_options& options);

}  // namespace dlock::faults::detail
