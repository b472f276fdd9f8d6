// dlock exec NAME1 NAME2 ... -- CMD: runs CMD while holding every NAME on the one server, all or
// none (a dlock::multi_lock of mutexes; in a Redis Cluster the names may be in different slots).
// dlock exec --url A --url B --url C NAME -- CMD: runs CMD while holding NAME on a majority of
// those independent servers (a dlock::red_lock, one client per URL).
//
// Either acquisition completes with a dlock::multi_lease, which is renewed, trusted and lost as
// one lease (its time_left() is the earliest member's, or the majority's), so everything after
// it is exec's own (exec.cpp): the same --wait, --lease, watchdog, schedule for stopping CMD and
// exit codes as for one lock.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <system_error>
#include <vector>

#include "cli.hpp"
#include "exec_hold.hpp"

namespace dlock_cli {
namespace {

// What a config points at, to refuse one server twice: its host:port, its cluster seeds, or its
// sentinels with the master's name. (Two names of one host are not seen as one.)
std::vector<std::string> server_ids(const dlock::config& c) {
  const auto text = [](const dlock::endpoint& e) { return e.host + ":" + std::to_string(e.port); };
  std::vector<std::string> out;
  if (c.cluster()) {
    for (const auto& e : c.cluster_nodes) out.push_back(text(e));
  } else if (c.sentinel()) {
    for (const auto& e : c.sentinel_nodes) out.push_back(text(e) + "/" + c.sentinel_master);
  } else {
    out.push_back(text({c.host, c.port}));
  }
  return out;
}

// Why the names or servers cannot be held together as asked; empty if they can.
std::string group_usage(const exec_options& o, const std::vector<dlock::config>& servers) {
  if (o.names.size() > 1 && servers.size() > 1) {
    return "several NAMEs and several --url: give one NAME to hold on a majority of the servers "
           "(a red_lock), or one --url to hold every NAME there (a multi_lock)";
  }
  const std::string what = servers.size() > 1 ? "several --url" : "several NAMEs";
  if (o.permits) return "--permits takes a permit of one semaphore: not with " + what;
  if (o.fair || o.shared || o.rw) {
    return "--fair, --shared and --rw are kinds of one lock: not with " + what +
           ", whose members are plain locks";
  }
  std::set<std::string> seen;
  for (const auto& n : o.names) {
    if (!seen.insert(n).second) return "the name '" + n + "' is given twice";
  }
  seen.clear();
  for (const auto& s : servers) {
    for (const auto& id : server_ids(s)) {
      if (!seen.insert(id).second) {
        return "two --url name the same server (" + id + "): a red_lock needs independent ones";
      }
    }
  }
  return {};
}

// The config whose watchdog lease is the shortest: exec's timing must fit every member's.
const dlock::config& shortest_watchdog(const std::vector<dlock::config>& cfgs) {
  return *std::ranges::min_element(cfgs, {}, &dlock::config::watchdog_lease);
}

// Whether enough servers answer a PING to take the group at all (all for a multi_lock, a
// majority for a red_lock): an acquisition without --wait would otherwise try them for ever,
// where exec on one lock exits 69. Decided as soon as it can be: a dead minority costs nothing.
// 0, or the exit code (each server that did not answer said on stderr).
int reachable(const global_options& g, const std::vector<dlock::config>& cfgs,
              const std::vector<dlock::client*>& clients, std::size_t needed) {
  struct tally {
    std::mutex mu;
    std::condition_variable cv;
    std::size_t up = 0, down = 0;
    std::vector<std::error_code> errors;
  };
  const auto t = std::make_shared<tally>();  // the answers may come after the decision
  t->errors.resize(clients.size());
  for (std::size_t i = 0; i < clients.size(); ++i) {
    clients[i]->async_execute({"PING"}, [t, i](std::error_code ec, const dlock::reply&) {
      std::lock_guard lock{t->mu};
      ++(ec ? t->down : t->up);
      t->errors[i] = ec;
      t->cv.notify_all();
    });
  }
  std::unique_lock lock{t->mu};
  t->cv.wait(lock, [&] { return t->up >= needed || t->down > clients.size() - needed; });
  const bool enough = t->up >= needed;
  std::error_code first;
  for (std::size_t i = 0; i < clients.size(); ++i) {
    const auto& ec = t->errors[i];
    if (!ec) continue;
    if (!first) first = ec;
    const auto where = "exec: " + server_ids(cfgs[i]).front();
    if (enough) {
      verbose(g, where + ": " + ec.message() + " (the others are enough)");
    } else {
      complain(where, ec);
    }
  }
  return enough ? 0 : exit_code_for(first);
}

// Why a member refuses exec, when its code alone does not say.
std::string refusal(const exec_options& o, std::error_code ec) {
  if (ec == dlock::errc::wrong_kind) {
    return "a name is held as a read-write lock, where several NAMEs or --url take plain locks "
           "(`dlock status NAME` shows each of " +
           o.name + ")";
  }
  if (ec == dlock::errc::wrong_type) {
    return "a key of another type under a name (`dlock status NAME` shows each of " + o.name + ")";
  }
  return {};
}

// Starts the acquisition of `lock` as `a` says (--wait, --lease); `members`: each member's client.
start_fn start_group(const exec_args& a, dlock::detail::group_base& lock,
                     std::vector<dlock::client*> members) {
  return [&a, &lock, members = std::move(members)](acquired_fn done) {
    auto on_acquired = [done = std::move(done), members](std::error_code ec, dlock::multi_lease l) {
      done(ec, held{std::move(l), members});
    };
    if (a.wait && a.lease_time) {
      lock.async_lock_for(*a.wait, *a.lease_time, on_acquired);
    } else if (a.wait) {
      lock.async_lock_for(*a.wait, on_acquired);
    } else if (a.lease_time) {
      lock.async_lock(*a.lease_time, on_acquired);
    } else {
      lock.async_lock(on_acquired);
    }
  };
}

int hold_group(const global_options& g, const exec_options& o, const exec_args& a,
               dlock::detail::group_base& lock, const std::vector<dlock::client*>& clients,
               std::vector<dlock::client*> members, const sigset_t& signals) {
  held lease;
  auto why = [&o](std::error_code ec) { return refusal(o, ec); };
  if (auto code = acquire_held(g, o, clients, start_group(a, lock, std::move(members)), why,
                               signals, lease)) {
    return *code;
  }
  lease.on_lost([self = getpid()] { kill(self, SIGUSR1); });
  return run_held(o, a, *clients.front(), lease, signals);
}

int run_multi_lock(const global_options& g, const exec_options& o, const exec_args& a,
                   dlock::client& client, const sigset_t& signals) {
  std::deque<dlock::mutex> mutexes;  // stays where it is built: the multi_lock refers to it
  std::vector<std::reference_wrapper<dlock::mutex>> members;
  for (const auto& n : o.names) members.emplace_back(mutexes.emplace_back(client, n));
  dlock::multi_lock lock{members};
  verbose(g, "waiting for all of " + o.name);
  return hold_group(g, o, a, lock, {&client}, std::vector<dlock::client*>(o.names.size(), &client),
                    signals);
}

int run_red_lock(const global_options& g, const exec_options& o, const exec_args& a,
                 const std::vector<dlock::client*>& clients, const sigset_t& signals) {
  std::vector<std::reference_wrapper<dlock::client>> servers;
  for (auto* c : clients) servers.emplace_back(*c);
  dlock::red_lock lock{servers, o.name};
  verbose(g, "waiting for " + o.name + " on " + std::to_string(clients.size() / 2 + 1) + " of " +
                 std::to_string(clients.size()) + " servers" +
                 (clients.size() == 2 ? " (both: a red_lock of 2 survives no failure)" : ""));
  return hold_group(g, o, a, lock, clients, clients, signals);
}

}  // namespace

int run_exec_group(const global_options& g, const exec_options& o) {
  std::vector<dlock::config> cfgs;  // one per --url (a red_lock), else the one server's
  for (const auto& url : g.urls.size() > 1 ? g.urls : std::vector<std::string>{g.url}) {
    auto one = g;
    one.url = url;
    cfgs.push_back(make_config(one));
  }
  exec_args a;
  if (!check_exec_args(o, shortest_watchdog(cfgs), a)) return exit_usage;
  if (const auto why = group_usage(o, cfgs); !why.empty()) {
    complain("exec", why);
    return exit_usage;
  }
  const sigset_t signals = handled_signals();
  sigprocmask(SIG_BLOCK, &signals, nullptr);  // before the clients' threads exist: they inherit it

  std::vector<std::unique_ptr<dlock::client>> owned;
  std::vector<dlock::client*> clients;
  for (const auto& cfg : cfgs)
    clients.push_back(owned.emplace_back(std::make_unique<dlock::client>(cfg)).get());
  const auto needed = clients.size() > 1 ? clients.size() / 2 + 1 : 1;
  if (const int code = reachable(g, cfgs, clients, needed)) return code;
  if (clients.size() > 1) return run_red_lock(g, o, a, clients, signals);
  return run_multi_lock(g, o, a, *clients.front(), signals);
}

}  // namespace dlock_cli
