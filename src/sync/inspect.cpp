#include "dlock/inspect.hpp"

#include <charconv>
#include <map>
#include <optional>
#include <string_view>
#include <vector>

#include "dlock/keys.hpp"
#include "resp/encoder.hpp"
#include "runtime/blocking.hpp"
#include "runtime/client_access.hpp"
#include "runtime/client_impl.hpp"
#include "scripts/script.hpp"
#include "sync/mutex_ops.hpp"

namespace dlock {
namespace {

std::int64_t to_int(const std::string& s) {
  std::int64_t v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

reply run_script(detail::client_impl& c, const std::string& name, std::error_code& ec) {
  // The counter this client's acquisitions advance; with fencing off none (the lock hash in its
  // place: lock_inspect.lua reads no counter, so no ACL right to one is needed).
  const detail::lock_keys k{c.cfg(), name};
  const auto info = keys::holder_info(name);
  const auto fair_queue = keys::fair_queue(name);
  const auto fair_timeouts = keys::fair_timeouts(name);
  const auto writers = keys::waiting_writers(name);
  const auto permits = keys::permit_timeouts(name);
  const auto limit = std::to_string(lock_status::listed_max);
  return detail::run_blocking<reply>(c, ec, [&](detail::completion<reply> done) {
    std::string_view ks[] = {name, k.slot_counter.empty() ? std::string_view{name} : k.slot_counter,
                             info, k.queue};
    std::string_view args[] = {fair_queue, fair_timeouts, writers, limit, permits};
    c.scripts().eval(scripts::lock_inspect, ks, args, c.cfg().command_timeout, std::move(done));
  });
}

// {owner, ms or nil, ...} as lock_inspect.lua lists waiters.
std::vector<waiting_owner> waiting_owners(const reply& r) {
  std::vector<waiting_owner> out;
  const auto& e = r.elements();
  for (std::size_t i = 0; i + 1 < e.size(); i += 2) {
    waiting_owner w{e[i].str(), std::nullopt};
    if (const auto ms = e[i + 1].to_integer()) w.expires_in = std::chrono::milliseconds{*ms};
    out.push_back(std::move(w));
  }
  return out;
}

// The hash's fields as holders (a read-write lock's `mode` is none), with their descriptions.
void read_holders(const reply& fields_reply, const reply& info_reply, bool read_write,
                  lock_status& out) {
  std::map<std::string, std::string> info;
  const auto& d = info_reply.elements();
  for (std::size_t i = 0; i + 1 < d.size(); i += 2) info[d[i].str()] = d[i + 1].str();
  const auto& fields = fields_reply.elements();
  for (std::size_t i = 0; i + 1 < fields.size(); i += 2) {
    holder h;
    h.owner = fields[i].str();
    if (read_write) {
      if (h.owner == "mode") continue;
      constexpr std::string_view write_suffix = ":write";
      h.mode = h.owner.ends_with(write_suffix) ? "write" : "read";
      if (h.mode == "write") h.owner.resize(h.owner.size() - write_suffix.size());
    }
    h.count = static_cast<std::uint32_t>(to_int(fields[i + 1].str()));
    const auto names = holder_fields(h.owner);  // host, pid, command, acquired_ms
    auto get = [&](std::size_t field) {
      auto it = info.find(names[field]);
      return it == info.end() ? std::string{} : it->second;
    };
    h.host = get(0);
    h.pid = to_int(get(1));
    h.command = get(2);
    h.acquired_unix_ms = to_int(get(3));
    out.holders.push_back(std::move(h));
  }
}

// The `mode` field's value in HGETALL's reply; nullopt without one.
std::optional<std::string> mode_field(const reply& fields_reply) {
  const auto& fields = fields_reply.elements();
  for (std::size_t i = 0; i + 1 < fields.size(); i += 2) {
    if (fields[i].str() == "mode") return fields[i + 1].str();
  }
  return std::nullopt;
}

// Which kind the snapshot shows: the hash's `mode` marks a read-write lock, a queue a fair one.
void read_layout(const std::vector<reply>& e, lock_status& out) {
  out.fair_queue_length = e[6].to_integer().value_or(0);
  out.fair_queue = waiting_owners(e[7]);
  out.waiting_writers_count = e[8].to_integer().value_or(0);
  out.waiting_writers = waiting_owners(e[9]);
  const auto mode = mode_field(e[1]);
  const bool hash = e[0].str() == "hash";
  out.permits_leased = e[11].to_integer().value_or(0);
  if (out.permits_leased > 0) {
    out.layout = lock_layout::semaphore;
  } else if (e[0].str() == "string") {
    out.layout = lock_layout::counter;
  } else if (mode) {
    out.layout = lock_layout::read_write;
    out.mode = *mode;
  } else if (out.fair_queue_length > 0) {
    out.layout = lock_layout::fair;
  } else if (hash) {
    out.layout = lock_layout::mutex;
  } else if (out.waiting_writers_count > 0) {
    out.layout = lock_layout::read_write;
  }
}

// 16 raw bytes as 32 hex characters.
std::string hex(std::string_view raw) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  for (const char c : raw) {
    const auto byte = static_cast<unsigned char>(c);
    out += digits[byte >> 4];
    out += digits[byte & 0xf];
  }
  return out;
}

// A semaphore's counter and leased permits ({id, ms or nil, ...}), with the descriptions of
// their holders (keyed by the permit id in hex).
void read_permits(const std::vector<reply>& e, lock_status& out) {
  out.counter = to_int(e[10].is_nil() ? std::string{} : e[10].str());
  std::map<std::string, std::string> info;
  const auto& d = e[4].elements();
  for (std::size_t i = 0; i + 1 < d.size(); i += 2) info[d[i].str()] = d[i + 1].str();
  const auto& p = e[12].elements();
  for (std::size_t i = 0; i + 1 < p.size(); i += 2) {
    leased_permit lp;
    lp.id = hex(p[i].str());
    if (const auto ms = p[i + 1].to_integer()) lp.expires_in = std::chrono::milliseconds{*ms};
    const auto names = holder_fields(lp.id);  // host, pid, command, acquired_ms
    auto get = [&](std::size_t field) {
      auto it = info.find(names[field]);
      return it == info.end() ? std::string{} : it->second;
    };
    lp.host = get(0);
    lp.pid = to_int(get(1));
    lp.command = get(2);
    lp.acquired_unix_ms = to_int(get(3));
    out.permits.push_back(std::move(lp));
  }
}

// Subscribers of `channels` (of one cluster slot).
std::int64_t numsub(detail::client_impl& c, const std::vector<std::string>& channels,
                    std::error_code& ec) {
  const bool cluster = c.cfg().cluster();
  std::vector<std::string> args{"PUBSUB", cluster ? "SHARDNUMSUB" : "NUMSUB"};
  args.insert(args.end(), channels.begin(), channels.end());
  auto r = detail::run_blocking<reply>(c, ec, [&](detail::completion<reply> done) {
    c.submit(cluster ? keys::slot(args[2]) : std::uint16_t{0}, resp::encode_command(args),
             std::move(done));
  });
  if (ec) return 0;
  std::int64_t n = 0;
  const auto& e = r.elements();
  for (std::size_t i = 1; i < e.size(); i += 2) n += e[i].to_integer().value_or(0);
  return n;
}

// A counter's waiters: on the semaphore channel, and on the latch channel (in a cluster, of
// another slot when the name has a hash tag of its own).
void counter_subscribers(detail::client_impl& c, const std::string& name, lock_status& s,
                         std::error_code& ec) {
  s.semaphore_subscribers = numsub(c, {keys::semaphore_channel(name)}, ec);
  if (!ec) s.latch_subscribers = numsub(c, {keys::latch_channel(name)}, ec);
  s.subscribers = s.semaphore_subscribers + s.latch_subscribers;
}

// Waiters listen on the unlock channel of their kind: a plain channel on a single server, a
// shard channel at the slot's master in a cluster (as Redisson's do), which only SHARDNUMSUB
// counts. All of them are counted, so a waiter of any kind is.
std::int64_t subscribers(detail::client_impl& c, const std::string& name, const lock_status& s,
                         std::error_code& ec) {
  std::vector<std::string> channels{keys::lock_channel(name), keys::rwlock_channel(name)};
  for (const auto& w : s.fair_queue) channels.push_back(keys::fair_waiter_channel(name, w.owner));
  return numsub(c, channels, ec);
}

}  // namespace

lock_status inspect(client& cl, const std::string& name, std::error_code& ec) {
  ec.clear();
  lock_status out;
  auto& c = detail::client_access::impl(cl);
  if ((ec = detail::validate_name(c.cfg(), name))) return out;
  auto r = run_script(c, name, ec);
  if (ec) return out;
  const auto& e = r.elements();
  if (e.size() != 13) {
    ec = errc::protocol_error;
    return out;
  }
  if (e[0].str() != "hash" && e[0].str() != "none" && e[0].str() != "string") {
    ec = errc::wrong_type;
    return out;
  }
  read_layout(e, out);
  if (out.layout == lock_layout::semaphore || out.layout == lock_layout::counter) {
    read_permits(e, out);
    out.held = out.permits_leased > 0;
    out.remaining_lease = std::chrono::milliseconds{e[2].integer()};
    counter_subscribers(c, name, out, ec);
    return out;
  }
  read_holders(e[1], e[4], out.layout == lock_layout::read_write, out);
  out.held = !out.holders.empty();
  out.queued = e[5].to_integer().value_or(0);
  out.remaining_lease = std::chrono::milliseconds{e[2].integer()};
  out.fencing_counter = static_cast<std::uint64_t>(e[3].to_integer().value_or(0));
  out.subscribers = subscribers(c, name, out, ec);
  return out;
}

lock_status inspect(client& c, const std::string& name) {
  std::error_code ec;
  auto s = inspect(c, name, ec);
  throw_if(ec);
  return s;
}

void describe_holder(client& c, const std::string& name, const holder& h,
                     std::chrono::milliseconds ttl, std::error_code& ec) {
  const auto key = keys::holder_info(name);
  const auto f = holder_fields(h.owner);
  c.execute({"HSET", key, f[0], h.host, f[1], std::to_string(h.pid), f[2], h.command, f[3],
             std::to_string(h.acquired_unix_ms)},
            ec);
  if (!ec) c.execute({"PEXPIRE", key, std::to_string(ttl.count())}, ec);
}

std::vector<std::string> holder_fields(const std::string& owner) {
  return {owner + ":host", owner + ":pid", owner + ":command", owner + ":acquired_ms"};
}

void forget_holder(client& c, const std::string& name, const std::string& owner,
                   std::error_code& ec) {
  std::vector<std::string> args{"HDEL", keys::holder_info(name)};
  for (auto& f : holder_fields(owner)) args.push_back(std::move(f));
  c.execute(std::move(args), ec);
}

}  // namespace dlock
