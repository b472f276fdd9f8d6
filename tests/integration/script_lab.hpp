// Shared by scripts_test.cpp and scripts_handoff_test.cpp: the mutex scripts called with the
// keys and arguments dlock's client sends (src/sync/acquire.cpp, src/sync/mutex_ops.cpp), their
// replies as text, and plain subscribers standing in for the processes that wait on a lock.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/client.hpp"
#include "dlock/keys.hpp"
#include "runtime/client_access.hpp"
#include "runtime/client_impl.hpp"
#include "scripts/script.hpp"
#include "support/child_process.hpp"
#include "support/redis_server.hpp"
#include "sync/mutex_ops.hpp"
#include "test_util.hpp"

namespace dlock::test {

struct result {
  std::error_code ec;
  dlock::reply r;
};

inline result eval(dlock::client& c, const scripts::script& s, std::vector<std::string_view> keys,
                   std::vector<std::string_view> args) {
  using namespace std::chrono_literals;
  auto p = std::make_shared<std::promise<result>>();
  dlock::detail::client_access::impl(c).scripts().eval(s, keys, args, 5s,
                                                       [p](std::error_code ec, dlock::reply r) {
                                                         p->set_value({ec, std::move(r)});
                                                       });
  auto f = p->get_future();
  if (f.wait_for(10s) != std::future_status::ready) return {errc::timeout, {}};
  return f.get();
}

// A reply as text: integers as digits, nil as "nil", strings as they are, arrays as "[a, b]";
// an error as "error: <message>".
inline std::string show(const dlock::reply& r) {
  switch (r.type()) {
    case dlock::reply::kind::nil:
      return "nil";
    case dlock::reply::kind::integer:
      return std::to_string(r.integer());
    case dlock::reply::kind::array: {
      std::string out = "[";
      for (std::size_t i = 0; i < r.elements().size(); ++i) {
        out += (i ? ", " : "") + show(r.elements()[i]);
      }
      return out + "]";
    }
    default:
      return r.str();
  }
}
inline std::string show(const result& r) { return r.ec ? "error: " + r.ec.message() : show(r.r); }
// The two integers of an acquire reply ({code, value}); -99 when there are not two.
inline std::int64_t code(const result& r) {
  return r.r.elements().size() == 2 ? r.r.elements()[0].integer() : -99;
}
inline std::int64_t value(const result& r) {
  return r.r.elements().size() == 2 ? r.r.elements()[1].integer() : -99;
}

// One attempt of mutex_acquire.lua (ARGV in its order).
struct attempt {
  std::string owner;
  int have = 0;
  std::string ticket{};  // '' = does not wait
  std::string lease = "30000";
  std::string id = "client-a";
  bool foreign = false;
  std::string valid = "5000";  // how long its queue record stays valid (ms)
};
// One call of mutex_release.lua.
struct unlock {
  std::string owner;
  int have = 1;
  std::string ticket{};  // a ticket that leaves the queue
  std::string lease = "30000";
  std::string window = "20";  // how long a free lock is left to Redisson's waiters (ms)
};

// A client on `srv` and a lock name with its keys (fencing on unless `fenced` is cleared).
struct lab {
  explicit lab(redis_server& s, std::string lock_name = unique_name("lock"))
      : srv{s},
        c{config::from_uri(s.url())},
        name{std::move(lock_name)},
        k{dlock::detail::client_access::impl(c).cfg(), name} {}

  std::vector<std::string_view> keys() const {
    std::vector<std::string_view> out{k.name, k.queue, k.records, k.yield};
    if (fenced) out.insert(out.end(), {k.slot_counter, k.lock_counter});
    return out;
  }
  result acquire(const attempt& a) {
    const auto have = std::to_string(a.have);
    return eval(c, scripts::mutex_acquire, keys(),
                {a.lease, a.owner, have, a.ticket, a.valid, a.id, a.foreign ? "1" : "0"});
  }
  result release(const unlock& u) {
    const auto have = std::to_string(u.have);
    return eval(c, scripts::mutex_release, keys(),
                {k.channel, k.dlock_channel, u.owner, have, u.lease, u.ticket, u.window});
  }
  // A command over the fixture's side channel, its reply rendered by send_command.
  std::string cmd(const std::vector<std::string>& args) const { return srv.command(args); }
  std::int64_t pttl(const std::string& key) const {
    return std::stoll(cmd({"PTTL", key}).substr(1));
  }
  // The slot's fencing counter (the last token issued), -1 while it does not exist.
  std::int64_t counter() const {
    const auto v = cmd({"GET", k.slot_counter});
    return v == "$-1" ? -1 : std::stoll(v);
  }
  // The server's clock in ms (TIME).
  std::int64_t server_ms() const {
    const auto t = cmd({"TIME"});  // "[<s>, <us>]"
    const auto comma = t.find(',');
    return std::stoll(t.substr(1, comma - 1)) * 1000 + std::stoll(t.substr(comma + 2)) / 1000;
  }
  std::string waiter_channel(const std::string& id) const { return keys::waiter_channel(name, id); }

  redis_server& srv;
  dlock::client c;
  std::string name;
  detail::lock_keys k;
  bool fenced = true;
};

// A subscriber on its own connection (redis-cli SUBSCRIBE), standing in for a waiting process:
// a dlock process subscribes the lock's Redisson channel, its dlock channel and its waiter
// channel; a Redisson process the Redisson channel alone. Constructed once every channel is
// confirmed (PUBLISH reaches it from then on).
class listener {
 public:
  listener(const redis_server& srv, std::vector<std::string> channels)
      : srv_{srv}, marker_{unique_name("listener-marker")}, p_{args(srv, channels, marker_)} {
    using namespace std::chrono_literals;
    for (std::size_t i = 0; i <= channels.size(); ++i) {  // "subscribe", channel, count
      for (int line = 0; line < 3; ++line) {
        if (!p_.read_line(5s)) throw std::runtime_error("not subscribed: " + p_.diagnostics());
      }
    }
  }
  // The messages that came since the last call, as "<channel>=<payload> " each: all that were
  // published before this call (a marker published now comes after them, in order).
  std::string heard() {
    using namespace std::chrono_literals;
    srv_.command({"PUBLISH", marker_, "end"});
    std::string out;
    for (;;) {
      auto kind = p_.read_line(5s);
      if (!kind) return out + "<no marker within 5 s>";
      if (*kind != "message") continue;
      auto channel = p_.read_line(5s), payload = p_.read_line(5s);
      if (!channel || !payload) return out + "<cut>";
      if (*channel == marker_) return out;
      out += *channel + "=" + *payload + " ";
    }
  }

 private:
  static std::vector<std::string> args(const redis_server& srv,
                                       const std::vector<std::string>& channels,
                                       const std::string& marker) {
    std::vector<std::string> a{"/usr/bin/redis-cli", "-p", std::to_string(srv.port()), "SUBSCRIBE"};
    a.insert(a.end(), channels.begin(), channels.end());
    a.push_back(marker);
    return a;
  }
  const redis_server& srv_;
  std::string marker_;
  child_process p_;
};

// A dlock process whose client `id` waits on l's lock: it listens on the lock's two channels and
// its waiter channel.
inline std::unique_ptr<listener> dlock_process(const lab& l, const std::string& id) {
  return std::make_unique<listener>(
      l.srv, std::vector<std::string>{l.k.channel, l.k.dlock_channel, l.waiter_channel(id)});
}

}  // namespace dlock::test
