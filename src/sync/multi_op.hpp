// The Asio shell of a multi_lock's or red_lock's acquisition: carries out what round_machine
// decides (rounds of group attempts on the members' clients, fencing floors, the pause timer,
// background releases) and feeds it their outcomes.
//
// The operation's state is guarded by one mutex: its members' replies arrive on their clients'
// I/O threads, its timer runs on the first member's. It completes on the I/O thread whose event
// decided it (a member's reply, or the first member's timer), or from asio::system_executor for
// a call refused at once; a completion handler with an associated executor runs there instead.
#pragma once

#include <chrono>
#include <optional>
#include <vector>

#include "dlock/detail/group_base.hpp"
#include "dlock/lease.hpp"
#include "sync/mutex_ops.hpp"

namespace dlock::detail {

// Makes the lease of a hold acquired by a group attempt (lease's constructor is private).
struct lease_access {
  static lease make(std::weak_ptr<client_impl> c, std::shared_ptr<hold_state> h) {
    return lease{std::move(c), std::move(h)};
  }
  static std::shared_ptr<client_impl> client(const lease& l) { return l.client_.lock(); }
  static const std::shared_ptr<hold_state>& hold(const lease& l) { return l.hold_; }
};

struct group_request {
  std::size_t needed = 1;
  bool floor = false;
  sync_kind kind = sync_kind::multi_lock;  // what metrics count it, and its members' holds, as
  std::optional<std::chrono::milliseconds> lease;  // nullopt: the watchdog lease, renewed
  std::optional<clock::time_point> deadline;       // nullopt: as long as it takes
};

// Completes with one lease per member (empty where a red_lock member was not acquired), or an
// error holding nothing. Members are validated by the caller. Thread-safe.
canceller start_group_acquire(const std::vector<group_member>& members, group_request req,
                              completion<std::vector<lease>> done);

// How long one round's attempt may take on a member: small against the lease (Redlock: a dead
// server must not eat the validity), at most the client's command timeout.
std::chrono::milliseconds attempt_budget(std::chrono::milliseconds lease,
                                         std::chrono::milliseconds command_timeout);

}  // namespace dlock::detail
