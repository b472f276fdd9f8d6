#include "checker.hpp"

#include <algorithm>
#include <map>
#include <sstream>

namespace dlock::faults {

namespace {

constexpr std::size_t max_notes = 50;

std::string ms(std::int64_t ns, std::int64_t origin) {
  std::ostringstream s;
  s.precision(1);
  s << std::fixed << static_cast<double>(ns - origin) / 1e6;
  return s.str();
}

// Where a process stands while its events are read in time order.
struct proc_state {
  std::optional<std::size_t> open;  // index of its open section
  bool last_section_lost = false;   // its last closed section ended with `lost`
};

class checker {
 public:
  explicit checker(const std::vector<event>& events) : events_{events} {}

  report run() {
    if (!events_.empty()) origin_ = events_.front().t;
    for (std::size_t i = 0; i < events_.size(); ++i) feed(i);
    for (auto& [proc, st] : procs_) {
      if (st.open) close(*st.open, section::ending::cut, last_event_[*st.open]);
    }
    order_sections();
    find_overlaps();
    find_token_regressions();
    find_stale_accesses();
    return std::move(r_);
  }

 private:
  void note(std::string s) {
    if (r_.notes.size() < max_notes) r_.notes.push_back(std::move(s));
  }

  void feed(std::size_t i) {
    const auto& e = events_[i];
    auto& st = procs_[e.proc];
    if (e.kind == "enter") {
      if (st.open) close(*st.open, section::ending::cut, last_event_[*st.open]);
      section s;
      s.proc = e.proc;
      s.token = e.token;
      s.enter = e.t;
      s.end = e.t;
      r_.sections.push_back(s);
      last_event_.push_back(e.t);
      st.open = r_.sections.size() - 1;
      st.last_section_lost = false;
    } else if (e.is_access()) {
      access(st, e);
    } else if (e.kind == "exit") {
      if (st.open) close(*st.open, section::ending::exit, e.t);
      st.open.reset();
      st.last_section_lost = false;
    } else if (e.kind == "lost") {
      ++r_.lost_events;
      if (st.open) close(*st.open, section::ending::lost, e.t);
      st.open.reset();
      st.last_section_lost = true;
    } else if (e.kind == "timeout") {
      ++r_.timeouts;
    } else if (e.kind == "error") {
      ++r_.errors;
      note(e.proc + " error at " + ms(e.t, origin_) + " ms: " + e.detail);
    } else if (e.kind == "final") {
      r_.final_fenced = e.value;
      r_.final_unfenced = e.prev;
    }
  }

  void access(proc_state& st, const event& e) {
    if (!st.open) {
      if (st.last_section_lost) {
        ++r_.accesses_after_lost;
        note(e.proc + " " + e.kind + " at " + ms(e.t, origin_) + " ms after its lease was lost");
      } else {
        ++r_.accesses_outside;
        note(e.proc + " " + e.kind + " at " + ms(e.t, origin_) + " ms outside any section");
      }
      return;
    }
    auto& s = r_.sections[*st.open];
    ++s.accesses;
    last_event_[*st.open] = e.t;
    accesses_.push_back({*st.open, e.t, e.kind});
    if (e.kind == "read" || e.kind == "write") {
      if (!e.ok) ++r_.fenced_rejections;
    }
    if (e.kind == "write" && e.ok) {
      ++r_.fenced_writes_accepted;
      if (e.prev != e.read) {
        ++r_.fenced_lost_updates;
        note(e.proc + " token " + std::to_string(e.token) + " fenced write at " + ms(e.t, origin_) +
             " ms replaced " + std::to_string(e.prev) + ", not the " + std::to_string(e.read) +
             " it read: a fenced lost update");
      }
    } else if (e.kind == "uwrite") {
      ++r_.unfenced_writes;
      if (e.prev != e.read) {
        ++r_.unfenced_lost_updates;
        note(e.proc + " unfenced write at " + ms(e.t, origin_) + " ms replaced " +
             std::to_string(e.prev) + ", not the " + std::to_string(e.read) + " it read");
      }
    }
  }

  void close(std::size_t idx, section::ending how, std::int64_t t) {
    r_.sections[idx].how = how;
    r_.sections[idx].end = t;
  }

  // Sections by enter time (stable: a process's own sections keep their order), with the
  // accesses' section indices remapped.
  void order_sections() {
    std::vector<std::size_t> order(r_.sections.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return r_.sections[a].enter < r_.sections[b].enter;
    });
    std::vector<std::size_t> where(order.size());
    std::vector<section> sorted;
    sorted.reserve(order.size());
    for (std::size_t k = 0; k < order.size(); ++k) {
      where[order[k]] = k;
      sorted.push_back(r_.sections[order[k]]);
    }
    r_.sections = std::move(sorted);
    for (auto& a : accesses_) a.section = where[a.section];
  }

  void find_overlaps() {
    const auto& s = r_.sections;
    std::int64_t end_so_far = 0;
    for (std::size_t j = 0; j < s.size(); ++j) {
      if (j > 0) r_.max_handoff_gap_ns = std::max(r_.max_handoff_gap_ns, s[j].enter - end_so_far);
      end_so_far = std::max(end_so_far, s[j].end);
      for (std::size_t i = 0; i < j; ++i) {
        if (s[i].proc == s[j].proc || s[j].enter >= s[i].end) continue;
        r_.overlaps.push_back({i, j, s[j].enter, std::min(s[i].end, s[j].end)});
        note(s[i].proc + " (token " + std::to_string(s[i].token) + ") and " + s[j].proc +
             " (token " + std::to_string(s[j].token) + ") both held the lock from " +
             ms(s[j].enter, origin_) + " to " + ms(std::min(s[i].end, s[j].end), origin_) + " ms");
      }
    }
  }

