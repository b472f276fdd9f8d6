// dlock status of the counters: a leased semaphore with permits in use, or a bare counter
// (a counting semaphore, a latch, or a leased semaphore with no permit in use: their keys look
// the same).
#include <cstdio>
#include <string>

#include "cli.hpp"

namespace dlock_cli {
namespace {

// "lease ends in 29512 ms", "lease ended 120 ms ago: ...", or "no lease: ...".
std::string permit_deadline(const dlock::leased_permit& p) {
  if (!p.expires_in) return "no lease: it never expires";
  const auto ms = p.expires_in->count();
  if (ms < 0) {
    return "lease ended " + std::to_string(-ms) + " ms ago: the next call on the semaphore " +
           "reclaims it";
  }
  return "lease ends in " + std::to_string(ms) + " ms";
}

void print_permit_json(const dlock::leased_permit& p) {
  std::printf("{\"id\": %s, \"expires_in_ms\": ", json_string(p.id).c_str());
  if (p.expires_in) {
    std::printf("%lld", static_cast<long long>(p.expires_in->count()));
  } else {
    std::printf("null");
  }
  if (!p.host.empty()) {
    std::printf(", \"host\": %s, \"pid\": %lld, \"command\": %s, \"acquired_at\": %s",
                json_string(p.host).c_str(), static_cast<long long>(p.pid),
                json_string(p.command).c_str(), json_string(iso_time(p.acquired_unix_ms)).c_str());
  }
  std::printf("}");
}

void print_semaphore_text(const std::string& name, const dlock::lock_status& s) {
  const auto in_use = static_cast<long long>(s.permits_leased);
  std::printf("%s: semaphore, %lld of %lld permits in use\n", name.c_str(), in_use,
              static_cast<long long>(s.counter) + in_use);
  std::printf("  available: %lld\n", static_cast<long long>(s.counter));
  if (static_cast<std::size_t>(in_use) > s.permits.size()) {
    std::printf("  (the %zu with the nearest deadlines listed)\n", s.permits.size());
  }
  for (const auto& p : s.permits) {
    std::printf("  permit %s (%s)\n", p.id.c_str(), permit_deadline(p).c_str());
    if (!p.host.empty()) {
      std::printf("    host %s, pid %lld, since %s\n    command: %s\n", p.host.c_str(),
                  static_cast<long long>(p.pid), iso_time(p.acquired_unix_ms).c_str(),
                  p.command.c_str());
    }
  }
  std::printf("  waiting subscribers: %lld\n", static_cast<long long>(s.semaphore_subscribers));
}

void print_bare_counter_text(const std::string& name, const dlock::lock_status& s) {
  const auto n = std::to_string(s.counter);
  std::printf("%s: counter %s\n", name.c_str(), n.c_str());
  std::printf(
      "  a latch with count %s, or a semaphore with %s permits available and none in use (their "
      "keys look the same)\n",
      n.c_str(), n.c_str());
  std::printf("  waiting subscribers: %lld on the semaphore channel, %lld on the latch channel\n",
              static_cast<long long>(s.semaphore_subscribers),
              static_cast<long long>(s.latch_subscribers));
  if (s.latch_subscribers > 0 && s.semaphore_subscribers == 0) {
    std::printf("  (only latch waiters listen: most likely a latch)\n");
  } else if (s.semaphore_subscribers > 0 && s.latch_subscribers == 0) {
    std::printf("  (only semaphore waiters listen: most likely a semaphore)\n");
  }
}

}  // namespace

void print_counter_text(const std::string& name, const dlock::lock_status& s) {
  if (s.layout == dlock::lock_layout::semaphore) return print_semaphore_text(name, s);
  print_bare_counter_text(name, s);
}

void print_counter_json(const std::string& name, const dlock::lock_status& s) {
  std::printf("{\"name\": %s, \"held\": %s", json_string(name).c_str(), s.held ? "true" : "false");
  if (s.layout == dlock::lock_layout::semaphore) {
    std::printf(", \"kind\": \"semaphore\", \"available\": %lld, \"in_use\": %lld, \"permits\": [",
                static_cast<long long>(s.counter), static_cast<long long>(s.permits_leased));
    for (std::size_t i = 0; i < s.permits.size(); ++i) {
      if (i) std::printf(", ");
      print_permit_json(s.permits[i]);
    }
    std::printf("], \"subscribers\": %lld}\n", static_cast<long long>(s.semaphore_subscribers));
    return;
  }
  std::printf(
      ", \"kind\": \"counter\", \"counter\": %lld, \"readings\": [\"latch\", \"semaphore\"], "
      "\"semaphore_subscribers\": %lld, \"latch_subscribers\": %lld}\n",
      static_cast<long long>(s.counter), static_cast<long long>(s.semaphore_subscribers),
      static_cast<long long>(s.latch_subscribers));
}

}  // namespace dlock_cli
