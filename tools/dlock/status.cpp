// dlock status / unlock --force.
#include <cstdio>
#include <ctime>

#include "cli.hpp"

namespace dlock_cli {
namespace {

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    const auto ch = static_cast<unsigned char>(c);
    switch (ch) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (ch < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", ch);
          out += buf;
        } else {
          out.push_back(static_cast<char>(ch));
        }
    }
  }
  return out + "\"";
}

std::string iso_time(std::int64_t unix_ms) {
  const std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  char out[48];
  std::snprintf(out, sizeof out, "%s.%03dZ", buf, static_cast<int>(unix_ms % 1000));
  return out;
}

void print_json(const std::string& name, const dlock::lock_status& s) {
  std::printf("{\"name\": %s, \"held\": %s, \"holders\": [", json_string(name).c_str(),
              s.held ? "true" : "false");
  for (std::size_t i = 0; i < s.holders.size(); ++i) {
    const auto& h = s.holders[i];
    std::printf("%s{\"owner\": %s, \"count\": %u", i ? ", " : "", json_string(h.owner).c_str(),
                h.count);
    if (!h.host.empty()) {
      std::printf(", \"host\": %s, \"pid\": %lld, \"command\": %s, \"acquired_at\": %s",
                  json_string(h.host).c_str(), static_cast<long long>(h.pid),
                  json_string(h.command).c_str(),
                  json_string(iso_time(h.acquired_unix_ms)).c_str());
    }
    std::printf("}");
  }
  std::printf("]");
  std::printf(
      ", \"remaining_lease_ms\": %lld, \"fencing_counter\": %llu, \"queued\": %lld, "
      "\"subscribers\": %lld}\n",
      static_cast<long long>(s.held ? s.remaining_lease.count() : 0),
      static_cast<unsigned long long>(s.fencing_counter), static_cast<long long>(s.queued),
      static_cast<long long>(s.subscribers));
}

void print_text(const std::string& name, const dlock::lock_status& s) {
  std::printf("%s: %s\n", name.c_str(), s.held ? "held" : "free");
  for (const auto& h : s.holders) {
    std::printf("  holder %s (count %u)\n", h.owner.c_str(), h.count);
    if (!h.host.empty()) {
      std::printf("    host %s, pid %lld, since %s\n    command: %s\n", h.host.c_str(),
                  static_cast<long long>(h.pid), iso_time(h.acquired_unix_ms).c_str(),
                  h.command.c_str());
    }
  }
  if (s.queued > 0) std::printf("  dlock waiters queued: %lld\n", static_cast<long long>(s.queued));
  if (s.held)
    std::printf("  remaining lease: %lld ms\n", static_cast<long long>(s.remaining_lease.count()));
  std::printf("  fencing counter: %llu\n  waiting subscribers: %lld\n",
              static_cast<unsigned long long>(s.fencing_counter),
              static_cast<long long>(s.subscribers));
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
  json ? print_json(name, s) : print_text(name, s);
  return s.held ? exit_held : exit_free;
}

int run_unlock(const global_options& g, const std::string& name, bool force) {
  if (!force) {
    complain("unlock", "only --force is supported: a lock is released by its holder");
    return exit_usage;
  }
  dlock::client client{make_config(g)};
  dlock::mutex m{client, name};
  std::error_code ec;
  const bool was_held = m.force_unlock(ec);
  if (ec) {
    complain("unlock: " + name, ec);
    return exit_code_for(ec);
  }
  verbose(g, name + (was_held ? " was held; deleted and waiters woken" : " was free"));
  return was_held ? exit_held : exit_free;
}

}  // namespace dlock_cli
