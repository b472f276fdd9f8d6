// dlock status --metrics: the server-side view of every synchronizer whose name matches a
// pattern, in the Prometheus text exposition format (docs/cli.md, "status --metrics"). Names are
// found with SCAN (status_scan.cpp) and each is read with dlock::inspect, as `dlock status` reads
// one.
#include <charconv>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "cli.hpp"
#include "status_scan.hpp"

namespace dlock_cli {
namespace status_metrics_detail {

using dlock::lock_layout;

// The families, in the order printed. Every sample is a gauge: a point-in-time view.
enum family : std::size_t {
  synchronizer_info,
  lock_held,
  lock_holders,
  lock_holds,
  lock_ttl,
  lock_queued,
  lock_subscribers,
  fair_queue,
  waiting_writers,
  permits_available,
  permits_leased,
  semaphore_subscribers,
  counter_value,
  counter_subscribers,
  synchronizers,
  locks_held,
  summary_keys,
  summary_names,
  summary_nodes,
  summary_truncated,
  summary_duration,
  family_count
};

struct family_text {
  const char* name;
  const char* help;
};

constexpr family_text families[family_count] = {
    {"dlock_server_synchronizer_info",
     "A synchronizer found, by name and kind (mutex, fair_mutex, shared_mutex, leased_semaphore, "
     "latch_or_semaphore); always 1"},
    {"dlock_server_lock_held", "1 if the lock has a holder, else 0"},
    {"dlock_server_lock_holders",
     "Owners holding the lock: 1 for a mutex or fair lock, the readers and the writer of a "
     "read-write lock"},
    {"dlock_server_lock_holds",
     "Holds of the lock summed over its holders (reentrant holds count)"},
    {"dlock_server_lock_ttl_seconds",
     "Time left of the lock's lease (its hash's PTTL); absent when free or without expiry"},
    {"dlock_server_lock_queued_waiters",
     "dlock acquisitions in the lock's waiter queue (dlock_lock_queue); Redisson's RLock waiters "
     "and fair waiters are not queued there"},
    {"dlock_server_lock_subscribers",
     "Subscriptions to the lock's unlock channels (PUBSUB NUMSUB, summed): one per connection and "
     "channel, so the waiters of one client that share a channel count once (a fair lock's "
     "waiters each have a channel of their own)"},
    {"dlock_server_fair_queue_length", "Owners waiting in a fair lock's queue, in turn"},
    {"dlock_server_rwlock_waiting_writers",
     "dlock writers waiting for a read-write lock (new dlock readers wait behind them)"},
    {"dlock_server_semaphore_permits_available",
     "Permits available of a leased semaphore with permits leased"},
    {"dlock_server_semaphore_permits_leased",
     "Permits leased of a leased semaphore (expired ones not yet reclaimed included)"},
    {"dlock_server_semaphore_subscribers",
     "Connections subscribed to a semaphore's channel (clients waiting for permits, not waiters)"},
    {"dlock_server_latch_or_semaphore_value",
     "A bare counter: a latch's count, or the permits available of a semaphore with none leased "
     "(their keys look the same)"},
    {"dlock_server_latch_or_semaphore_subscribers",
     "Connections subscribed to a bare counter's semaphore or latch channel (clients, not "
     "waiters)"},
    {"dlock_server_synchronizers", "Synchronizers found, by kind"},
    {"dlock_server_locks_held",
     "Synchronizers held, by kind: locks with a holder, semaphores with a permit leased"},
    {"dlock_server_scan_keys", "Keys SCAN returned for the pattern"},
    {"dlock_server_scan_names",
     "Names inspected: the keys less those kept beside a name, each name once (at most --limit)"},
    {"dlock_server_scan_nodes", "Servers scanned: 1, or every master of a Redis Cluster"},
    {"dlock_server_scan_truncated",
     "1 if --limit names were reached before the scan ended (the view is partial), else 0"},
    {"dlock_server_scan_duration_seconds",
     "Time the connection, the scan and the reads of the names took"},
};

// `s` as the exposition format's label value: backslash, double quote and newline escaped, and
// bytes that are not UTF-8 replaced with U+FFFD (label values are UTF-8; key names are bytes).
std::string label_value(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const std::size_t n = c < 0x80         ? 1
                          : (c >> 5) == 6  ? 2
                          : (c >> 4) == 14 ? 3
                          : (c >> 3) == 30 ? 4
                                           : 0;
    bool valid = n > 0 && i + n <= s.size();
    for (std::size_t k = 1; valid && k < n; ++k) {
      valid = (static_cast<unsigned char>(s[i + k]) >> 6) == 2;
    }
    if (!valid) {
      out += "\xEF\xBF\xBD";
      ++i;
      continue;
    }
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out.append(s.substr(i, n));
    }
    i += n;
  }
  return out;
}

