// dlock exec: its holder description (keys::holder_info, read by `dlock status`) wherever it
// holds something — one name on one server for a lock or a permit, every member held for a
// multi_lock (several names) or a red_lock (one name on several servers). Each site is written
// at once, in parallel, so that one slow or unreachable server delays the others by nothing.
#include <unistd.h>

#include <algorithm>
#include <asio/use_future.hpp>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "cli.hpp"
#include "exec_hold.hpp"

namespace dlock_cli {

using namespace std::chrono_literals;
using std::chrono::milliseconds;

std::vector<hold_site> held::sites(dlock::client& c, const std::string& name) const {
  const auto* m = std::get_if<dlock::multi_lease>(&h_);
  if (!m) return {hold_site{&c, name, holder_id()}};
  std::vector<hold_site> out;
  for (std::size_t i = 0; i < m->members().size() && i < clients_.size(); ++i) {
    const auto& member = m->members()[i];
    if (member.owns()) out.push_back({clients_[i], member.name(), member.owner()});
  }
  return out;
}

namespace {

using replies = std::vector<std::future<dlock::reply>>;

// Whether the call succeeded, waiting for it (bounded by the command timeout).
bool succeeded(std::future<dlock::reply>& f) {
  try {
    f.get();
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

// HSET at every site, then PEXPIRE where it succeeded: in turn, so that a key created by a
// late HSET cannot be left without its expiry.
void describe_all(const std::vector<hold_site>& sites, dlock::holder me, milliseconds ttl) {
  replies set;
  for (const auto& s : sites) {
    const auto f = dlock::holder_fields(s.owner);
    set.push_back(s.client->async_execute(
        {"HSET", dlock::keys::holder_info(s.name), f[0], me.host, f[1], std::to_string(me.pid),
         f[2], me.command, f[3], std::to_string(me.acquired_unix_ms)},
        asio::use_future));
  }
  replies expire;
  for (std::size_t i = 0; i < sites.size(); ++i) {
    if (!succeeded(set[i])) continue;
    expire.push_back(sites[i].client->async_execute(
        {"PEXPIRE", dlock::keys::holder_info(sites[i].name), std::to_string(ttl.count())},
        asio::use_future));
  }
  for (auto& f : expire) f.wait();
}

replies forget_all(const std::vector<hold_site>& sites) {
  replies out;
  for (const auto& s : sites) {
    std::vector<std::string> args{"HDEL", dlock::keys::holder_info(s.name)};
    for (auto& f : dlock::holder_fields(s.owner)) args.push_back(std::move(f));
    out.push_back(s.client->async_execute(std::move(args), asio::use_future));
  }
  return out;
}

}  // namespace

dlock::holder describe_at(const exec_options& o, milliseconds ttl,
                          const std::vector<hold_site>& sites) {
  dlock::holder me{{}, 1, host_name(), getpid(), join(o.command)};
  const auto since_epoch = std::chrono::system_clock::now().time_since_epoch();
  me.acquired_unix_ms = std::chrono::floor<milliseconds>(since_epoch).count();
  describe_all(sites, me, ttl);
  return me;
}

holder_refresh::holder_refresh(std::vector<hold_site> sites, dlock::holder me, milliseconds ttl)
    : thread_{[sites = std::move(sites), me = std::move(me), ttl](std::stop_token stopping) {
        std::mutex mu;
        std::condition_variable_any cv;
        std::unique_lock lock{mu};
        // True once stop is requested (which wakes it), false after each ttl/3.
        // At most every 100 ms, however short the lease.
        const auto period = std::max<milliseconds>(ttl / 3, 100ms);
        while (!cv.wait_for(lock, stopping, period,
                            [&stopping] { return stopping.stop_requested(); })) {
          describe_all(sites, me, ttl);
        }
      }} {}

void holder_refresh::stop() {
  if (!thread_.joinable()) return;
  thread_.request_stop();
  thread_.join();
}

void forget_and_release(const std::vector<hold_site>& sites, held& lease, std::error_code& ec) {
  auto forgotten = forget_all(sites);
  lease.release(ec);
  for (auto& f : forgotten) f.wait();
}

void give_back(const std::vector<hold_site>& sites, held& lease) {
  auto forgotten = forget_all(sites);
  auto released = lease.release_async();
  const auto limit = std::chrono::steady_clock::now() + 1s;
  for (auto& f : forgotten) f.wait_until(limit);
  released.wait_until(limit);
}

}  // namespace dlock_cli
