// dlock status / unlock --force.
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "cli.hpp"

namespace dlock_cli {
namespace {

void print_json_waiting(const char* key, const std::vector<dlock::waiting_owner>& v) {
  std::printf(", \"%s\": [", key);
  for (std::size_t i = 0; i < v.size(); ++i) {
    std::printf("%s{\"owner\": %s, \"expires_in_ms\": ", i ? ", " : "",
                json_string(v[i].owner).c_str());
    if (v[i].expires_in) {
      std::printf("%lld}", static_cast<long long>(v[i].expires_in->count()));
    } else {
      std::printf("null}");
    }
  }
  std::printf("]");
}

void print_json_holder(const dlock::holder& h) {
  std::printf("{\"owner\": %s, \"count\": %u", json_string(h.owner).c_str(), h.count);
  if (!h.mode.empty()) std::printf(", \"mode\": %s", json_string(h.mode).c_str());
  if (!h.host.empty()) {
    std::printf(", \"host\": %s, \"pid\": %lld, \"command\": %s, \"acquired_at\": %s",
                json_string(h.host).c_str(), static_cast<long long>(h.pid),
                json_string(h.command).c_str(), json_string(iso_time(h.acquired_unix_ms)).c_str());
  }
  std::printf("}");
}

// A plain lock's object is as it always was; the other kinds add their keys at the end.
void print_json(const std::string& name, const dlock::lock_status& s) {
  std::printf("{\"name\": %s, \"held\": %s, \"holders\": [", json_string(name).c_str(),
              s.held ? "true" : "false");
  for (std::size_t i = 0; i < s.holders.size(); ++i) {
    if (i) std::printf(", ");
    print_json_holder(s.holders[i]);
  }
  std::printf("]");
  std::printf(
      ", \"remaining_lease_ms\": %lld, \"fencing_counter\": %llu, \"queued\": %lld, "
      "\"subscribers\": %lld",
      static_cast<long long>(s.held ? s.remaining_lease.count() : 0),
      static_cast<unsigned long long>(s.fencing_counter), static_cast<long long>(s.queued),
      static_cast<long long>(s.subscribers));
  if (s.layout == dlock::lock_layout::fair) {
    std::printf(", \"kind\": \"fair\"");
    print_json_waiting("fair_queue", s.fair_queue);
    std::printf(", \"fair_queue_length\": %lld", static_cast<long long>(s.fair_queue_length));
  } else if (s.layout == dlock::lock_layout::read_write) {
    std::printf(", \"kind\": \"rwlock\", \"mode\": %s",
                s.mode.empty() ? "null" : json_string(s.mode).c_str());
    print_json_waiting("waiting_writers", s.waiting_writers);
    std::printf(", \"waiting_writers_count\": %lld",
                static_cast<long long>(s.waiting_writers_count));
  }
  std::printf("}\n");
}

// "entry expires in 4870 ms", "entry expired 120 ms ago", or "no deadline".
std::string entry_deadline(const dlock::waiting_owner& w) {
  if (!w.expires_in) return "no deadline";
  const auto ms = w.expires_in->count();
  if (ms < 0) return "entry expired " + std::to_string(-ms) + " ms ago";
  return "entry expires in " + std::to_string(ms) + " ms";
}

// A waiting list: its title and size, then one line per owner listed.
void print_text_waiting(const char* title, std::int64_t total,
                        const std::vector<dlock::waiting_owner>& v, bool numbered) {
  std::printf("  %s: %lld", title, static_cast<long long>(total));
  if (static_cast<std::size_t>(total) > v.size()) std::printf(" (the first %zu listed)", v.size());
  std::printf("\n");
  for (std::size_t i = 0; i < v.size(); ++i) {
    const auto number = numbered ? std::to_string(i + 1) + ". " : std::string{};
    std::printf("    %s%s (%s)\n", number.c_str(), v[i].owner.c_str(),
                entry_deadline(v[i]).c_str());
  }
}

void print_text(const std::string& name, const dlock::lock_status& s) {
  std::printf("%s: %s\n", name.c_str(), s.held ? "held" : "free");
  if (s.layout == dlock::lock_layout::fair) std::printf("  kind: fair lock\n");
  if (s.layout == dlock::lock_layout::read_write) {
    std::printf("  kind: read-write lock%s%s\n", s.mode.empty() ? "" : ", mode ", s.mode.c_str());
  }
  for (const auto& h : s.holders) {
    std::printf("  holder %s (count %u%s%s)\n", h.owner.c_str(), h.count,
                h.mode.empty() ? "" : ", ", h.mode.c_str());
    if (!h.host.empty()) {
      std::printf("    host %s, pid %lld, since %s\n    command: %s\n", h.host.c_str(),
                  static_cast<long long>(h.pid), iso_time(h.acquired_unix_ms).c_str(),
                  h.command.c_str());
    }
  }
  if (s.fair_queue_length > 0)
    print_text_waiting("fair queue", s.fair_queue_length, s.fair_queue, true);
  if (s.waiting_writers_count > 0) {
    print_text_waiting("waiting writers", s.waiting_writers_count, s.waiting_writers, false);
  }
  if (s.queued > 0) std::printf("  dlock waiters queued: %lld\n", static_cast<long long>(s.queued));
  if (s.held)
    std::printf("  remaining lease: %lld ms\n", static_cast<long long>(s.remaining_lease.count()));
  std::printf("  fencing counter: %llu\n  waiting subscribers: %lld\n",
              static_cast<unsigned long long>(s.fencing_counter),
              static_cast<long long>(s.subscribers));
}

// The kind whose force unlock wakes the lock's waiters where they listen: a read-write lock's
// on its channel, a fair lock's queue head on its own.
lock_kind kind_to_unlock(const dlock::lock_status& s) {
  if (s.layout == dlock::lock_layout::read_write) return lock_kind::write;
  if (s.layout == dlock::lock_layout::fair) return lock_kind::fair;
  return lock_kind::mutex;
}

}  // namespace

int run_status(const global_options& g, const std::string& name, bool json) {
  dlock::client client{make_config(g)};
  std::error_code ec;
  auto s = dlock::inspect(client, name, ec);
  if (ec) {
    complain("status: " + name, ec);
    return exit_code_for(ec);
  }
  const bool counter =
      s.layout == dlock::lock_layout::semaphore || s.layout == dlock::lock_layout::counter;
  if (counter) {
    json ? print_counter_json(name, s) : print_counter_text(name, s);
  } else {
    json ? print_json(name, s) : print_text(name, s);
  }
  return s.held ? exit_held : exit_free;
}

int run_unlock(const global_options& g, const std::string& name, bool force) {
  if (!force) {
    complain("unlock", "only --force is supported: a lock is released by its holder");
    return exit_usage;
  }
  dlock::client client{make_config(g)};
  std::error_code ec;
  // A key of another type is deleted as a mutex would be (as before kinds were told apart).
  const auto s = dlock::inspect(client, name, ec);
  if (ec && ec != dlock::errc::wrong_type) {
    complain("unlock: " + name, ec);
    return exit_code_for(ec);
  }
  // A semaphore's counter or a latch is not a lock: deleting it would lose its count.
  if (!ec &&
      (s.layout == dlock::lock_layout::semaphore || s.layout == dlock::lock_layout::counter)) {
    complain("unlock: " + name,
             "a semaphore or latch, not a lock: unlock --force releases locks only (`dlock "
             "status " +
                 name + "` shows it)");
    return exit_usage;
  }
  // Between the two calls the lock may change hands, even kinds: the message then goes to the
  // wrong channel, and its waiters find the lock free at their next re-check.
  chosen_lock lock{client, name, ec ? lock_kind::mutex : kind_to_unlock(s)};
  const bool was_held = lock.get().force_unlock(ec);
  if (ec) {
    complain("unlock: " + name, ec);
    return exit_code_for(ec);
  }
  verbose(g, name + (was_held ? " was held; deleted and waiters woken" : " was free"));
  return was_held ? exit_held : exit_free;
}

}  // namespace dlock_cli
