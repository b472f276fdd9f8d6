#include "dlock/inspect.hpp"

#include <charconv>
#include <map>

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
  return detail::run_blocking<reply>(c, ec, [&](detail::completion<reply> done) {
    std::string_view ks[] = {name, k.slot_counter.empty() ? std::string_view{name} : k.slot_counter,
                             info, k.queue};
    c.scripts().eval(scripts::lock_inspect, ks, {}, c.cfg().command_timeout, std::move(done));
  });
}

// Waiters listen on the unlock channel: a plain channel on a single server, a shard channel at
// the slot's master in a cluster (as Redisson's do), which only SHARDNUMSUB counts.
std::int64_t subscribers(detail::client_impl& c, const std::string& name, std::error_code& ec) {
  const auto channel = keys::lock_channel(name);
  const bool cluster = c.cfg().cluster();
  auto r = detail::run_blocking<reply>(c, ec, [&](detail::completion<reply> done) {
    c.submit(cluster ? keys::slot(channel) : std::uint16_t{0},
             resp::encode_command({"PUBSUB", cluster ? "SHARDNUMSUB" : "NUMSUB", channel}),
             std::move(done));
  });
  if (ec || r.elements().size() != 2) return 0;
  return r.elements()[1].to_integer().value_or(0);
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
  if (e.size() != 6) {
    ec = errc::protocol_error;
    return out;
  }
  if (e[0].str() != "hash" && e[0].str() != "none") {
    ec = errc::wrong_type;
    return out;
  }
  std::map<std::string, std::string> info;
  for (std::size_t i = 0; i + 1 < e[4].elements().size(); i += 2) {
    info[e[4].elements()[i].str()] = e[4].elements()[i + 1].str();
  }
  const auto& fields = e[1].elements();
  for (std::size_t i = 0; i + 1 < fields.size(); i += 2) {
    holder h;
    h.owner = fields[i].str();
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
  out.held = !out.holders.empty();
  out.queued = e[5].to_integer().value_or(0);
  out.remaining_lease = std::chrono::milliseconds{e[2].integer()};
  out.fencing_counter = static_cast<std::uint64_t>(e[3].to_integer().value_or(0));
  out.subscribers = subscribers(c, name, ec);
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
