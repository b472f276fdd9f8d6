// The checker's N-holder rule for semaphores (checker.hpp, "Semaphores"): sections that hold a
// permit ("mode":"permit", "lim" N) of one semaphore may overlap up to N at a time. When an enter
// makes more than N open, the open sections stalled past their lease — whose claim at enter
// (enter + left) ran out before that enter — and that reported it (`lost`) are set aside; if
// more than N remain, the enter is a permit violation. A stalled holder that never reported its
// loss excuses nothing: it went on as if it held a permit the server had given to another.
//
// What a protected resource should check instead of a fencing token. Permits carry none: N
// holders share the resource at once, so there is no single newest holder whose token could
// turn the others away. The holder bounds itself instead: before each write it checks
// permit::lost() and permit::time_left(), and it only starts a write whose own duration (with
// the resource's timeout) is bounded well under the time left, so no write of a holder that
// lost its permit lands after the lease the server judged by — what dlock_fault_worker does
// before every access, and what accesses_after_lost checks. The resource itself can do more
// when it can read the lock server: it records the permit id (permit::ids()) with each write
// and refuses writes from ids no longer in the `{name}:timeout` sorted set (reclaimed or
// released), checked in the same atomic step as the write (e.g. one script when the resource
// lives on the same Redis). Work that must not run twice at all needs a lock with a fencing
// token, not a semaphore.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "checker_facts.hpp"

namespace dlock::faults::detail {

namespace {

constexpr std::int64_t permit_ns_per_ms = 1'000'000;

std::string permit_holder(const section& s) { return s.proc; }

// Whether `s`, open at `t`, was stalled past its lease then and reported its loss.
bool stalled_and_lost(const section& s, std::int64_t t) {
  return s.left_ms >= 0 && s.enter + s.left_ms * permit_ns_per_ms <= t &&
         s.how == section::ending::lost;
}

// More than `limit` sections in `open` at the enter of `newest` (the last of them).
void judge_excess(facts& f, const std::vector<std::size_t>& open, std::size_t limit) {
  const auto& s = f.r.sections;
  const auto& newest = s[open.back()];
  std::string trusted, excused;
  std::size_t n_trusted = 0;
  for (const auto i : open) {
    const bool out = i != open.back() && stalled_and_lost(s[i], newest.enter);
    auto& list = out ? excused : trusted;
    list += (list.empty() ? "" : ", ") + permit_holder(s[i]);
    n_trusted += !out;
  }
  if (n_trusted <= limit) {
    ++f.r.permit_excess_excused;
    return;
  }
  ++f.r.permit_violations;
  f.note(newest.proc + " entered at " + ms(newest.enter, f.origin) + " ms with " +
         std::to_string(open.size()) + " permits held of " + std::to_string(limit) + ": " +
         std::to_string(n_trusted) + " held as valid (" + trusted + ")" +
         (excused.empty() ? std::string{} : ", set aside as stalled and lost: " + excused) +
         ": a permit violation");
}

// One semaphore's permit sections, in enter order.
void judge_semaphore(facts& f, const std::vector<std::size_t>& idx) {
  const auto& s = f.r.sections;
  std::vector<std::size_t> open;
  for (const auto j : idx) {
    std::erase_if(open, [&](std::size_t i) { return s[i].end <= s[j].enter; });
    open.push_back(j);
    f.r.max_permit_holders = std::max(f.r.max_permit_holders, open.size());
    // The smallest N any open section recorded (one that recorded none counts as 1).
    std::int64_t limit = 0;
    for (const auto i : open) {
      const auto n = std::max<std::int64_t>(1, s[i].limit);
      limit = limit == 0 ? n : std::min(limit, n);
    }
    if (open.size() > static_cast<std::size_t>(limit)) {
      judge_excess(f, open, static_cast<std::size_t>(limit));
    }
  }
}

}  // namespace

void judge_permits(facts& f) {
  std::map<std::string, std::vector<std::size_t>> by_lock;
  for (std::size_t i = 0; i < f.r.sections.size(); ++i) {
    if (f.r.sections[i].mode == "permit") by_lock[f.r.sections[i].lock].push_back(i);
  }
  for (const auto& [lock, idx] : by_lock) judge_semaphore(f, idx);
}

}  // namespace dlock::faults::detail
