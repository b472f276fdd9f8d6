// The checker's report as JSON, and the look-ups tests make in a report or a history.
#include <sstream>

#include "checker.hpp"
#include "checker_facts.hpp"

namespace dlock::faults {

namespace {

using detail::ms;

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

void overlaps_json(std::ostringstream& o, const report& r, std::int64_t origin) {
  o << "\"overlaps\":[";
  for (std::size_t i = 0; i < r.overlaps.size(); ++i) {
    const auto& ov = r.overlaps[i];
    const auto& first = r.sections[ov.first];
    o << (i ? "," : "") << "{\"first\":";
    quote(o, first.proc);
    o << ",\"first_token\":" << first.token << ",\"second\":";
    quote(o, r.sections[ov.second].proc);
    o << ",\"second_token\":" << r.sections[ov.second].token;
    if (!first.lock.empty()) {
      o << ",\"lock\":";
      quote(o, first.lock);
    }
    o << ",\"from_ms\":" << ms(ov.from, origin) << ",\"to_ms\":" << ms(ov.to, origin) << "}";
  }
  o << "],\"shared_overlaps\":" << r.shared_overlaps;
}

void counts_json(std::ostringstream& o, const report& r) {
  o << ",\"trust_violations\":" << r.trust_violations
    << ",\"token_regressions\":" << r.token_regressions
    << ",\"fenced_lost_updates\":" << r.fenced_lost_updates
    << ",\"unfenced_lost_updates\":" << r.unfenced_lost_updates
    << ",\"fenced_order_violations\":" << r.fenced_order_violations
    << ",\"stale_accesses\":" << r.stale_accesses
    << ",\"accesses_after_lost\":" << r.accesses_after_lost
    << ",\"accesses_outside\":" << r.accesses_outside
    << ",\"permit_violations\":" << r.permit_violations
    << ",\"permit_excess_excused\":" << r.permit_excess_excused
    << ",\"max_permit_holders\":" << r.max_permit_holders
    << ",\"fenced_writes_accepted\":" << r.fenced_writes_accepted
    << ",\"fenced_writes_unknown\":" << r.fenced_writes_unknown
    << ",\"fenced_rejections\":" << r.fenced_rejections
    << ",\"unfenced_writes\":" << r.unfenced_writes
    << ",\"unfenced_writes_unknown\":" << r.unfenced_writes_unknown
    << ",\"incomplete\":" << r.incomplete;
  if (r.final_fenced) o << ",\"final_fenced\":" << *r.final_fenced;
  if (r.final_unfenced) o << ",\"final_unfenced\":" << *r.final_unfenced;
  if (r.fifo_checked) o << ",\"fifo_violations\":" << r.fifo_violations;
  o << ",\"lost_events\":" << r.lost_events << ",\"timeouts\":" << r.timeouts
    << ",\"errors\":" << r.errors << ",\"max_handoff_gap_ms\":" << ms(r.max_handoff_gap_ns, 0);
}

void timeline_json(std::ostringstream& o, const report& r, std::int64_t origin) {
  o << ",\"timeline\":[";
  for (std::size_t i = 0; i < r.sections.size(); ++i) {
    const auto& s = r.sections[i];
    o << (i ? "," : "") << "{\"proc\":";
    quote(o, s.proc);
    if (!s.lock.empty()) {
      o << ",\"lock\":";
      quote(o, s.lock);
    }
    if (!s.mode.empty()) {
      o << ",\"mode\":";
      quote(o, s.mode);
    }
    if (s.limit != 0) o << ",\"limit\":" << s.limit;
    o << ",\"token\":" << s.token << ",\"enter_ms\":" << ms(s.enter, origin);
    if (s.left_ms >= 0) o << ",\"left_ms\":" << s.left_ms;
    o << ",\"end_ms\":" << ms(s.end, origin) << ",\"end\":\"" << ending_name(s.how)
      << "\",\"accesses\":" << s.accesses << "}";
  }
  o << "]";
}

}  // namespace

std::string to_json(const report& r) {
  const std::int64_t origin = r.sections.empty() ? 0 : r.sections.front().enter;
  std::ostringstream o;
  o << "{\"clean\":" << (r.clean() ? "true" : "false") << ",\"sections\":" << r.sections.size()
    << ",";
  overlaps_json(o, r, origin);
  counts_json(o, r);
  timeline_json(o, r, origin);
  o << ",\"notes\":[";
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
