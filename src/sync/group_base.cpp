#include "dlock/detail/group_base.hpp"

#include <algorithm>
#include <asio/post.hpp>
#include <asio/system_executor.hpp>
#include <set>

#include "dlock/multi_lock.hpp"
#include "dlock/red_lock.hpp"
#include "runtime/blocking.hpp"
#include "runtime/client_access.hpp"
#include "runtime/client_impl.hpp"
#include "runtime/owner.hpp"
#include "sync/multi_op.hpp"
#include "sync/round_machine.hpp"

namespace dlock::detail {
namespace {

std::error_code validate(const std::vector<group_member>& members, std::size_t needed) {
  if (members.empty() || needed == 0 || needed > members.size()) return errc::invalid_argument;
  std::set<std::pair<const client_impl*, std::string>> seen;
  for (const auto& m : members) {
    if (auto ec = validate_name(m.client->cfg(), m.name)) return ec;
    if (!seen.emplace(m.client.get(), m.name).second) return errc::invalid_argument;
  }
  return {};
}

}  // namespace

group_base::group_base(std::vector<group_member> members, std::size_t needed, bool floor)
    : members_{std::move(members)},
      needed_{needed},
      floor_{floor},
      invalid_{validate(members_, needed)} {}

group_base::~group_base() = default;

std::function<void()> group_base::start(std::optional<milliseconds> wait,
                                        std::optional<milliseconds> lease_time,
                                        completion<multi_lease> done) {
  auto ec = invalid_;
  if (!ec && lease_time) ec = validate_lease(*lease_time);
  if (ec) {
    asio::post(asio::system_executor{},
               [done = std::move(done), ec]() mutable { done(ec, multi_lease{}); });
    return {};
  }
  group_request req{
      .needed = needed_,
      .floor = floor_,
      .kind = floor_ ? sync_kind::red_lock : sync_kind::multi_lock,  // only red_lock floors
      .lease = lease_time,
      .deadline = deadline_after(wait)};
  return start_group_acquire(members_, req,
                             [needed = needed_, done = std::move(done)](
                                 std::error_code e, std::vector<lease> leases) mutable {
                               if (e) return done(e, multi_lease{});
                               done({}, multi_lease{std::move(leases), needed});
                             });
}

bool group_base::try_acquire(std::optional<milliseconds> wait,
                             std::optional<milliseconds> lease_time, std::error_code& ec,
                             std::stop_token stop) {
  ec.clear();
  if ((ec = invalid_)) return false;
  if (lease_time && (ec = validate_lease(*lease_time))) return false;
  const auto me = this_thread_number();
  {
    std::lock_guard lock{mu_};
    if (auto it = held_.find(me); it != held_.end()) {
      ++it->second.count;  // re-entry keeps the first hold (and its lease)
      return true;
    }
  }
  for (const auto& m : members_) {
    // This thread holds the member itself: the multi_lock's own owner would wait for it.
    const auto mine = hold_key(lock_kind::mutex, owner_field(m.client->id(), me), m.name);
    if (m.client->on_io_thread() || m.client->holds().find(mine)) {
      ec = errc::would_deadlock;
      return false;
    }
  }
  std::optional<std::stop_callback<canceller>> on_stop;
  auto got = run_blocking<multi_lease>(*members_.front().client, ec, [&](auto done) {
    auto cancel = start(wait, lease_time, std::move(done));
    if (stop.stop_possible() && cancel) on_stop.emplace(stop, std::move(cancel));
  });
  if (ec == errc::timeout && wait) {
    ec.clear();
    return false;
  }
  if (ec) return false;
  std::lock_guard lock{mu_};
  held_[me] = thread_hold{std::move(got), 1};
  return true;
}

bool group_base::try_acquire_throwing(std::optional<milliseconds> wait,
                                      std::optional<milliseconds> lease_time) {
  std::error_code ec;
  const bool ok = try_acquire(wait, lease_time, ec);
  throw_if(ec);
  return ok;
}

void group_base::lock() { try_acquire_throwing(std::nullopt, std::nullopt); }
void group_base::lock(std::error_code& ec) { try_acquire(std::nullopt, std::nullopt, ec); }
void group_base::lock(milliseconds lease) { try_acquire_throwing(std::nullopt, lease); }
void group_base::lock(milliseconds lease, std::error_code& ec) {
  try_acquire(std::nullopt, lease, ec);
}
void group_base::lock(std::stop_token stop) {
  std::error_code ec;
  lock(std::move(stop), ec);
  throw_if(ec);
}
void group_base::lock(std::stop_token stop, std::error_code& ec) {
  try_acquire(std::nullopt, std::nullopt, ec, std::move(stop));
}
bool group_base::try_lock() { return try_acquire_throwing(milliseconds{0}, std::nullopt); }
bool group_base::try_lock(std::error_code& ec) {
  return try_acquire(milliseconds{0}, std::nullopt, ec);
}

void group_base::unlock(std::error_code& ec) {
  ec.clear();
  multi_lease last;
  {
    std::lock_guard lock{mu_};
    auto it = held_.find(this_thread_number());
    if (it == held_.end()) {
      ec = errc::not_owner;
      return;
    }
    if (--it->second.count > 0) return;
    last = std::move(it->second.lease);
    held_.erase(it);
  }
  last.unlock(ec);  // errc::would_deadlock on an I/O thread: released as `last` goes
}

// As lock_base::unlock(): only a thread that holds nothing gets an exception (guards call this
// from destructors); the members' releases report a lost lease or a failure in unlock(ec).
void group_base::unlock() {
  std::error_code ec;
  unlock(ec);
  if (ec == errc::not_owner) throw lock_error(ec);
}

const multi_lease* group_base::own() const {
  auto it = held_.find(this_thread_number());
  return it == held_.end() ? nullptr : &it->second.lease;
}

std::vector<std::uint64_t> group_base::fencing_tokens() const {
  std::lock_guard lock{mu_};
  const auto* l = own();
  return l ? l->fencing_tokens() : std::vector<std::uint64_t>{};
}
std::uint64_t group_base::fencing_token() const {
  std::lock_guard lock{mu_};
  const auto* l = own();
  return l ? l->fencing_token() : 0;
}
std::stop_token group_base::lease_lost() const {
  std::lock_guard lock{mu_};
  const auto* l = own();
  return l ? l->lost() : std::stop_token{};
}
group_base::milliseconds group_base::lease_time_left() const {
  std::lock_guard lock{mu_};
  const auto* l = own();
  return l ? l->time_left() : milliseconds{0};
}

namespace {

std::vector<group_member> of_mutexes(const std::vector<std::reference_wrapper<mutex>>& members) {
  std::vector<group_member> out;
  for (const mutex& m : members) out.push_back({m.client_, m.name()});
  return out;
}

std::vector<group_member> of_servers(const std::vector<std::reference_wrapper<client>>& servers,
                                     const std::string& name) {
  std::vector<group_member> out;
  for (const client& c : servers) out.push_back({client_access::shared(c), name});
  return out;
}

}  // namespace
}  // namespace dlock::detail

namespace dlock {

multi_lock::multi_lock(std::vector<std::reference_wrapper<mutex>> members)
    : group_base{detail::of_mutexes(members), members.size(), false} {}

red_lock::red_lock(std::vector<std::reference_wrapper<client>> servers, std::string name)
    : group_base{detail::of_servers(servers, name), detail::quorum(servers.size()), true},
      name_{std::move(name)} {}

}  // namespace dlock
