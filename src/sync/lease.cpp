#include "dlock/lease.hpp"

#include <asio/post.hpp>
#include <asio/system_executor.hpp>

#include "dlock/error.hpp"
#include "runtime/blocking.hpp"
#include "runtime/client_impl.hpp"
#include "sync/mutex_ops.hpp"

namespace dlock {

namespace {
const std::string empty;
}

lease::lease() noexcept = default;

lease::lease(std::weak_ptr<detail::client_impl> c, std::shared_ptr<detail::hold_state> h) noexcept
    : client_{std::move(c)}, hold_{std::move(h)} {}

lease::lease(lease&& other) noexcept = default;

lease& lease::operator=(lease&& other) noexcept {
  if (this != &other) {
    release_in_background();
    client_ = std::move(other.client_);
    hold_ = std::move(other.hold_);
  }
  return *this;
}

lease::~lease() { release_in_background(); }

bool lease::owns() const noexcept { return hold_ && hold_->count > 0; }
const std::string& lease::name() const noexcept { return hold_ ? hold_->name : empty; }
const std::string& lease::owner() const noexcept { return hold_ ? hold_->owner : empty; }
std::uint64_t lease::fencing_token() const noexcept { return hold_ ? hold_->token.load() : 0; }
std::chrono::milliseconds lease::time_left() const noexcept {
  return hold_ ? detail::time_left(*hold_) : std::chrono::milliseconds{0};
}
bool lease::replicated() const noexcept { return hold_ && hold_->replicated.load(); }
std::stop_token lease::lost() const noexcept {
  return hold_ ? hold_->lost_source.get_token() : std::stop_token{};
}

void lease::on_lost(std::function<void()> fn) {
  auto c = client_.lock();
  if (!hold_ || !c) return;
  c->post_if_running([h = hold_, fn = std::move(fn)]() mutable {
    if (h->lost) return fn();
    h->on_lost.push_back(std::move(fn));
  });
}

void lease::start_unlock(detail::completion<> done) {
  auto c = client_.lock();
  if (!hold_ || !c) {
    const auto ec = make_error_code(!hold_ ? errc::not_owner : errc::shutdown);
    asio::post(asio::system_executor{}, [done = std::move(done), ec]() mutable { done(ec); });
    return;
  }
  detail::start_release(*c, hold_,
                        [done = std::move(done)](std::error_code ec, bool) mutable { done(ec); });
}

void lease::unlock(std::error_code& ec) {
  auto c = client_.lock();
  if (!hold_ || !c) {
    ec = !hold_ ? errc::not_owner : errc::shutdown;
    return;
  }
  struct none {};
  detail::run_blocking<none>(*c, ec, [&](detail::completion<none> done) {
    start_unlock([done = std::move(done)](std::error_code e) mutable { done(e, none{}); });
  });
}

void lease::unlock() {
  std::error_code ec;
  unlock(ec);
  throw_if(ec);
}

void lease::release_in_background() noexcept {
  if (!owns() || hold_->releasing) return;  // an async_unlock is already on its way
  auto c = client_.lock();
  if (!c || c->stopped()) return;
  try {
    hold_->abandoned = true;
    detail::start_release(*c, std::move(hold_), [](std::error_code, bool) {});
  } catch (...) {
    // Out of memory while posting: the lock expires with its lease.
  }
  hold_.reset();
}

}  // namespace dlock