  void find_token_regressions() {
    std::uint64_t highest = 0;
    for (const auto& s : r_.sections) {
      if (s.token <= highest) {
        ++r_.token_regressions;
        note(s.proc + " entered at " + ms(s.enter, origin_) + " ms with token " +
             std::to_string(s.token) + ", not above " + std::to_string(highest));
      }
      highest = std::max(highest, s.token);
    }
  }

  void find_stale_accesses() {
    std::vector<std::int64_t> enters;
    for (const auto& s : r_.sections) enters.push_back(s.enter);
    for (const auto& a : accesses_) {
      const auto& s = r_.sections[a.section];
      // Any enter strictly between this section's enter and the access?
      const auto lo = std::upper_bound(enters.begin(), enters.end(), s.enter);
      const auto hi = std::lower_bound(enters.begin(), enters.end(), a.t);
      if (lo < hi) {
        ++r_.stale_accesses;
        const auto& newer = r_.sections[static_cast<std::size_t>(lo - enters.begin())];
        note(s.proc + " (token " + std::to_string(s.token) + ") " + a.kind + " at " +
             ms(a.t, origin_) + " ms after " + newer.proc + " (token " +
             std::to_string(newer.token) + ") entered at " + ms(newer.enter, origin_) + " ms");
      }
    }
  }

  struct access_ref {
    std::size_t section;
    std::int64_t t;
    std::string kind;
  };

  const std::vector<event>& events_;
  std::int64_t origin_ = 0;
  report r_;
  std::map<std::string, proc_state> procs_;
  std::vector<std::int64_t> last_event_;  // per section (in creation order)
  std::vector<access_ref> accesses_;
};

const char* ending_name(section::ending how) {
  switch (how) {
    case section::ending::exit:
      return "exit";
    case section::ending::lost:
      return "lost";
    case section::ending::cut:
      return "cut";
  }
  return "?";
}

void quote(std::ostringstream& o, const std::string& s) {
  o << '"';
  for (const char c : s) {
    if (c == '"' || c == '\\') o << '\\';
    o << (static_cast<unsigned char>(c) < 0x20 ? ' ' : c);
  }
  o << '"';
}

}  // namespace

report check(const std::vector<event>& events) { return checker{events}.run(); }

std::string to_json(const report& r) {
  const std::int64_t origin = r.sections.empty() ? 0 : r.sections.front().enter;
  std::ostringstream o;
  o << "{\"clean\":" << (r.clean() ? "true" : "false") << ",\"sections\":" << r.sections.size()
    << ",\"overlaps\":[";
  for (std::size_t i = 0; i < r.overlaps.size(); ++i) {
    const auto& ov = r.overlaps[i];
    o << (i ? "," : "") << "{\"first\":";
    quote(o, r.sections[ov.first].proc);
    o << ",\"first_token\":" << r.sections[ov.first].token << ",\"second\":";
    quote(o, r.sections[ov.second].proc);
    o << ",\"second_token\":" << r.sections[ov.second].token
      << ",\"from_ms\":" << ms(ov.from, origin) << ",\"to_ms\":" << ms(ov.to, origin) << "}";
  }
  o << "],\"token_regressions\":" << r.token_regressions
    << ",\"fenced_lost_updates\":" << r.fenced_lost_updates
    << ",\"unfenced_lost_updates\":" << r.unfenced_lost_updates
    << ",\"stale_accesses\":" << r.stale_accesses
    << ",\"accesses_after_lost\":" << r.accesses_after_lost
    << ",\"accesses_outside\":" << r.accesses_outside
    << ",\"fenced_writes_accepted\":" << r.fenced_writes_accepted
    << ",\"fenced_rejections\":" << r.fenced_rejections
    << ",\"unfenced_writes\":" << r.unfenced_writes;
  if (r.final_fenced) o << ",\"final_fenced\":" << *r.final_fenced;
  if (r.final_unfenced) o << ",\"final_unfenced\":" << *r.final_unfenced;
  o << ",\"lost_events\":" << r.lost_events << ",\"timeouts\":" << r.timeouts
    << ",\"errors\":" << r.errors << ",\"max_handoff_gap_ms\":" << ms(r.max_handoff_gap_ns, 0)
    << ",\"timeline\":[";
  for (std::size_t i = 0; i < r.sections.size(); ++i) {
    const auto& s = r.sections[i];
    o << (i ? "," : "") << "{\"proc\":";
    quote(o, s.proc);
    o << ",\"token\":" << s.token << ",\"enter_ms\":" << ms(s.enter, origin)
      << ",\"end_ms\":" << ms(s.end, origin) << ",\"end\":\"" << ending_name(s.how)
      << "\",\"accesses\":" << s.accesses << "}";
  }
  o << "],\"notes\":[";
  for (std::size_t i = 0; i < r.notes.size(); ++i) {
    o << (i ? "," : "");
    quote(o, r.notes[i]);
  }
  o << "]}";
  return o.str();
}

const section* first_enter_after(const report& r, std::int64_t t, std::string_view proc) {
  for (const auto& s : r.sections) {
    if (s.enter >= t && (proc.empty() || s.proc == proc)) return &s;
  }
  return nullptr;
}

std::vector<event> select(const std::vector<event>& events, std::string_view kind,
                          std::string_view proc) {
  std::vector<event> out;
  for (const auto& e : events) {
    if (e.kind == kind && (proc.empty() || e.proc == proc)) out.push_back(e);
  }
  return out;
}

}  // namespace dlock::faults
