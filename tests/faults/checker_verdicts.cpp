// The checker's verdicts on several events (checker.hpp says what each means).
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "checker_facts.hpp"

namespace dlock::faults::detail {

namespace {

constexpr std::int64_t ns_per_ms = 1'000'000;

std::string who(const section& s) { return s.proc + " (token " + std::to_string(s.token) + ")"; }

// Section indices per lock, in enter order.
std::map<std::string, std::vector<std::size_t>> by_lock(const report& r) {
  std::map<std::string, std::vector<std::size_t>> out;
  for (std::size_t i = 0; i < r.sections.size(); ++i) out[r.sections[i].lock].push_back(i);
  return out;
}

void find_overlaps(facts& f, const std::vector<std::size_t>& idx) {
  auto& r = f.r;
  const auto& s = r.sections;
  std::int64_t end_so_far = 0;
  for (std::size_t b = 0; b < idx.size(); ++b) {
    const auto j = idx[b];
    if (b > 0) r.max_handoff_gap_ns = std::max(r.max_handoff_gap_ns, s[j].enter - end_so_far);
    end_so_far = std::max(end_so_far, s[j].end);
    for (std::size_t a = 0; a < b; ++a) {
      const auto i = idx[a];
      if (s[i].proc == s[j].proc || s[j].enter >= s[i].end) continue;
      if (!conflicting(s[i], s[j])) {
        ++r.shared_overlaps;
        continue;
      }
      r.overlaps.push_back({i, j, s[j].enter, std::min(s[i].end, s[j].end)});
      f.note(who(s[i]) + " and " + who(s[j]) + " both held the lock from " +
             ms(s[j].enter, f.origin) + " to " + ms(std::min(s[i].end, s[j].end), f.origin) +
             " ms");
    }
  }
}

// Enters inside another owner's trusted window [enter, enter + left), cut by its exit or lost.
void find_trust_violations(facts& f, const std::vector<std::size_t>& idx) {
  const auto& s = f.r.sections;
  for (std::size_t a = 0; a < idx.size(); ++a) {
    const auto& holder = s[idx[a]];
    if (holder.left_ms < 0) continue;
    auto until = holder.enter + holder.left_ms * ns_per_ms;
    if (holder.how != section::ending::cut) until = std::min(until, holder.end);
    for (std::size_t b = a + 1; b < idx.size() && s[idx[b]].enter < until; ++b) {
      const auto& other = s[idx[b]];
      if (other.proc == holder.proc || !conflicting(holder, other)) continue;
      ++f.r.trust_violations;
      f.note(who(other) + " entered at " + ms(other.enter, f.origin) + " ms while " + who(holder) +
             " trusted its hold until " + ms(until, f.origin) + " ms (left " +
             std::to_string(holder.left_ms) + " ms at its enter): a trust violation");
    }
  }
}

// A read enter is compared with the earlier conflicting enters only: readers entering together
// record their enters in any order, whatever the order their tokens were issued in.
void find_token_regressions(facts& f, const std::vector<std::size_t>& idx) {
  std::uint64_t highest = 0, highest_conflicting = 0;  // of all enters; of those but reads
  for (const auto i : idx) {
    const auto& s = f.r.sections[i];
    if (s.mode == "permit") continue;  // permits carry no token
    const bool read = s.mode == "read";
    const auto above = read ? highest_conflicting : highest;
    if (s.token <= above) {
      ++f.r.token_regressions;
      f.note(s.proc + " entered at " + ms(s.enter, f.origin) + " ms with token " +
             std::to_string(s.token) + ", not above " + std::to_string(above));
    }
    highest = std::max(highest, s.token);
    if (!read) highest_conflicting = std::max(highest_conflicting, s.token);
  }
}

// The enters of one lock in time order, as times and section indices: all of them, or (what a
// read hold conflicts with) all but the read holds'.
struct lock_enters {
  std::vector<std::int64_t> t;
  std::vector<std::size_t> index;  // into report::sections
  void add(const section& s, std::size_t i) {
    t.push_back(s.enter);
    index.push_back(i);
  }
};

void find_stale_accesses(facts& f, const std::map<std::string, std::vector<std::size_t>>& locks) {
  const auto& sections = f.r.sections;
  std::map<std::string, lock_enters> all, not_read, not_permit;
  for (const auto& [lock, idx] : locks) {
    for (const auto i : idx) {
      all[lock].add(sections[i], i);
      if (sections[i].mode != "read") not_read[lock].add(sections[i], i);
      if (sections[i].mode != "permit") not_permit[lock].add(sections[i], i);
    }
  }
  for (const auto& a : f.accesses) {
    const auto& s = sections[a.section];
    const auto& enters = s.mode == "read"     ? not_read[s.lock]
                         : s.mode == "permit" ? not_permit[s.lock]
                                              : all[s.lock];
    const auto& e = enters.t;
    // Any conflicting enter on this lock strictly between this section's enter and the access?
    const auto lo = std::upper_bound(e.begin(), e.end(), s.enter);
    const auto hi = std::lower_bound(e.begin(), e.end(), a.t);
    if (lo >= hi) continue;
    ++f.r.stale_accesses;
    const auto& newer = sections[enters.index[static_cast<std::size_t>(lo - e.begin())]];
    f.note(who(s) + " " + a.kind + " at " + ms(a.t, f.origin) + " ms after " + who(newer) +
           " entered at " + ms(newer.enter, f.origin) + " ms");
  }
}

// One resource's accepted accesses: a violation is one sent after another had been answered
// with a higher token (those are ordered in real time, so the fence saw them in that order).
void find_order_violations(facts& f, std::vector<const fenced_access*> list) {
  std::sort(list.begin(), list.end(),
            [](const auto* a, const auto* b) { return a->completed < b->completed; });
  std::vector<const fenced_access*> highest(list.size());  // the highest token answered so far
  for (std::size_t i = 0; i < list.size(); ++i) {
    highest[i] = i > 0 && highest[i - 1]->token >= list[i]->token ? highest[i - 1] : list[i];
  }
  for (const auto* y : list) {
    const auto before =
        std::lower_bound(list.begin(), list.end(), y->invoked,
                         [](const fenced_access* a, std::int64_t t) { return a->completed < t; });
    if (before == list.begin()) continue;
    const auto* x = highest[static_cast<std::size_t>(before - list.begin()) - 1];
    if (x->token <= y->token) continue;
    ++f.r.fenced_order_violations;
    f.note(y->proc + " token " + std::to_string(y->token) + " accepted at " +
           ms(y->completed, f.origin) + " ms after " + x->proc + " token " +
           std::to_string(x->token) + " was accepted at " + ms(x->completed, f.origin) +
           " ms: the fence went back");
  }
}

}  // namespace

void judge_sections(facts& f) {
  const auto locks = by_lock(f.r);
  for (const auto& [lock, idx] : locks) find_overlaps(f, idx);
  for (const auto& [lock, idx] : locks) find_trust_violations(f, idx);
  for (const auto& [lock, idx] : locks) find_token_regressions(f, idx);
  find_stale_accesses(f, locks);
}

void judge_fencing_order(facts& f) {
  std::map<std::string, std::vector<const fenced_access*>> by_resource;
  for (const auto& a : f.fenced) by_resource[a.resource].push_back(&a);
  for (auto& [resource, list] : by_resource) find_order_violations(f, std::move(list));
}

void judge_fifo(facts& f, const check_options& options) {
  if (!options.fifo) return;
  f.r.fifo_checked = true;
  auto waits = f.waits;
  std::stable_sort(waits.begin(), waits.end(),
                   [](const auto& a, const auto& b) { return a.acquire < b.acquire; });
  for (std::size_t i = 0; i < waits.size(); ++i) {
    const auto& first = waits[i];
    // Later acquires while `first` still waited: each must enter after it.
    for (std::size_t j = i + 1; j < waits.size() && waits[j].acquire < first.enter; ++j) {
      const auto& later = waits[j];
      if (later.lock != first.lock || later.proc == first.proc) continue;
      if (later.acquire - first.acquire <= options.fifo_margin_ns) continue;
      if (later.enter >= first.enter) continue;
      ++f.r.fifo_violations;
      f.note(later.proc + " (acquire at " + ms(later.acquire, f.origin) + " ms) entered at " +
             ms(later.enter, f.origin) + " ms, before " + first.proc + " (acquire at " +
             ms(first.acquire, f.origin) + " ms, entered at " + ms(first.enter, f.origin) +
             " ms): out of arrival order");
    }
  }
}

}  // namespace dlock::faults::detail
