// dlock::latch: waits are acquisitions of kind latch (latch_check.lua, re-checked on `0` and
// every wait_recheck); writes go through latch_update.lua.
#include "dlock/latch.hpp"

#include "dlock/error.hpp"

namespace dlock {

latch::latch(client& c, std::string name)
    : sync_base{c, std::move(name), detail::lock_kind::latch} {}

bool latch::try_set_count(std::int64_t n, std::error_code& ec) {
  if (n <= 0) {
    ec = errc::invalid_argument;
    return false;
  }
  return update("set", n, ec) == 1;
}
bool latch::try_set_count(std::int64_t n) {
  std::error_code ec;
  const bool set = try_set_count(n, ec);
  throw_if(ec);
  return set;
}

std::int64_t latch::count(std::error_code& ec) { return update("count", 0, ec); }
std::int64_t latch::count() {
  std::error_code ec;
  const auto n = count(ec);
  throw_if(ec);
  return n;
}

void latch::count_down(std::int64_t n, std::error_code& ec) {
  if (n <= 0) {
    ec = errc::invalid_argument;
    return;
  }
  update("down", n, ec);
}
void latch::count_down(std::int64_t n) {
  std::error_code ec;
  count_down(n, ec);
  throw_if(ec);
}

bool latch::wait_ms(std::optional<milliseconds> wait, std::error_code& ec, std::stop_token stop) {
  return sync_base::acquire({1, wait, {}}, ec, std::move(stop)) != nullptr;
}
bool latch::wait_throwing(std::optional<milliseconds> wait) {
  std::error_code ec;
  const bool open = wait_ms(wait, ec);
  throw_if(ec);
  return open;
}
bool latch::try_wait(std::error_code& ec) { return wait_ms(milliseconds{0}, ec); }
bool latch::try_wait() { return wait_throwing(milliseconds{0}); }
void latch::wait(std::error_code& ec) { wait_ms(std::nullopt, ec); }
void latch::wait() { wait_throwing(std::nullopt); }
void latch::wait(std::stop_token stop, std::error_code& ec) {
  wait_ms(std::nullopt, ec, std::move(stop));
}
void latch::wait(std::stop_token stop) {
  std::error_code ec;
  wait(std::move(stop), ec);
  throw_if(ec);
}
void latch::arrive_and_wait(std::int64_t n, std::error_code& ec) {
  count_down(n, ec);
  if (!ec) wait(ec);
}
void latch::arrive_and_wait(std::int64_t n) {
  std::error_code ec;
  arrive_and_wait(n, ec);
  throw_if(ec);
}

}  // namespace dlock
