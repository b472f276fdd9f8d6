#include "checker.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <sstream>
#include <utility>

#include "checker_facts.hpp"

namespace dlock::faults {

namespace detail {

namespace {

constexpr std::size_t max_notes = 50;

// Sections are kept per owner (a process or one thread of it) and lock.
using owner_lock = std::pair<std::string, std::string>;

// Where an owner stands on one lock while the events are read in time order.
struct owner_state {
  std::optional<std::size_t> open;  // index of its open section
  bool last_section_lost = false;   // its last closed section ended with `lost`
};

// An invoke waiting for its completion.
struct pending_invoke {
  std::int64_t t = 0;
  std::string op, lock;
};

class walker {
 public:
  facts run(const std::vector<event>& events) {
    if (!events.empty()) f_.origin = events.front().t;
    for (const auto& e : events) feed(e);
    for (auto& [key, st] : owners_) {
      if (st.open) close(*st.open, section::ending::cut, last_event_[*st.open]);
    }
    for (const auto& [proc, p] : pending_) abandon(proc, p);
    order_sections();
    return std::move(f_);
  }

 private:
  void feed(const event& e) {
    const owner_lock key{e.proc, e.lock};
    auto& st = owners_[key];
    if (e.kind == "enter") {
      enter(key, st, e);
    } else if (e.kind == "invoke") {
      invoke(st, e);
    } else if (e.is_access()) {
      access(st, e);
    } else if (e.kind == "exit" || e.kind == "lost") {
      const bool lost = e.kind == "lost";
      r().lost_events += lost;
      if (st.open) close(*st.open, lost ? section::ending::lost : section::ending::exit, e.t);
      st.open.reset();
      st.last_section_lost = lost;
    } else if (e.kind == "acquire") {
      waiting_[key] = e.t;
    } else if (e.kind == "timeout") {
      ++r().timeouts;
      waiting_.erase(key);
    } else if (e.kind == "error") {
      ++r().errors;
      waiting_.erase(key);
      f_.note(e.proc + " error at " + ms(e.t, f_.origin) + " ms: " + e.detail);
    } else if (e.kind == "final") {
      r().final_fenced = e.value;
      r().final_unfenced = e.prev;
    }
    // A `lost` may come from another thread of the process (a callback): it says nothing about
    // when the owner's next access was sent.
    if (e.kind != "lost") last_main_[e.proc] = e.t;
  }

  report& r() { return f_.r; }

  void enter(const owner_lock& key, owner_state& st, const event& e) {
    if (st.open) close(*st.open, section::ending::cut, last_event_[*st.open]);
    r().sections.push_back({.proc = e.proc,
                            .token = e.token,
                            .enter = e.t,
                            .end = e.t,
                            .lock = e.lock,
                            .left_ms = e.left_ms,
                            .mode = e.mode,
                            .limit = e.limit});
    last_event_.push_back(e.t);
    st.open = r().sections.size() - 1;
    st.last_section_lost = false;
    if (auto w = waiting_.find(key); w != waiting_.end()) {
      f_.waits.push_back({e.proc, e.lock, w->second, e.t});
      waiting_.erase(w);
    }
  }

  void invoke(owner_state& st, const event& e) {
    // An owner is sequential: a new invoke means the previous one never completed.
    if (auto it = pending_.find(e.proc); it != pending_.end()) abandon(it->first, it->second);
    pending_[e.proc] = {e.t, e.op, e.lock};
    if (st.open) last_event_[*st.open] = e.t;
  }

  // An access sent but never answered (the process died, or moved on): it may have applied.
  void abandon(const std::string& proc, const pending_invoke& p) {
    ++r().incomplete;
    r().fenced_writes_unknown += p.op == "write";
    r().unfenced_writes_unknown += p.op == "uwrite";
    f_.note(proc + " " + p.op + " invoked at " + ms(p.t, f_.origin) +
            " ms never completed: its outcome is unknown");
  }

  // When the access was sent, at the earliest: its invoke, else the owner's previous event.
  std::int64_t sent_after(const event& e) {
    if (auto it = pending_.find(e.proc); it != pending_.end()) {
      if (it->second.op == e.kind && it->second.lock == e.lock) {
        const auto t = it->second.t;
        pending_.erase(it);
        return t;
      }
    }
    const auto m = last_main_.find(e.proc);
    return m != last_main_.end() ? m->second : std::numeric_limits<std::int64_t>::min();
  }

