// The fixture of the waiter_registry unit tests (waiters_test.cpp, waiters_topics_test.cpp): a
// fake subscriber that keeps the listeners to feed them events, and fake waiters that count
// their wake-ups.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "runtime/waiters.hpp"
#include "transport/subscriptions.hpp"

namespace waiters_fixture {

using namespace std::chrono_literals;
using dlock::detail::waiter;
using dlock::detail::waiter_registry;
using dlock::transport::listener_id;
using dlock::transport::pubsub_event;
using dlock::transport::pubsub_listener;
using type = pubsub_event::type;
using clock_type = std::chrono::steady_clock;

inline const std::string lock_name = "orders";
inline const dlock::detail::wait_topic mutex_topic{.name = lock_name, .owner = {}};
inline const std::string client = "c0ffee";
inline const std::string waiter_ch = "dlock_lock__channel:{orders}:c0ffee";
inline const std::string dlock_ch = "dlock_lock__channel:{orders}";
inline const std::string redisson_ch = "redisson_lock__channel:{orders}";

struct fake_waiter : waiter {
  explicit fake_waiter(std::uint64_t t = 0) { ticket = t; }
  std::vector<bool> wakes;  // `foreign` of each wake()
  std::vector<clock_type::time_point> wake_bys;
  void wake(bool foreign) override { wakes.push_back(foreign); }
  void wake_by(clock_type::time_point at) override { wake_bys.push_back(at); }
};

// Records (un)subscriptions and keeps each live subscription's listener.
struct fixture : testing::Test {
  std::vector<std::string> subscribed;  // every channel subscribed, in order
  std::vector<listener_id> ids;         // the id each channel got
  std::vector<listener_id> unsubscribed;
  int subscribe_calls = 0, unsubscribe_calls = 0;  // each is one command on the wire
  std::map<listener_id, std::pair<std::string, pubsub_listener>> live;
  listener_id next_id = 100;
  std::vector<std::error_code> refusals;  // the refused callback's calls
  waiter_registry reg{[this](waiter_registry::channel_listeners channels) {
                        ++subscribe_calls;
                        std::vector<listener_id> out;
                        for (auto& [channel, fn] : channels) {
                          const listener_id id = next_id++;
                          subscribed.push_back(channel);
                          ids.push_back(id);
                          out.push_back(id);
                          live.emplace(id, std::pair{channel, std::move(fn)});
                        }
                        return out;
                      },
                      [this](std::vector<listener_id> gone) {
                        ++unsubscribe_calls;
                        for (auto id : gone) {
                          unsubscribed.push_back(id);
                          live.erase(id);
                        }
                      },
                      [this](std::error_code ec) { refusals.push_back(ec); }, client};

  // Delivers an event to every live listener of `channel` (through a copy, as
  // transport::subscriptions does). Returns how many listened.
  int publish(const std::string& channel, type what, std::string_view payload = {},
              std::error_code ec = {}) {
    std::vector<pubsub_listener> calls;
    for (auto& [id, l] : live) {
      if (l.first == channel) calls.push_back(l.second);
    }
    for (auto& call : calls) call(pubsub_event{what, channel, {}, payload, ec});
    return static_cast<int>(calls.size());
  }
  int message(const std::string& channel, std::string_view payload) {
    return publish(channel, type::message, payload);
  }
};

}  // namespace waiters_fixture
