// dlock::leased_semaphore, dlock::permit and dlock::counting_semaphore: thin shells over
// sync_base (acquisitions) and semaphore_update.lua (the counter).
#include "dlock/counting_semaphore.hpp"
#include "dlock/leased_semaphore.hpp"
#include "runtime/hold.hpp"
#include "sync/mutex_ops.hpp"

namespace dlock {

using detail::throwing;

const detail::hold_state* permit::hold() const noexcept { return lease_.hold_.get(); }

std::uint32_t permit::count() const noexcept { return owns() ? hold()->permits : 0; }

std::vector<std::string> permit::ids() const {
  std::vector<std::string> out;
  if (!owns()) return out;
  static constexpr char digits[] = "0123456789abcdef";
  const auto& packed = hold()->field;
  for (std::size_t at = 0; at + 16 <= packed.size(); at += 16) {
    std::string hex;
    for (std::size_t i = at; i < at + 16; ++i) {
      const auto byte = static_cast<unsigned char>(packed[i]);
      hex += digits[byte >> 4];
      hex += digits[byte & 0xf];
    }
    out.push_back(std::move(hex));
  }
  return out;
}

leased_semaphore::leased_semaphore(client& c, std::string name)
    : sync_base{c, std::move(name), detail::lock_kind::permits} {}

permit leased_semaphore::make_permit(std::weak_ptr<detail::client_impl> c, hold_ptr h) {
  return permit{lease{std::move(c), std::move(h)}};
}

permit leased_semaphore::get(const request& r, std::error_code& ec, std::stop_token stop) {
  auto h = sync_base::acquire(r, ec, std::move(stop));
  return h ? make_permit(client_, std::move(h)) : permit{};
}

permit leased_semaphore::get_throwing(const request& r) {
  return throwing<permit>([&](std::error_code& ec) { return get(r, ec); });
}

permit leased_semaphore::acquire(std::uint32_t n) { return get_throwing({n, {}, {}}); }
permit leased_semaphore::acquire(std::uint32_t n, std::error_code& ec) {
  return get({n, {}, {}}, ec);
}
permit leased_semaphore::acquire(std::uint32_t n, milliseconds lease) {
  return get_throwing({n, {}, lease});
}
permit leased_semaphore::acquire(std::uint32_t n, milliseconds lease, std::error_code& ec) {
  return get({n, {}, lease}, ec);
}
permit leased_semaphore::acquire(std::stop_token stop, std::uint32_t n) {
  return throwing<permit>([&](std::error_code& ec) { return acquire(stop, n, ec); });
}
permit leased_semaphore::acquire(std::stop_token stop, std::uint32_t n, std::error_code& ec) {
  return get({n, {}, {}}, ec, std::move(stop));
}
permit leased_semaphore::try_acquire(std::uint32_t n) {
  return get_throwing({n, milliseconds{0}, {}});
}
permit leased_semaphore::try_acquire(std::uint32_t n, std::error_code& ec) {
  return get({n, milliseconds{0}, {}}, ec);
}

std::int64_t leased_semaphore::available(std::error_code& ec) { return update("available", 0, ec); }
std::int64_t leased_semaphore::available() {
  return throwing<std::int64_t>([&](std::error_code& ec) { return available(ec); });
}
std::int64_t leased_semaphore::leased(std::error_code& ec) { return update("leased", 0, ec); }
std::int64_t leased_semaphore::leased() {
  return throwing<std::int64_t>([&](std::error_code& ec) { return leased(ec); });
}
bool leased_semaphore::try_set_permits(std::int64_t n, std::error_code& ec) {
  return update("set", n, ec) == 1;
}
bool leased_semaphore::try_set_permits(std::int64_t n) {
  return throwing<bool>([&](std::error_code& ec) { return try_set_permits(n, ec); });
}
void leased_semaphore::add_permits(std::int64_t n, std::error_code& ec) { update("add", n, ec); }
void leased_semaphore::add_permits(std::int64_t n) {
  throwing<bool>([&](std::error_code& ec) { return add_permits(n, ec), true; });
}

counting_semaphore::counting_semaphore(client& c, std::string name)
    : sync_base{c, std::move(name), detail::lock_kind::counting} {}

bool counting_semaphore::take(const request& r, std::error_code& ec, std::stop_token stop) {
  return sync_base::acquire(r, ec, std::move(stop)) != nullptr;
}
bool counting_semaphore::take_throwing(const request& r) {
  return throwing<bool>([&](std::error_code& ec) { return take(r, ec); });
}
void counting_semaphore::acquire(std::uint32_t n) { take_throwing({n, {}, {}}); }
void counting_semaphore::acquire(std::uint32_t n, std::error_code& ec) { take({n, {}, {}}, ec); }
void counting_semaphore::acquire(std::stop_token stop, std::uint32_t n) {
  throwing<bool>([&](std::error_code& ec) { return take({n, {}, {}}, ec, stop); });
}
void counting_semaphore::acquire(std::stop_token stop, std::uint32_t n, std::error_code& ec) {
  take({n, {}, {}}, ec, std::move(stop));
}
bool counting_semaphore::try_acquire(std::uint32_t n) {
  return take_throwing({n, milliseconds{0}, {}});
}
bool counting_semaphore::try_acquire(std::uint32_t n, std::error_code& ec) {
  return take({n, milliseconds{0}, {}}, ec);
}
void counting_semaphore::release(std::uint32_t n, std::error_code& ec) {
  if (n == 0 || n > leased_semaphore::max_permits) {
    ec = errc::invalid_argument;
    return;
  }
  update("release", n, ec);
}
void counting_semaphore::release(std::uint32_t n) {
  throwing<bool>([&](std::error_code& ec) { return release(n, ec), true; });
}
std::int64_t counting_semaphore::available(std::error_code& ec) {
  return update("available", 0, ec);
}
std::int64_t counting_semaphore::available() {
  return throwing<std::int64_t>([&](std::error_code& ec) { return available(ec); });
}
bool counting_semaphore::try_set_permits(std::int64_t n, std::error_code& ec) {
  return update("set", n, ec) == 1;
}
bool counting_semaphore::try_set_permits(std::int64_t n) {
  return throwing<bool>([&](std::error_code& ec) { return try_set_permits(n, ec); });
}
void counting_semaphore::add_permits(std::int64_t n, std::error_code& ec) { update("add", n, ec); }
void counting_semaphore::add_permits(std::int64_t n) {
  throwing<bool>([&](std::error_code& ec) { return add_permits(n, ec), true; });
}

}  // namespace dlock
