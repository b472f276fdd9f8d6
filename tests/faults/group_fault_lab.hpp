// The fault lab for dlock's group locks (issue 27): dlock::red_lock over three lock servers of
// its own, and dlock::multi_lock of several names, run by dlock_fault_worker --kind red and
// --kind multi (worker_lock.hpp). A red_lock worker holds one lock (the lab's name) on a
// majority of the servers and protects the lab's one resource with the quorum's token; a
// multi_lock worker's members are each a lock of the history guarding a resource of its own,
// written with that member's token, and finish_parts() sums their counters for the final check.
// The helpers: another owner's hold of the name on one server (so a worker's quorum is the
// other two, deterministically), the servers' fencing counters, and the time a frozen red hold's
// validity ends.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/keys.hpp"
#include "kinds_fault_lab.hpp"

namespace dlock::faults::test {

class group_lab : public kinds_lab {
 protected:
  static constexpr std::size_t n_servers = 3;
  static constexpr std::int64_t forever = std::numeric_limits<std::int64_t>::max();

  group_lab() {
    for (std::size_t i = 0; i < n_servers; ++i) {
      servers_.push_back(std::make_unique<dlock::test::redis_server>());
    }
  }

  dlock::test::redis_server& server(std::size_t i) { return *servers_[i]; }

  // A red_lock worker's arguments: --kind red over the three servers, then `more`. (Its lock
  // URL, the lab's lock server, only gives the clients their configuration.)
  std::vector<std::string> red_args(std::vector<std::string> more) const {
    std::string ports;
    for (const auto& s : servers_) ports += (ports.empty() ? "" : ",") + std::to_string(s->port());
    std::vector<std::string> args{"--kind", "red", "--servers", ports};
    args.insert(args.end(), more.begin(), more.end());
    return args;
  }

  // Another owner holds the lab's name on server `i` for `ms` (a hash with one owner field, as
  // any RLock holder's): a red_lock's quorum is then made of the other servers.
  void occupy(std::size_t i, milliseconds ms) {
    server(i).command({"EVAL",
                       "redis.call('hset', KEYS[1], 'another-owner:1', 1) "
                       "return redis.call('pexpire', KEYS[1], ARGV[1])",
                       "1", name_, std::to_string(ms.count())});
  }
  void vacate(std::size_t i) { server(i).command({"DEL", name_}); }

  // Server `i`'s fencing counter of the lab's name (the slot's), 0 when absent.
  std::uint64_t counter(std::size_t i) {
    const auto v = server(i).command({"GET", dlock::keys::slot_fencing_counter_of(name_)});
    return v == "$-1" ? 0 : std::stoull(v);
  }

  // When the validity of a red hold nobody renews any more ends (monotonic ns): the name's
  // PTTL on the servers, the majority's (the 2nd longest of 3).
  std::int64_t red_lease_end() {
    const auto asked = dlock::faults::monotonic_ns();
    std::vector<long long> pttl;
    for (std::size_t i = 0; i < n_servers; ++i) {
      const auto v = server(i).command({"PTTL", name_});
      pttl.push_back(v.size() > 1 && v[0] == ':' ? std::stoll(v.substr(1)) : -1);
    }
    std::sort(pttl.begin(), pttl.end(), std::greater<>{});
    EXPECT_GT(pttl[1], 0) << "the frozen hold still runs on a majority";
    return asked + pttl[1] * ns_per_ms;
  }

  // Enters (of `proc` when given) in [from, to).
  static std::size_t enters_between(const report& r, std::int64_t from, std::int64_t to,
                                    std::string_view proc = {}) {
    return static_cast<std::size_t>(
        std::count_if(r.sections.begin(), r.sections.end(), [&](const dlock::faults::section& s) {
          return s.enter >= from && s.enter < to && (proc.empty() || s.proc == proc);
        }));
  }

  // Whether `proc` recorded an enter at or after `t` within `limit` (polled).
  bool entered_after(const std::string& proc, std::int64_t t, milliseconds limit) {
    return dlock::test::wait_until(
        [&] {
          for (const auto& e : dlock::faults::read_history(dir_.path() + "/" + proc + ".jsonl")) {
            if (e.kind == "enter" && e.t >= t) return true;
          }
          return false;
        },
        limit);
  }

  // The checker's notes on user-visible errors ("w1 error at 12.3 ms: release: ..."), joined.
  static std::string error_notes(const report& r) {
    std::string out;
    for (const auto& n : r.notes) {
      if (n.find(" error at ") != std::string::npos) out += (out.empty() ? "" : "; ") + n;
    }
    return out.empty() ? "none" : out;
  }

  // A red enter's members' own tokens, from its detail ("member tokens a,b,c").
  static std::vector<std::uint64_t> member_tokens(const dlock::faults::event& enter) {
    std::vector<std::uint64_t> out;
    const std::string prefix = "member tokens ";
    if (enter.detail.rfind(prefix, 0) != 0) return out;
    std::stringstream in{enter.detail.substr(prefix.size())};
    for (std::string t; std::getline(in, t, ',');) out.push_back(std::stoull(t));
    return out;
  }

  // finish() for multi_lock workers: the final values are the sums of the member resources'
  // counters (each accepted write added one to its member's).
  report finish_parts(const std::vector<std::string>& locks) {
    auto value = [&](const std::string& key) -> std::int64_t {
      const auto v = resource_srv_.command({"GET", key});
      return v == "$-1" ? 0 : std::stoll(v);
    };
    std::int64_t fenced = 0, plain = 0;
    for (const auto& l : locks) {
      fenced += value(dlock::faults::resource::fenced_key(l));
      plain += value(dlock::faults::resource::plain_key(l));
    }
    history_.record({.kind = "final", .value = fenced, .prev = plain});
    std::size_t bad = 0;
    events_ = dlock::faults::read_histories(dir_.path(), &bad);
    EXPECT_EQ(bad, 0u) << "malformed history lines";
    auto r = dlock::faults::check(events_);
    report_json_ = dlock::faults::to_json(r);
    return r;
  }

  std::vector<std::unique_ptr<dlock::test::redis_server>> servers_;
};

}  // namespace dlock::faults::test
