// Hand-written histories for the checker's tests (checker_test.cpp, checker_verdicts_test.cpp):
// times in ms, events in the shape dlock_fault_worker records them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "checker.hpp"
#include "history.hpp"

namespace dlock::faults::checker_test {

inline constexpr std::int64_t ms = 1'000'000;

struct history {
  std::vector<event> events;

  history& add(std::int64_t t_ms, const std::string& p, const std::string& kind,
               std::uint64_t token = 0) {
    events.push_back({.t = t_ms * ms, .proc = p, .kind = kind, .token = token});
    return *this;
  }
  // Any event, stamped at `t_ms`.
  history& put(std::int64_t t_ms, event e) {
    e.t = t_ms * ms;
    events.push_back(std::move(e));
    return *this;
  }
  // An enter claiming `left_ms` of trust, on `lock`.
  history& enter(std::int64_t t_ms, const std::string& p, std::uint64_t token, std::int64_t left_ms,
                 const std::string& lock = "") {
    return put(t_ms,
               {.proc = p, .kind = "enter", .token = token, .left_ms = left_ms, .lock = lock});
  }
  // A fenced read of `value` and an unfenced read of `u`.
  history& reads(std::int64_t t_ms, const std::string& p, std::uint64_t token, std::int64_t value,
                 std::int64_t u, bool ok = true) {
    events.push_back(
        {.t = t_ms * ms, .proc = p, .kind = "read", .token = token, .ok = ok, .value = value});
    events.push_back({.t = t_ms * ms + 1, .proc = p, .kind = "uread", .token = token, .value = u});
    return *this;
  }
  // A fenced write after reading `read` (replacing `prev`), then the unfenced one likewise.
  history& writes(std::int64_t t_ms, const std::string& p, std::uint64_t token, std::int64_t read,
                  std::int64_t prev, std::int64_t uread, std::int64_t uprev, bool ok = true) {
    events.push_back({.t = t_ms * ms,
                      .proc = p,
                      .kind = "write",
                      .token = token,
                      .ok = ok,
                      .value = read + 1,
                      .read = read,
                      .prev = prev});
    events.push_back({.t = t_ms * ms + 1,
                      .proc = p,
                      .kind = "uwrite",
                      .token = token,
                      .value = uread + 1,
                      .read = uread,
                      .prev = uprev});
    return *this;
  }
  // One whole clean section.
  history& section(std::int64_t from_ms, std::int64_t to_ms, const std::string& p,
                   std::uint64_t token, std::int64_t value) {
    add(from_ms, p, "enter", token);
    reads(from_ms + 1, p, token, value, value);
    writes(to_ms - 1, p, token, value, value, value, value);
    return add(to_ms, p, "exit", token);
  }
};

// The checker wants events in time order, as read_histories gives them.
inline report run(history& h, const check_options& options = {}) {
  std::stable_sort(h.events.begin(), h.events.end(),
                   [](const event& a, const event& b) { return a.t < b.t; });
  return check(h.events, options);
}

}  // namespace dlock::faults::checker_test
