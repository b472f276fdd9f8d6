#include "dlock/multi_lease.hpp"

#include <algorithm>
#include <asio/post.hpp>
#include <asio/system_executor.hpp>
#include <atomic>
#include <cstdio>
#include <mutex>

#include "dlock/error.hpp"
#include "runtime/blocking.hpp"
#include "runtime/client_impl.hpp"
#include "sync/multi_op.hpp"

namespace dlock {
namespace detail {

// Shared by a multi_lease and its members' on_lost callbacks (which may outlive it).
struct lease_set_state {
  lease_set_state(std::size_t held, std::size_t n) : live{held}, needed{n} {}

  std::atomic<std::size_t> live;  // members held and not lost
  const std::size_t needed;
  std::atomic<bool> unlocked{false};
  std::stop_source lost;
  std::mutex mu;
  bool fired = false;
  std::vector<std::function<void()>> on_lost;

  void member_lost() {
    if (unlocked) return;
    if (live.fetch_sub(1) - 1 < needed) fire();
  }
  void fire() {
    std::vector<std::function<void()>> callbacks;
    {
      std::lock_guard lock{mu};
      if (fired) return;
      fired = true;
      callbacks = std::move(on_lost);
    }
    lost.request_stop();
    for (auto& f : callbacks) {
      try {
        f();
      } catch (...) {
        std::fprintf(stderr, "dlock: an on_lost callback of a multi_lease threw\n");
      }
    }
  }
};

}  // namespace detail

multi_lease::multi_lease() noexcept = default;
multi_lease::multi_lease(multi_lease&&) noexcept = default;
multi_lease& multi_lease::operator=(multi_lease&& other) noexcept {
  if (this != &other) {
    members_ = std::move(other.members_);  // the members' own assignment releases the old ones
    state_ = std::move(other.state_);
  }
  return *this;
}
multi_lease::~multi_lease() = default;

multi_lease::multi_lease(std::vector<lease> members, std::size_t needed)
    : members_{std::move(members)} {
  const auto held = static_cast<std::size_t>(
      std::count_if(members_.begin(), members_.end(), [](const lease& l) { return l.owns(); }));
  state_ = std::make_shared<detail::lease_set_state>(held, needed);
  std::weak_ptr<detail::lease_set_state> weak = state_;
  for (auto& m : members_) {
    if (!m.owns()) continue;
    m.on_lost([weak] {
      if (auto s = weak.lock()) s->member_lost();
    });
  }
}

bool multi_lease::owns() const noexcept { return state_ && !state_->unlocked; }

std::vector<std::uint64_t> multi_lease::fencing_tokens() const {
  std::vector<std::uint64_t> out;
  out.reserve(members_.size());
  for (const auto& m : members_) out.push_back(m.fencing_token());
  return out;
}

std::uint64_t multi_lease::fencing_token() const noexcept {
  std::uint64_t t = 0;
  for (const auto& m : members_) t = std::max(t, m.fencing_token());
  return t;
}

std::chrono::milliseconds multi_lease::time_left() const noexcept {
  if (!owns() || state_->lost.stop_requested()) return std::chrono::milliseconds{0};
  // The needed-th longest: for a multi_lock (needed = all) the earliest member's.
  std::vector<std::chrono::milliseconds> left;
  for (const auto& m : members_) left.push_back(m.time_left());
  if (left.size() < state_->needed) return std::chrono::milliseconds{0};
  std::nth_element(left.begin(), left.begin() + static_cast<std::ptrdiff_t>(state_->needed - 1),
                   left.end(), std::greater<>{});
  return left[state_->needed - 1];
}

std::stop_token multi_lease::lost() const noexcept {
  return state_ ? state_->lost.get_token() : std::stop_token{};
}

void multi_lease::on_lost(std::function<void()> fn) {
  if (!state_) return;
  {
    std::lock_guard lock{state_->mu};
    if (!state_->fired) {
      state_->on_lost.push_back(std::move(fn));
      return;
    }
  }
  fn();
}

void multi_lease::start_unlock(detail::completion<> done) {
  if (!owns()) {
    asio::post(asio::system_executor{},
               [done = std::move(done)]() mutable { done(errc::not_owner); });
    return;
  }
  state_->unlocked = true;
  struct tally {
    std::mutex mu;
    std::size_t pending, released = 0, needed;
    std::error_code lost, other;
    detail::completion<> done;
  };
  auto t = std::make_shared<tally>();
  t->pending = members_.size();
  t->needed = state_->needed;
  t->done = std::move(done);
  auto settle = [t](std::error_code ec) {
    std::unique_lock lock{t->mu};
    if (!ec) {
      ++t->released;
    } else if (ec == errc::lease_lost) {
      t->lost = ec;
    } else if (ec != errc::not_owner) {
      t->other = ec;
    }
    --t->pending;
    // Done once enough members are released (a red_lock's dead server, whose release fails
    // only after the connect timeout, does not hold the caller up), or when all answered.
    if (!t->done || (t->pending > 0 && t->released < t->needed)) return;
    std::error_code out;
    if (t->released < t->needed) out = t->lost ? t->lost : t->other ? t->other : errc::lease_lost;
    auto finish = std::move(t->done);
    t->done = nullptr;
    lock.unlock();
    finish(out);
  };
  for (auto& m : members_) {
    if (m.owns()) {
      m.async_unlock(settle);
    } else {
      settle(errc::not_owner);
    }
  }
}

void multi_lease::unlock(std::error_code& ec) {
  std::shared_ptr<detail::client_impl> any;
  for (const auto& m : members_) {
    auto c = detail::lease_access::client(m);
    if (c && c->on_io_thread()) {
      ec = errc::would_deadlock;  // waiting there would stop the thread that must answer
      return;
    }
    if (c && !any) any = std::move(c);
  }
  if (!any) {
    ec = owns() ? errc::shutdown : errc::not_owner;
    return;
  }
  struct none {};
  detail::run_blocking<none>(*any, ec, [&](detail::completion<none> done) {
    start_unlock([done = std::move(done)](std::error_code e) mutable { done(e, none{}); });
  });
}

void multi_lease::unlock() {
  std::error_code ec;
  unlock(ec);
  throw_if(ec);
}

}  // namespace dlock
