#include "dlock/detail/lock_base.hpp"

#include <asio/post.hpp>
#include <asio/system_executor.hpp>

#include "dlock/keys.hpp"
#include "resp/encoder.hpp"
#include "runtime/blocking.hpp"
#include "runtime/client_access.hpp"
#include "runtime/client_impl.hpp"
#include "runtime/owner.hpp"
#include "sync/mutex_ops.hpp"

namespace dlock::detail {

namespace {

std::shared_ptr<hold_state> new_hold(client_impl& c, const std::string& name,
                                     std::uint64_t owner_number,
                                     std::optional<std::chrono::milliseconds> lease_time,
                                     lock_kind kind) {
  return std::make_shared<hold_state>(name, owner_field(c.id(), owner_number),
                                      lease_time.value_or(c.cfg().watchdog_lease),
                                      !lease_time.has_value(), next_lease_number(), kind);
}

std::error_code check_args(const client_impl& c, const std::string& name,
                           std::optional<std::chrono::milliseconds> lease_time) {
  if (auto ec = validate_name(c.cfg(), name)) return ec;
  if (lease_time) return validate_lease(*lease_time);
  return {};
}

// Runs a strand operation from the calling thread and waits for it (the blocking bridge).
template <class T, class Start>
T wait_for(client_impl& c, std::error_code& ec, Start&& start) {
  return run_blocking<T>(c, ec, std::forward<Start>(start));
}

}  // namespace

std::string lock_base::own_field() const {
  auto field = owner_field(client_->id(), this_thread_number());
  if (kind_ == lock_kind::write) field += ":write";
  return field;
}

lock_base::lock_base(client& c, std::string name, lock_kind kind)
    : client_{client_access::shared(c)}, name_{std::move(name)}, kind_{kind} {}

bool lock_base::try_acquire(std::optional<milliseconds> wait,
                            std::optional<milliseconds> lease_time, std::error_code& ec,
                            std::stop_token stop) {
  ec.clear();
  auto& c = *client_;
  if ((ec = check_args(c, name_, lease_time))) return false;
  auto hold = own_hold();
  if (hold && lease_time && *lease_time != hold->lease) {
    // Re-entry keeps the first hold's lease (as Redisson does with one lease per hold).
    lease_time = hold->lease;
  }
  if (!hold) hold = new_hold(c, name_, this_thread_number(), lease_time, kind_);
  const auto deadline = deadline_after(wait);
  std::optional<std::stop_callback<canceller>> on_stop;
  auto got = wait_for<std::shared_ptr<hold_state>>(c, ec, [&](auto done) {
    auto cancel = start_acquire(c, hold, deadline, std::move(done));
    if (stop.stop_possible()) on_stop.emplace(stop, std::move(cancel));
  });
  if (ec == errc::timeout && wait) {
    ec.clear();  // try_lock*: not acquired in time is an answer, not an error
    return false;
  }
  if (ec) return false;
  if (got->count == 1) c.holds().put(got);
  return true;
}

bool lock_base::try_acquire_throwing(std::optional<milliseconds> wait,
                                     std::optional<milliseconds> lease_time) {
  std::error_code ec;
  const bool ok = try_acquire(wait, lease_time, ec);
  throw_if(ec);
  return ok;
}

void lock_base::lock() { try_acquire_throwing(std::nullopt, std::nullopt); }
void lock_base::lock(std::stop_token stop) {
  std::error_code ec;
  lock(std::move(stop), ec);
  throw_if(ec);
}
void lock_base::lock(std::stop_token stop, std::error_code& ec) {
  try_acquire(std::nullopt, std::nullopt, ec, std::move(stop));
}
void lock_base::lock(std::error_code& ec) { try_acquire(std::nullopt, std::nullopt, ec); }
void lock_base::lock(milliseconds lease_time) { try_acquire_throwing(std::nullopt, lease_time); }
void lock_base::lock(milliseconds lease_time, std::error_code& ec) {
  try_acquire(std::nullopt, lease_time, ec);
}
bool lock_base::try_lock() { return try_acquire_throwing(milliseconds{0}, std::nullopt); }
bool lock_base::try_lock(std::error_code& ec) {
  return try_acquire(milliseconds{0}, std::nullopt, ec);
}

void lock_base::unlock(std::error_code& ec) {
  ec.clear();
  auto& c = *client_;
  auto hold = own_hold();
  if (!hold) {
    ec = errc::not_owner;
    return;
  }
  const bool freed =
      wait_for<bool>(c, ec, [&](auto done) { start_release(c, hold, std::move(done)); });
  if (freed || hold->count == 0) c.holds().erase(*hold);
}

// Lockable's unlock() throws nothing the caller could act on, so that std::lock_guard and
// std::unique_lock may call it from their destructors: a lost lease was told already
// (lease_lost(), on_event, metrics), and a last release that fails is left to its lease on
// Redis (not renewed again, no longer this thread's). Only an unlock by a thread that holds
// nothing throws (errc::not_owner): a caller's mistake, never a guard's.
void lock_base::unlock() {
  auto hold = own_hold();
  if (!hold) throw lock_error(errc::not_owner);
  const bool last = hold->count == 1;
  if (last) hold->abandoned = true;
  std::error_code ec;
  unlock(ec);
  // A failed inner release keeps the hold (still renewed, still the thread's).
  if (ec && last && hold->count != 0) client_->holds().erase(*hold);
}

bool lock_base::force_unlock(std::error_code& ec) {
  ec.clear();
  auto& c = *client_;
  if ((ec = validate_name(c.cfg(), name_))) return false;
  return wait_for<bool>(c, ec,
                        [&](auto done) { start_force_unlock(c, name_, kind_, std::move(done)); });
}

bool lock_base::force_unlock() {
  std::error_code ec;
  const bool was = force_unlock(ec);
  throw_if(ec);
  return was;
}

namespace {
// One query to Redis about the lock; `read` turns the reply into the result.
template <class T, class Read>
T query(client_impl& c, const std::string& name, const std::vector<std::string>& args,
        std::error_code& ec, Read read) {
  ec.clear();
  if ((ec = validate_name(c.cfg(), name))) return T{};
  auto r = wait_for<reply>(c, ec, [&](auto done) {
    c.submit(keys::slot(name), resp::encode_command(args), std::move(done));
  });
  return ec ? T{} : read(r);
}

}  // namespace

bool lock_base::is_locked(std::error_code& ec) {
  return query<bool>(*client_, name_, {"EXISTS", name_}, ec,
                     [](const reply& r) { return r.integer() == 1; });
}
bool lock_base::is_locked() {
  return throwing<bool>([&](std::error_code& ec) { return is_locked(ec); });
}

bool lock_base::is_held_by_current_thread(std::error_code& ec) {
  const auto owner = own_field();
  return query<bool>(*client_, name_, {"HEXISTS", name_, owner}, ec,
                     [](const reply& r) { return r.integer() == 1; });
}
bool lock_base::is_held_by_current_thread() {
  return throwing<bool>([&](std::error_code& ec) { return is_held_by_current_thread(ec); });
}

std::uint32_t lock_base::hold_count(std::error_code& ec) {
  const auto owner = own_field();
  return query<std::uint32_t>(*client_, name_, {"HGET", name_, owner}, ec, [](const reply& r) {
    return static_cast<std::uint32_t>(r.to_integer().value_or(0));
  });
}
std::uint32_t lock_base::hold_count() {
  return throwing<std::uint32_t>([&](std::error_code& ec) { return hold_count(ec); });
}

lock_base::milliseconds lock_base::remaining_lease(std::error_code& ec) {
  return query<milliseconds>(*client_, name_, {"PTTL", name_}, ec,
                             [](const reply& r) { return milliseconds{r.integer()}; });
}
lock_base::milliseconds lock_base::remaining_lease() {
  return throwing<milliseconds>([&](std::error_code& ec) { return remaining_lease(ec); });
}

std::shared_ptr<hold_state> lock_base::own_hold() const {
  return client_->holds().find(hold_key(kind_, own_field(), name_));
}

std::uint64_t lock_base::fencing_token() const {
  auto hold = own_hold();
  return hold ? hold->token.load() : 0;
}

std::stop_token lock_base::lease_lost() const {
  auto hold = own_hold();
  return hold ? hold->lost_source.get_token() : std::stop_token{};
}

lock_base::milliseconds lock_base::lease_time_left() const {
  auto hold = own_hold();
  return hold ? time_left(*hold) : milliseconds{0};
}

bool lock_base::lease_replicated() const {
  auto hold = own_hold();
  return hold && hold->replicated.load();
}

std::function<void()> lock_base::start_lease(std::optional<milliseconds> wait,
                                             std::optional<milliseconds> lease_time,
                                             completion<lease> done) {
  auto& c = *client_;
  if (auto ec = check_args(c, name_, lease_time)) {
    asio::post(asio::system_executor{},
               [done = std::move(done), ec]() mutable { done(ec, lease{}); });
    return {};
  }
  auto hold = new_hold(c, name_, next_lease_number(), lease_time, kind_);
  return start_acquire(c, std::move(hold), deadline_after(wait),
                       [weak = std::weak_ptr<client_impl>(client_), done = std::move(done)](
                           std::error_code ec, std::shared_ptr<hold_state> h) mutable {
                         if (ec) return done(ec, lease{});
                         done({}, lease{weak, std::move(h)});
                       });
}

}  // namespace dlock::detail
