// The fixture of the transport::subscriptions tests (subscriptions_*_test.cpp): pub/sub
// bookkeeping of a subscriber connection, without sockets. Listeners record the events they are
// told; replies are built as Redis sends them.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "dlock/error.hpp"
#include "dlock/reply.hpp"
#include "transport/subscriptions.hpp"

namespace dlock::test::subscriptions_fixture {

using namespace std::chrono_literals;
using dlock::errc;
using dlock::reply;
using dlock::transport::listener_id;
using dlock::transport::pubsub_event;
using dlock::transport::subscriptions;
using kind = subscriptions::kind;
using type = pubsub_event::type;

// An event with its views copied, so it can be inspected after the callback returned.
struct seen {
  listener_id id;
  type what;
  std::string channel;
  std::string pattern;
  std::string payload;
  std::error_code ec;
};

inline reply bulk(std::string s) { return reply::make_bulk(std::move(s)); }

// ["<what>", "<name>", count]
inline reply confirmation(std::string what, std::string name, std::int64_t count) {
  return reply::make_array(
      {bulk(std::move(what)), bulk(std::move(name)), reply::make_integer(count)});
}
inline reply message(std::string channel, std::string payload) {
  return reply::make_array({bulk("message"), bulk(std::move(channel)), bulk(std::move(payload))});
}
inline reply pmessage(std::string pattern, std::string channel, std::string payload) {
  return reply::make_array({bulk("pmessage"), bulk(std::move(pattern)), bulk(std::move(channel)),
                            bulk(std::move(payload))});
}

class subscriptions_test : public testing::Test {
 protected:
  dlock::transport::pubsub_listener record(listener_id id) {
    return [this, id](const pubsub_event& ev) {
      events_.push_back({id, ev.what, std::string(ev.channel), std::string(ev.pattern),
                         std::string(ev.payload), ev.ec});
    };
  }
  bool add(listener_id id, const std::string& channel) {
    return subs_.add(id, kind::channel, channel, record(id));
  }
  bool add_pattern(listener_id id, const std::string& pattern) {
    return subs_.add(id, kind::pattern, pattern, record(id));
  }
  std::string subscribe(kind k, std::vector<std::string> names) {
    std::string out;
    subs_.subscribe_command(out, k, names, deadline_);
    return out;
  }
  std::vector<listener_id> ids() const {
    std::vector<listener_id> out;
    for (const auto& e : events_) out.push_back(e.id);
    return out;
  }

  const dlock::transport::subscriptions::clock::time_point t0_ = subscriptions::clock::now();
  const subscriptions::clock::time_point deadline_ = t0_ + 3s;
  subscriptions subs_;
  std::vector<seen> events_;
};

}  // namespace dlock::test::subscriptions_fixture
