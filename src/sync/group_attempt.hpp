// One attempt on a group of a multi_lock's or red_lock's members that share a client and a slot:
// multi_acquire.lua takes all of their names or none, each as a fresh lease owner's first
// acquisition with its own fencing token, then WAITs for config::wait_replicas like any
// acquisition. Never queues or waits; the caller (sync/multi_op.cpp) decides what comes next.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <system_error>
#include <vector>

#include "dlock/detail/unique_function.hpp"
#include "runtime/hold.hpp"

namespace dlock::detail {

class client_impl;

struct group_result {
  // Held: every hold (count 1, token set, tracked by the watchdog from `sent`). With an error
  // too (the replicas fell short) they are held and must be released.
  bool held = false;
  std::error_code ec;
  std::optional<std::chrono::milliseconds> pttl;  // a name was held by another owner
  std::chrono::steady_clock::time_point sent{};
};

// Strand only. `holds`: new holds of lock_kind::mutex, count 0, one per name. An attempt whose
// outcome is unknown (its reply lost or late) is given back in the background before `done`.
void send_group_attempt(client_impl& c, std::vector<std::shared_ptr<hold_state>> holds,
                        std::chrono::steady_clock::duration budget,
                        unique_function<void(group_result)> done);

// Strand only. Raises the fencing counters of `name` (its slot's and RFencedLock's) to at least
// `token`; completes with whether the server confirmed it.
void send_fencing_floor(client_impl& c, const std::string& name, std::uint64_t token,
                        unique_function<void(bool)> done);

}  // namespace dlock::detail
