// sentinel_group (redis_sentinel.hpp): what the sentinels report, the bounded waits on it, and
// failovers. Each wait re-asks every live sentinel each round, so it never trusts a view older
// than one poll interval.
#include <algorithm>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <thread>

#include "support/redis_sentinel.hpp"

namespace dlock::test {
namespace {

using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr auto poll_interval = 25ms;  // each round asks every sentinel several questions
constexpr auto ask_timeout = 1000ms;  // per command: a paused node must not stall a wait

bool poll_until(const std::function<bool()>& pred, std::chrono::milliseconds limit) {
  const auto deadline = clock_type::now() + limit;
  for (;;) {
    if (pred()) return true;
    if (clock_type::now() >= deadline) return false;
    std::this_thread::sleep_for(poll_interval);
  }
}

std::string ms_text(std::chrono::milliseconds ms) { return std::to_string(ms.count()) + " ms"; }

// "a, b, , c" -> {"a", "b", "", "c"} (send_command renders array elements joined by ", ").
std::vector<std::string> split_fields(std::string_view s) {
  std::vector<std::string> out;
  if (s.empty()) return out;
  for (;;) {
    const auto at = s.find(", ");
    out.emplace_back(s.substr(0, at));
    if (at == std::string_view::npos) return out;
    s.remove_prefix(at + 2);
  }
}

sentinel_entry to_entry(const std::vector<std::string>& fields) {
  sentinel_entry e;
  for (std::size_t k = 0; k + 1 < fields.size(); k += 2) e[fields[k]] = fields[k + 1];
  return e;
}

std::uint16_t parse_port(const std::string& s) {
  const auto n = std::stoul(s);
  if (n == 0 || n > 65535) throw std::runtime_error("bad port " + s);
  return static_cast<std::uint16_t>(n);
}

// "[127.0.0.1, 6379]" -> 6379 (GET-MASTER-ADDR-BY-NAME).
std::uint16_t parse_addr_port(const std::string& reply) {
  if (reply.size() < 2 || reply.front() != '[' || reply.back() != ']') {
    throw std::runtime_error("SENTINEL GET-MASTER-ADDR-BY-NAME answered " + reply);
  }
  const auto f = split_fields(std::string_view{reply}.substr(1, reply.size() - 2));
  if (f.size() != 2) throw std::runtime_error("SENTINEL GET-MASTER-ADDR-BY-NAME answered " + reply);
  return parse_port(f[1]);
}

}  // namespace

std::vector<sentinel_entry> parse_sentinel_entries(const std::string& reply, bool flat) {
  if (reply.size() < 2 || reply.front() != '[' || reply.back() != ']') {
    throw std::runtime_error("sentinel answered " + reply);
  }
  const std::string_view inner = std::string_view{reply}.substr(1, reply.size() - 2);
  if (flat) return {to_entry(split_fields(inner))};
  // No field of these replies holds a bracket: each '[' ... ']' is one entry.
  std::vector<sentinel_entry> out;
  for (std::size_t at = inner.find('['); at != std::string_view::npos;) {
    const auto end = inner.find(']', at);
    if (end == std::string_view::npos) throw std::runtime_error("sentinel answered " + reply);
    out.push_back(to_entry(split_fields(inner.substr(at + 1, end - at - 1))));
    at = inner.find('[', end);
  }
  return out;
}

bool sentinel_entry_unhealthy(const sentinel_entry& e) {
  const auto it = e.find("flags");
  if (it == e.end()) return true;
  const auto& f = it->second;
  return f.find("s_down") != std::string::npos || f.find("o_down") != std::string::npos ||
         f.find("disconnected") != std::string::npos;
}

std::map<std::uint16_t, std::size_t> sentinel_group::master_votes() const {
  std::map<std::uint16_t, std::size_t> votes;
  for (const auto i : live_sentinels()) {
    try {
      const auto reply = sentinel(i).command(
          {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", opts_.master_name}, {.timeout = ask_timeout});
      ++votes[parse_addr_port(reply)];
    } catch (const std::exception&) {  // an unanswered sentinel has no vote
    }
  }
  return votes;
}

std::uint16_t sentinel_group::master_port() const {
  const auto votes = master_votes();
  if (votes.empty()) throw std::runtime_error("sentinel_group: no sentinel names a master");
  return std::max_element(votes.begin(), votes.end(),
                          [](const auto& a, const auto& b) { return a.second < b.second; })
      ->first;
}

std::vector<std::uint16_t> sentinel_group::replicas() const {
  const auto live = live_sentinels();
  if (live.empty()) throw std::runtime_error("sentinel_group: no sentinel is running");
  std::vector<std::uint16_t> out;
  for (const auto& e : replica_entries(live.front())) {
    // After a graceful failover the old master is listed as a replica, healthy, for ~11 s
    // while it still reports itself a master.
    const auto role = e.find("role-reported");
    if (sentinel_entry_unhealthy(e) || (role != e.end() && role->second != "slave")) continue;
    out.push_back(parse_port(e.at("port")));
  }
  std::sort(out.begin(), out.end());
  return out;
}

void sentinel_group::wait_replicas_online(std::size_t n, std::chrono::milliseconds limit) const {
  std::string last;
  const bool ok = poll_until(
      [&] {
        try {
          // Before the sentinels start, the master is the initial one.
          const auto& m = sentinels_.empty() ? *data_.front() : master();
          last = m.command({"INFO", "replication"}, {.timeout = ask_timeout});
          std::size_t online = 0;
          for (auto at = last.find("state=online"); at != std::string::npos;
               at = last.find("state=online", at + 1)) {
            ++online;
          }
          return online >= n;
        } catch (const std::exception& e) {
          last = e.what();
          return false;
        }
      },
      limit);
  if (!ok) {
    throw std::runtime_error("sentinel_group: " + std::to_string(n) +
                             " replicas not online within " + ms_text(limit) + ":\n" + last + "\n" +
                             diagnostics());
  }
}

bool sentinel_group::ready(std::string* why) const {
  try {
    const auto live = live_sentinels();
    if (live.empty()) {
      *why = "no sentinel is running";
      return false;
    }
    const auto data_live = live_data_nodes();
    const std::size_t want_replicas = data_live > 0 ? data_live - 1 : 0;
    std::optional<std::string> addr;
    for (const auto i : live) {
      const auto name = "sentinel " + std::to_string(i) + ": ";
      const auto a = sentinel(i).command({"SENTINEL", "GET-MASTER-ADDR-BY-NAME", opts_.master_name},
                                         {.timeout = ask_timeout});
      if (addr && a != *addr) {
        *why = name + "master " + a + ", sentinel " + std::to_string(live.front()) + ": " + *addr;
        return false;
      }
      addr = a;
      const auto m = master_entry(i);
      if (sentinel_entry_unhealthy(m) || m.at("flags").find("master") == std::string::npos) {
        *why = name + "master flags " + m.at("flags");
        return false;
      }
      const auto reps = replica_entries(i);
      const auto good = std::count_if(reps.begin(), reps.end(), [](const sentinel_entry& e) {
        return !sentinel_entry_unhealthy(e) && e.count("master-link-status") != 0 &&
               e.at("master-link-status") == "ok";
      });
      if (static_cast<std::size_t>(good) != want_replicas) {
        *why =
            name + std::to_string(good) + " healthy replicas of " + std::to_string(want_replicas);
        return false;
      }
      const auto peers = sentinel_entries(i);
      const auto up = std::count_if(peers.begin(), peers.end(), [](const sentinel_entry& e) {
        return !sentinel_entry_unhealthy(e);
      });
      if (static_cast<std::size_t>(up) != live.size() - 1) {
        *why = name + std::to_string(up) + " healthy peers of " + std::to_string(live.size() - 1);
        return false;
      }
    }
    return true;
  } catch (const std::exception& e) {
    *why = e.what();
    return false;
  }
}

void sentinel_group::wait_ready(std::chrono::milliseconds limit) const {
  std::string why;
  if (!poll_until([&] { return ready(&why); }, limit)) {
    throw std::runtime_error("sentinel_group: not ready within " + ms_text(limit) + ": " + why +
                             "\n" + diagnostics());
  }
}

std::uint16_t sentinel_group::failover() const {
  const auto live = live_sentinels();
  if (live.empty()) throw std::runtime_error("sentinel_group: no sentinel is running");
  const auto old = master_port();
  const auto r = sentinel(live.front()).command({"SENTINEL", "FAILOVER", opts_.master_name});
  if (r != "+OK") throw std::runtime_error("sentinel_group: SENTINEL FAILOVER answered " + r);
  return old;
}

std::uint16_t sentinel_group::wait_new_master(std::uint16_t old_port,
                                              std::chrono::milliseconds limit) const {
  const std::size_t majority = opts_.sentinels / 2 + 1;
  std::uint16_t found = 0;
  std::string why = "no majority yet";
  const bool ok = poll_until(
      [&] {
        for (const auto& [port, n] : master_votes()) {
          if (port == old_port || n < majority) continue;
          try {
            const auto role = node(port).command({"ROLE"}, {.timeout = ask_timeout});
            if (role.rfind("[master, ", 0) == 0) {
              found = port;
              return true;
            }
            why = "port " + std::to_string(port) + " answers ROLE " + role.substr(0, 40);
          } catch (const std::exception& e) {
            why = e.what();
          }
        }
        return false;
      },
      limit);
  if (!ok) {
    throw std::runtime_error("sentinel_group: no new master (old port " + std::to_string(old_port) +
                             ") within " + ms_text(limit) + ": " + why + "\n" + diagnostics());
  }
  return found;
}

std::string sentinel_group::diagnostics() const {
  std::string out;
  for (std::size_t i = 0; i < sentinels_.size(); ++i) {
    out += "--- sentinel " + std::to_string(i) + " port " + std::to_string(sentinel(i).port()) +
           " (clients: " + std::to_string(sentinel_port(i)) + ")";
    if (!sentinel(i).running() || sentinel(i).paused()) {
      out += sentinel(i).running() ? " paused\n" : " not running\n";
      continue;
    }
    try {
      out += " master flags " + master_entry(i).at("flags") + "\n  replicas:";
      for (const auto& e : replica_entries(i)) out += " " + e.at("port") + "=" + e.at("flags");
      out += "\n  sentinels:";
      for (const auto& e : sentinel_entries(i)) out += " " + e.at("port") + "=" + e.at("flags");
      out += "\n";
    } catch (const std::exception& e) {
      out += std::string{" error: "} + e.what() + "\n";
    }
  }
  for (const auto& d : data_) {
    out += "--- data node port " + std::to_string(d->port());
    if (!d->running() || d->paused()) {
      out += d->running() ? " paused\n" : " not running\n";
      continue;
    }
    try {
      out += " ROLE " + d->command({"ROLE"}, {.timeout = ask_timeout}).substr(0, 60) + "\n";
    } catch (const std::exception& e) {
      out += std::string{" error: "} + e.what() + "\n";
    }
  }
  return out;
}

}  // namespace dlock::test