class exposition {
 public:
  void add(family f, const std::string& labels, std::string value) {
    samples_[f].push_back("{" + labels + "} " + std::move(value));
  }
  void add(family f, const std::string& labels, std::int64_t value) {
    add(f, labels, std::to_string(value));
  }
  void add(family f, std::int64_t value) { samples_[f].push_back(" " + std::to_string(value)); }
  void add(family f, std::string value) { samples_[f].push_back(" " + std::move(value)); }

  void print() const {
    for (std::size_t f = 0; f < family_count; ++f) {
      std::printf("# HELP %s %s\n# TYPE %s gauge\n", families[f].name, families[f].help,
                  families[f].name);
      for (const auto& s : samples_[f]) std::printf("%s%s\n", families[f].name, s.c_str());
    }
  }

 private:
  std::vector<std::string> samples_[family_count];
};

const char* kind_label(lock_layout l) {
  switch (l) {
    case lock_layout::mutex:
      return "mutex";
    case lock_layout::fair:
      return "fair_mutex";
    case lock_layout::read_write:
      return "shared_mutex";
    case lock_layout::semaphore:
      return "leased_semaphore";
    case lock_layout::counter:
      return "latch_or_semaphore";
    case lock_layout::none:
      break;
  }
  return "none";
}

std::string seconds_text(std::chrono::milliseconds d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(d.count()) / 1000.0);
  return buf;
}

struct totals {
  std::map<std::string, std::int64_t> found, held;  // by kind
};

void add_lock(exposition& x, const std::string& labels, const dlock::lock_status& s) {
  x.add(lock_held, labels, s.held ? 1 : 0);
  x.add(lock_holders, labels, static_cast<std::int64_t>(s.holders.size()));
  std::int64_t holds = 0;
  for (const auto& h : s.holders) holds += h.count;
  x.add(lock_holds, labels, holds);
  if (s.held && s.remaining_lease.count() >= 0) {
    x.add(lock_ttl, labels, seconds_text(s.remaining_lease));
  }
  x.add(lock_queued, labels, s.queued);
  x.add(lock_subscribers, labels, s.subscribers);
}

void add_name(exposition& x, totals& t, const std::string& name, const dlock::lock_status& s) {
  const std::string kind = kind_label(s.layout);
  const auto name_label = "name=\"" + label_value(name) + "\"";
  const auto labels = name_label + ",kind=\"" + kind + "\"";
  x.add(synchronizer_info, labels, 1);
  ++t.found[kind];
  if (s.held) ++t.held[kind];
  switch (s.layout) {
    case lock_layout::semaphore:
      x.add(permits_available, name_label, s.counter);
      x.add(permits_leased, name_label, s.permits_leased);
      x.add(semaphore_subscribers, name_label, s.semaphore_subscribers);
      return;
    case lock_layout::counter:
      x.add(counter_value, name_label, s.counter);
      x.add(counter_subscribers, name_label + ",channel=\"semaphore\"", s.semaphore_subscribers);
      x.add(counter_subscribers, name_label + ",channel=\"latch\"", s.latch_subscribers);
      return;
    default:
      break;
  }
  add_lock(x, labels, s);
  if (s.layout == lock_layout::fair) x.add(fair_queue, name_label, s.fair_queue_length);
  if (s.layout == lock_layout::read_write) {
    x.add(waiting_writers, name_label, s.waiting_writers_count);
  }
}