  void access(owner_state& st, const event& e) {
    outcome(e, sent_after(e));
    if (!st.open) {
      if (st.last_section_lost) {
        ++r().accesses_after_lost;
        f_.note(e.proc + " " + e.kind + " at " + ms(e.t, f_.origin) +
                " ms after its lease was lost");
      } else {
        ++r().accesses_outside;
        f_.note(e.proc + " " + e.kind + " at " + ms(e.t, f_.origin) + " ms outside any section");
      }
      return;
    }
    ++r().sections[*st.open].accesses;
    last_event_[*st.open] = e.t;
    f_.accesses.push_back({*st.open, e.t, e.kind});
  }

  // What the access's own outcome shows.
  void outcome(const event& e, std::int64_t sent) {
    const bool fenced = e.kind == "read" || e.kind == "write";
    if (e.unknown) {  // maybe applied: neither accepted nor refused, never a lost update
      r().fenced_writes_unknown += e.kind == "write";
      r().unfenced_writes_unknown += e.kind == "uwrite";
      return;
    }
    if (fenced && !e.ok) ++r().fenced_rejections;
    if (fenced && e.ok) {
      f_.fenced.push_back({e.resource.empty() ? e.lock : e.resource, e.proc, e.token, sent, e.t});
    }
    if (e.kind == "write" && e.ok) {
      ++r().fenced_writes_accepted;
      if (e.prev != e.read) {
        ++r().fenced_lost_updates;
        f_.note(e.proc + " token " + std::to_string(e.token) + " fenced write at " +
                ms(e.t, f_.origin) + " ms replaced " + std::to_string(e.prev) + ", not the " +
                std::to_string(e.read) + " it read: a fenced lost update");
      }
    } else if (e.kind == "uwrite") {
      ++r().unfenced_writes;
      if (e.prev != e.read) {
        ++r().unfenced_lost_updates;
        f_.note(e.proc + " unfenced write at " + ms(e.t, f_.origin) + " ms replaced " +
                std::to_string(e.prev) + ", not the " + std::to_string(e.read) + " it read");
      }
    }
  }

  void close(std::size_t idx, section::ending how, std::int64_t t) {
    r().sections[idx].how = how;
    r().sections[idx].end = t;
  }

  // Sections by enter time (stable: an owner's own sections keep their order), with the
  // accesses' section indices remapped.
  void order_sections() {
    auto& sections = r().sections;
    std::vector<std::size_t> order(sections.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return sections[a].enter < sections[b].enter;
    });
    std::vector<std::size_t> where(order.size());
    std::vector<section> sorted;
    sorted.reserve(order.size());
    for (std::size_t k = 0; k < order.size(); ++k) {
      where[order[k]] = k;
      sorted.push_back(sections[order[k]]);
    }
    sections = std::move(sorted);
    for (auto& a : f_.accesses) a.section = where[a.section];
  }

  facts f_;
  std::map<owner_lock, owner_state> owners_;
  std::map<owner_lock, std::int64_t> waiting_;     // acquire times of waits under way
  std::map<std::string, std::int64_t> last_main_;  // per owner: its latest event but `lost`
  std::map<std::string, pending_invoke> pending_;  // per owner
  std::vector<std::int64_t> last_event_;           // per section (in creation order)
};

}  // namespace

std::string ms(std::int64_t ns, std::int64_t origin) {
  std::ostringstream s;
  s.precision(1);
  s << std::fixed << static_cast<double>(ns - origin) / 1e6;
  return s.str();
}

void facts::note(std::string s) {
  if (r.notes.size() < max_notes) r.notes.push_back(std::move(s));
}

facts walk(const std::vector<event>& events) { return walker{}.run(events); }

}  // namespace detail

report check(const std::vector<event>& events, const check_options& options) {
  auto f = detail::walk(events);
  detail::judge_sections(f);
  detail::judge_fencing_order(f);
  detail::judge_permits(f);
  detail::judge_fifo(f, options);
  return std::move(f.r);
}

}  // namespace dlock::faults
