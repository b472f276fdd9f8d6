// The acquisitions and update scripts shared by leased_semaphore, counting_semaphore and latch:
// each acquisition is a hold of its kind run by the locks' acquire machine (sync/acquire.cpp).
#include "dlock/detail/sync_base.hpp"

#include <unistd.h>

#include <asio/post.hpp>
#include <asio/system_executor.hpp>
#include <random>

#include "dlock/counting_semaphore.hpp"
#include "dlock/keys.hpp"
#include "dlock/leased_semaphore.hpp"
#include "runtime/blocking.hpp"
#include "runtime/client_access.hpp"
#include "runtime/client_impl.hpp"
#include "runtime/owner.hpp"
#include "scripts/script.hpp"
#include "sync/mutex_ops.hpp"

namespace dlock::detail {
namespace {

// The largest count the semaphores and the latch accept: Redisson's are Java ints.
constexpr std::int64_t max_count = 2147483647;

// n permit ids of 16 random bytes each, packed (Redisson's ids are 16 random bytes too). The
// generator is seeded again in a forked child, which would otherwise repeat its parent's ids.
std::string new_permit_ids(std::uint32_t n) {
  struct generator {
    pid_t pid = 0;
    std::mt19937_64 rng;
  };
  thread_local generator g;
  if (g.pid != ::getpid()) {
    std::random_device rd;
    std::seed_seq seq{rd(), rd(), rd(), rd(), rd(), rd(), rd(), rd()};
    g.rng.seed(seq);
    g.pid = ::getpid();
  }
  std::string out(std::size_t{n} * 16, '\0');
  for (std::size_t at = 0; at < out.size(); at += 8) {
    const auto v = g.rng();
    for (std::size_t i = 0; i < 8; ++i) out[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
  }
  return out;
}

std::error_code check(const client_impl& c, const std::string& name, lock_kind kind,
                      const sync_base::request& r) {
  if (auto ec = validate_name(c.cfg(), name)) return ec;
  // A latch's channel keeps the raw name in braces: with a tag of its own, another slot.
  if (kind == lock_kind::latch && c.cfg().cluster() &&
      keys::slot(keys::latch_channel(name)) != keys::slot(name)) {
    return errc::invalid_argument;
  }
  if (kind != lock_kind::latch && (r.permits == 0 || r.permits > leased_semaphore::max_permits)) {
    return errc::invalid_argument;
  }
  if (r.lease) return validate_lease(*r.lease);
  return {};
}

std::shared_ptr<hold_state> new_hold(client_impl& c, const std::string& name, lock_kind kind,
                                     const sync_base::request& r) {
  auto lease = r.lease.value_or(c.cfg().watchdog_lease);
  std::string ids;
  if (kind == lock_kind::permits) ids = new_permit_ids(r.permits);
  if (kind == lock_kind::counting) lease = counting_semaphore::undo_window;
  if (kind == lock_kind::latch) lease = max_lease;
  const bool watchdog = kind == lock_kind::permits && !r.lease;
  return std::make_shared<hold_state>(name, owner_field(c.id(), next_lease_number()), lease,
                                      watchdog, next_lease_number(), kind, std::move(ids),
                                      r.permits);
}

}  // namespace

sync_base::sync_base(client& c, std::string name, lock_kind kind)
    : client_{client_access::shared(c)}, name_{std::move(name)}, kind_{kind} {}

sync_base::hold_ptr sync_base::acquire(const request& r, std::error_code& ec,
                                       std::stop_token stop) {
  ec.clear();
  auto& c = *client_;
  if ((ec = check(c, name_, kind_, r))) return nullptr;
  auto hold = new_hold(c, name_, kind_, r);
  const auto deadline = deadline_after(r.wait);
  std::optional<std::stop_callback<canceller>> on_stop;
  auto got = run_blocking<hold_ptr>(c, ec, [&](auto done) {
    auto cancel = start_acquire(c, hold, deadline, std::move(done));
    if (stop.stop_possible()) on_stop.emplace(stop, std::move(cancel));
  });
  if (!ec) return got;
  if (ec == errc::timeout && r.wait) ec.clear();  // not acquired in time: an answer
  return nullptr;
}

std::function<void()> sync_base::start(const request& r, completion<hold_ptr> done) {
  auto& c = *client_;
  if (auto ec = check(c, name_, kind_, r)) {
    asio::post(asio::system_executor{},
               [done = std::move(done), ec]() mutable { done(ec, nullptr); });
    return {};
  }
  return start_acquire(c, new_hold(c, name_, kind_, r), deadline_after(r.wait), std::move(done));
}

std::int64_t sync_base::update(std::string_view op, std::int64_t n, std::error_code& ec) {
  ec.clear();
  auto& c = *client_;
  if ((ec = check(c, name_, kind_, {}))) return 0;
  if (n > max_count || n < -max_count || (op == "set" && n < 0)) {
    ec = errc::invalid_argument;
    return 0;
  }
  const bool latch = kind_ == lock_kind::latch;
  const auto channel = latch ? keys::latch_channel(name_) : keys::semaphore_channel(name_);
  const auto timeouts = keys::permit_timeouts(name_);
  const auto count = std::to_string(n);
  const std::string_view keys[] = {name_, timeouts};
  const std::string_view argv[] = {op, count, channel, c.cfg().cluster() ? "1" : "0"};
  const auto& script = latch ? scripts::latch_update : scripts::semaphore_update;
  const std::size_t nkeys = kind_ == lock_kind::permits ? 2 : 1;
  auto r = run_blocking<reply>(c, ec, [&](auto done) {
    c.scripts().eval(script, std::span<const std::string_view>{keys, nkeys}, argv,
                     c.cfg().command_timeout, std::move(done));
  });
  return ec ? 0 : r.to_integer().value_or(0);
}

}  // namespace dlock::detail
