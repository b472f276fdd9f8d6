// dlock exec: what the command runs under — a lock's lease, a permit of a leased semaphore
// (--permits), or a group's multi_lease (several NAMEs: a multi_lock; several --url: a red_lock)
// — and the parts of exec that all share. Only exec.cpp, exec_permits.cpp, exec_group.cpp and
// exec_sites.cpp include this.
//
// A permit's lease and a group's behave as a lock's: the watchdog renews them (or --lease fixes
// them), time_left() is their trust deadline and lost() is requested when they may be gone, so
// exec's schedule for stopping the command (exec_schedule.hpp) applies to all unchanged. What
// differs: a permit carries no fencing token (the command gets DLOCK_PERMIT_ID instead of
// DLOCK_FENCING_TOKEN), a group has one per member (DLOCK_FENCING_TOKEN is the largest), and the
// holder description is kept wherever something is held (hold_site).
#pragma once

#include <signal.h>

#include <asio/use_future.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <optional>
#include <stop_token>
#include <string>
#include <system_error>
#include <thread>
#include <variant>
#include <vector>

#include "cli.hpp"

namespace dlock_cli {

// Where exec describes itself for `dlock status`: one lock name on one server, and the owner
// field of the hold there (a permit: its id).
struct hold_site {
  dlock::client* client = nullptr;
  std::string name;
  std::string owner;
};

class held {
 public:
  held() = default;
  explicit held(dlock::lease l) : h_{std::move(l)} {}
  explicit held(dlock::permit p) : h_{std::move(p)} {}
  // `clients`: each member's, in the order of the multi_lease's members.
  held(dlock::multi_lease l, std::vector<dlock::client*> clients)
      : h_{std::move(l)}, clients_{std::move(clients)} {}

  bool owns() const {
    return std::visit([](const auto& h) { return h.owns(); }, h_);
  }
  bool is_permit() const { return std::holds_alternative<dlock::permit>(h_); }
  std::chrono::milliseconds time_left() const {
    return std::visit([](const auto& h) { return h.time_left(); }, h_);
  }
  std::stop_token lost() const {
    return std::visit([](const auto& h) { return h.lost(); }, h_);
  }
  void on_lost(std::function<void()> fn) {
    std::visit([&fn](auto& h) { h.on_lost(std::move(fn)); }, h_);
  }
  // The lease's fencing token (a group's: the largest, a red_lock's quorum token); 0 for a
  // permit (permits carry none).
  std::uint64_t fencing_token() const {
    if (const auto* m = std::get_if<dlock::multi_lease>(&h_)) return m->fencing_token();
    const auto* l = std::get_if<dlock::lease>(&h_);
    return l ? l->fencing_token() : 0;
  }
  // Each member's token, in the order of the members (empty unless a group).
  std::vector<std::uint64_t> fencing_tokens() const {
    const auto* m = std::get_if<dlock::multi_lease>(&h_);
    return m ? m->fencing_tokens() : std::vector<std::uint64_t>{};
  }
  // Where a description is kept: `name` on `c` for a lease or a permit; each member held, on
  // its own client, for a group.
  std::vector<hold_site> sites(dlock::client& c, const std::string& name) const;
  // Whom the holder description (keys::holder_info) is about: the lease's owner field, or the
  // permit's id (32 hex characters); empty for a group (its sites() say, member by member).
  std::string holder_id() const {
    if (const auto* l = std::get_if<dlock::lease>(&h_)) return l->owner();
    if (std::holds_alternative<dlock::multi_lease>(h_)) return {};
    const auto ids = std::get<dlock::permit>(h_).ids();
    return ids.empty() ? std::string{} : ids.front();
  }
  void release(std::error_code& ec) {
    if (auto* l = std::get_if<dlock::lease>(&h_)) return l->unlock(ec);
    if (auto* m = std::get_if<dlock::multi_lease>(&h_)) return m->unlock(ec);
    std::get<dlock::permit>(h_).release(ec);
  }
  std::future<void> release_async() {
    if (auto* l = std::get_if<dlock::lease>(&h_)) return l->async_unlock(asio::use_future);
    if (auto* m = std::get_if<dlock::multi_lease>(&h_)) return m->async_unlock(asio::use_future);
    return std::get<dlock::permit>(h_).async_release(asio::use_future);
  }

 private:
  std::variant<dlock::lease, dlock::permit, dlock::multi_lease> h_;
  std::vector<dlock::client*> clients_;  // a group's members' clients
};

// Completes an acquisition started for exec.
using acquired_fn = std::function<void(std::error_code, held)>;
// Starts the acquisition (the lock's or the permit's), to complete on the client's thread.
using start_fn = std::function<void(acquired_fn)>;

// The signals exec's main thread waits for (exec.cpp says which and why).
sigset_t handled_signals();

// Starts the acquisition and waits for it, or for a signal that ends the wait (SIGTSTP stops
// dlock meanwhile). The exit code when nothing is held: 75 not acquired within --wait, 128+N
// for signal N, or that of the error (said on stderr, by `why` if it gives a text for it).
// nullopt when `out` holds.
// `clients`: those the acquisition uses (shut down to abandon it).
std::optional<int> acquire_held(const global_options& g, const exec_options& o,
                                const std::vector<dlock::client*>& clients, const start_fn& start,
                                const std::function<std::string(std::error_code)>& why,
                                const sigset_t& signals, held& out);

// With the lock, permit or group held (a lock or permit on `client`): runs the command if its
// lease is trusted long enough, stopping it as exec_schedule.hpp says, and releases it. The
// exit code.
int run_held(const exec_options& o, const exec_args& a, dlock::client& client, held& h,
             const sigset_t& signals);

// The holder description at `sites` (exec_sites.cpp), all best effort: no reader depends on it.
// Describes this exec (host, pid, command, now) at every site at once; the description, whose
// owner each site replaces.
dlock::holder describe_at(const exec_options& o, std::chrono::milliseconds ttl,
                          const std::vector<hold_site>& sites);
// Refreshes it every ttl/3 on a thread of its own: a refresh waits for Redis, up to the command
// timeout when Redis does not answer, and the main thread must not, since that is exactly when
// the lease-lost signal comes and the command has to be stopped at once. Created after the
// signals were blocked, so it inherits the mask.
class holder_refresh {
 public:
  holder_refresh(std::vector<hold_site> sites, dlock::holder me, std::chrono::milliseconds ttl);
  // Waits for a refresh in flight (bounded by the command timeout).
  void stop();

 private:
  std::jthread thread_;
};
// Removes it at every site, then releases `lease`; waits for both (each bounded by the command
// timeout).
void forget_and_release(const std::vector<hold_site>& sites, held& lease, std::error_code& ec);
// The same without keeping the caller waiting on a Redis that may not answer (that is often
// why the lease is in doubt): cleans up if it does, within a second. The release is
// owner-checked, so it cannot touch a new holder's lock either way.
void give_back(const std::vector<hold_site>& sites, held& lease);

// exec with several NAMEs (a multi_lock) or several --url (a red_lock) (exec_group.cpp).
int run_exec_group(const global_options& g, const exec_options& o);

// exec --permits N: takes one permit of the leased semaphore NAME (exec_permits.cpp).
int run_exec_permits(const global_options& g, const exec_options& o, const exec_args& a,
                     dlock::client& client, const sigset_t& signals);

}  // namespace dlock_cli
