// Shared by family_scripts_test.cpp and family_scripts_rw_test.cpp: the fair and read-write lock
// scripts called with the keys and arguments dlock's client sends (src/sync/kinds.cpp), on top
// of script_lab.hpp's client, side channel and subscribers.
#pragma once

#include <string>
#include <vector>

#include "script_lab.hpp"

namespace dlock::test {

// One attempt of fair_acquire.lua.
struct fair_attempt {
  std::string owner;
  int have = 0;
  bool waits = false;
  std::string lease = "30000";
  std::string valid = "5000";  // how long its queue entry stays valid (ms)
};
// One call of fair_release.lua.
struct fair_unlock {
  std::string owner;
  int have = 1;
  std::string lease = "30000";
  bool leaving = false;
};
// One attempt of read_acquire.lua or write_acquire.lua (`waits` and `valid`: the writer's).
struct rw_attempt {
  std::string owner;
  int have = 0;
  std::string lease = "30000";
  bool waits = false;
  std::string valid = "5000";
};
// One call of read_release.lua or write_release.lua (`leaving`: the writer's).
struct rw_unlock {
  std::string owner;
  int have = 1;
  std::string lease = "30000";
  bool leaving = false;
};

// A lock name on `srv` with its keys as a fair lock and as a read-write lock (fencing on unless
// `base.fenced` is cleared).
struct family_lab {
  explicit family_lab(redis_server& s, std::string lock_name = unique_name("lock"))
      : base{s, std::move(lock_name)},
        name{base.name},
        cfg{detail::client_access::impl(base.c).cfg()},
        fair{cfg, name, detail::lock_kind::fair} {}

  // The read-write keys of `owner` (its hold keys' prefix depends on it).
  detail::lock_keys rw(const std::string& owner) const {
    return detail::lock_keys{cfg, name, detail::lock_kind::read, owner};
  }
  std::vector<std::string_view> fenced(std::vector<std::string_view> keys) const {
    if (base.fenced) keys.insert(keys.end(), {base.k.slot_counter, base.k.lock_counter});
    return keys;
  }

  result fair_acquire(const fair_attempt& a) {
    const auto have = std::to_string(a.have);
    return eval(base.c, scripts::fair_acquire, fenced({name, fair.queue, fair.records}),
                {a.lease, a.owner, have, a.waits ? "1" : "0", a.valid, fair.channel, "0"});
  }
  result fair_release(const fair_unlock& u) {
    const auto have = std::to_string(u.have);
    return eval(base.c, scripts::fair_release, {name, fair.queue, fair.records},
                {fair.channel, u.owner, have, u.lease, u.leaving ? "1" : "0", "0"});
  }
  result read_acquire(const rw_attempt& a) {
    const auto k = rw(a.owner);
    const auto have = std::to_string(a.have);
    return eval(base.c, scripts::read_acquire, fenced({name, k.queue}),
                {a.lease, a.owner, have, k.hold_prefix});
  }
  result read_release(const rw_unlock& u) {
    const auto k = rw(u.owner);
    const auto have = std::to_string(u.have);
    return eval(base.c, scripts::read_release, {name},
                {k.channel, u.owner, have, k.hold_prefix, k.tag, "0", u.lease});
  }
  result write_acquire(const rw_attempt& a) {
    const auto k = rw(a.owner);
    const auto have = std::to_string(a.have), field = a.owner + ":write";
    return eval(base.c, scripts::write_acquire, fenced({name, k.queue}),
                {a.lease, field, have, a.owner, a.waits ? "1" : "0", a.valid});
  }
  result write_release(const rw_unlock& u) {
    const auto k = rw(u.owner);
    const auto have = std::to_string(u.have), field = u.owner + ":write";
    return eval(base.c, scripts::write_release, {name, k.queue},
                {k.channel, field, have, u.lease, u.owner, u.leaving ? "1" : "0", "0"});
  }
  result renew(const std::string& lease, const std::vector<std::string>& holds) {
    std::vector<std::string_view> keys(holds.size(), name), args{lease};
    args.insert(args.end(), holds.begin(), holds.end());
    return eval(base.c, scripts::lock_renew, keys, args);
  }

  std::string cmd(const std::vector<std::string>& args) const { return base.cmd(args); }
  std::int64_t pttl(const std::string& key) const { return base.pttl(key); }
  // A sorted set member's score, -1 when it has none.
  std::int64_t score(const std::string& key, const std::string& member) const {
    const auto s = cmd({"ZSCORE", key, member});
    return s == "$-1" ? -1 : std::stoll(s);
  }
  // The key of `owner`'s n-th read hold.
  std::string hold(const std::string& owner, int n) const {
    return rw(owner).hold_prefix + std::to_string(n);
  }
  // The channel of a fair waiter (the queue's head hears its turn there).
  std::string head_channel(const std::string& owner) const {
    return keys::fair_waiter_channel(name, owner);
  }

  lab base;
  const std::string& name;
  config cfg;  // the client's
  detail::lock_keys fair;
};

}  // namespace dlock::test