// Whether a string holds an integer, as a counter's does.
bool is_integer(const std::string& text) {
  std::int64_t v = 0;
  const auto* end = text.data() + text.size();
  const auto [at, err] = std::from_chars(text.data(), end, v);
  return !text.empty() && err == std::errc{} && at == end;
}

// Whether the keys inspect() read are a synchronizer's rather than some other value of the
// user's under that name: a lock hash's fields are owners (`<uuid>:<n>`) with hold counts from
// 1; a counter is an integer. (inspect() reads a hash of any fields as holders, and a string
// that is no number as 0.)
bool is_synchronizer(dlock::client& c, const std::string& name, const dlock::lock_status& s,
                     std::error_code& ec) {
  switch (s.layout) {
    case lock_layout::none:
      return false;
    case lock_layout::semaphore:
      return true;
    case lock_layout::counter:
      return is_integer(c.execute({"GET", name}, ec).str()) && !ec;
    default:
      break;
  }
  for (const auto& h : s.holders) {
    if (h.count < 1 || h.owner.find(':') == std::string::npos) return false;
  }
  return true;
}

void add_summary(exposition& x, const totals& t, const scan_result& scan,
                 std::chrono::steady_clock::duration took) {
  for (const char* kind :
       {"mutex", "fair_mutex", "shared_mutex", "leased_semaphore", "latch_or_semaphore"}) {
    const auto label = std::string{"kind=\""} + kind + "\"";
    const auto found = t.found.find(kind);
    x.add(synchronizers, label, found == t.found.end() ? 0 : found->second);
    if (std::string_view{kind} == "latch_or_semaphore") continue;  // a bare counter has no holder
    const auto held = t.held.find(kind);
    x.add(locks_held, label, held == t.held.end() ? 0 : held->second);
  }
  x.add(summary_keys, scan.keys);
  x.add(summary_names, static_cast<std::int64_t>(scan.names.size()));
  x.add(summary_nodes, static_cast<std::int64_t>(scan.nodes));
  x.add(summary_truncated, scan.truncated ? 1 : 0);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6f", std::chrono::duration<double>(took).count());
  x.add(summary_duration, std::string{buf});
}

// Each name read and added; false (and why on stderr) on an error that ends the command.
bool add_names(dlock::client& c, const scan_result& scan, exposition& x, totals& t, int& rc) {
  for (const auto& name : scan.names) {
    std::error_code ec;
    const auto s = dlock::inspect(c, name, ec);
    // Not a name dlock accepts (too long, its derived keys in other slots) or a key of another
    // type (a list, a set...): not a synchronizer.
    if (ec == dlock::errc::invalid_argument || ec == dlock::errc::wrong_type) continue;
    if (!ec && !is_synchronizer(c, name, s, ec) && !ec) continue;
    if (ec) {
      complain("status --metrics: " + name, ec);
      rc = exit_code_for(ec);
      return false;
    }
    add_name(x, t, name, s);
  }
  return true;
}

}  // namespace status_metrics_detail

int run_status_metrics(const global_options& g, const metrics_options& o) {
  using namespace status_metrics_detail;
  if (const auto why = pattern_error(o.match); !why.empty()) {
    complain("status --metrics: --match", why);
    return exit_usage;
  }
  const auto limit = count_arg(o.limit, "status --metrics: --limit", 10'000'000);
  if (!limit) return exit_usage;
  const auto started = std::chrono::steady_clock::now();
  dlock::client client{make_config(g)};
  std::error_code ec;
  const auto scan = scan_names(client, o.match, static_cast<std::size_t>(*limit), ec);
  if (ec) {
    complain("status --metrics: SCAN", ec);
    return exit_code_for(ec);
  }
  exposition x;
  totals t;
  int rc = 0;
  if (!add_names(client, scan, x, t, rc)) return rc;
  add_summary(x, t, scan, std::chrono::steady_clock::now() - started);
  x.print();
  if (scan.truncated) {
    complain("status --metrics",
             "stopped at --limit " + o.limit + " names: the view is partial (raise --limit)");
  }
  return 0;
}

}  // namespace dlock_cli
