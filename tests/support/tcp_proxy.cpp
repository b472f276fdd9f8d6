// tcp_proxy's control calls and counters (tcp_proxy.hpp): each changes the shared state under
// the lock and wakes the proxy's thread (tcp_proxy_loop.cpp) to act on it.
#include "support/tcp_proxy.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

#include "support/tcp_proxy_impl.hpp"

namespace dlock::test {

std::uint16_t tcp_proxy::port() const noexcept { return impl_->port; }
std::uint16_t tcp_proxy::target_port() const noexcept { return impl_->target; }

void tcp_proxy::pass() {
  impl_->control([&m = *impl_] {
    const auto now = impl::clock::now();
    m.modes = {impl::mode::pass, impl::mode::pass};
    m.delays = {};
    for (auto& c : m.conns) {
      for (auto* f : {&c.up, &c.down}) {
        f->frozen = false;
        for (auto& ch : f->queue) ch.due = std::min(ch.due, now);
      }
    }
  });
}

void tcp_proxy::freeze(direction d) { freeze(d, ""); }

void tcp_proxy::freeze(direction d, std::string_view client_said) {
  impl_->control([&m = *impl_, d, needle = std::string{client_said}] {
    for (auto& c : m.conns) {
      if (c.up.head.find(needle) == std::string::npos) continue;
      impl::each(d, [&](std::size_t i) { (i == 0 ? c.up : c.down).frozen = true; });
    }
  });
}

void tcp_proxy::thaw() {
  impl_->control([&m = *impl_] {
    for (auto& c : m.conns) c.up.frozen = c.down.frozen = false;
  });
}

void tcp_proxy::blackhole(direction d) {
  impl_->control([&m = *impl_, d] {
    impl::each(d, [&](std::size_t i) {
      m.modes[i] = impl::mode::blackhole;
      m.drop_held(i);
    });
  });
}

void tcp_proxy::pause(direction d) {
  impl_->control(
      [&m = *impl_, d] { impl::each(d, [&](std::size_t i) { m.modes[i] = impl::mode::pause; }); });
}

void tcp_proxy::resume(direction d) {
  impl_->control(
      [&m = *impl_, d] { impl::each(d, [&](std::size_t i) { m.modes[i] = impl::mode::pass; }); });
}

void tcp_proxy::delay(direction d, std::chrono::milliseconds ms) {
  impl_->control([&m = *impl_, d, ms] { impl::each(d, [&](std::size_t i) { m.delays[i] = ms; }); });
}

void tcp_proxy::reset_all() {
  impl_->control([&m = *impl_] {
    m.drop_held(0);
    m.drop_held(1);
    for (auto& c : m.conns) m.close_connection(c);
    m.conns.clear();
  });
}

std::size_t tcp_proxy::connections() const {
  std::lock_guard lock{impl_->mu};
  return impl_->conns.size();
}

std::size_t tcp_proxy::accepted() const {
  std::lock_guard lock{impl_->mu};
  return impl_->accepted;
}

std::uint64_t tcp_proxy::bytes_forwarded(direction d) const {
  std::lock_guard lock{impl_->mu};
  std::uint64_t n = 0;
  impl::each(d, [&](std::size_t i) { n += impl_->forwarded[i]; });
  return n;
}

std::uint64_t tcp_proxy::bytes_dropped(direction d) const {
  std::lock_guard lock{impl_->mu};
  std::uint64_t n = 0;
  impl::each(d, [&](std::size_t i) { n += impl_->dropped[i]; });
  return n;
}

std::uint64_t tcp_proxy::bytes_held(direction d) const {
  std::lock_guard lock{impl_->mu};
  std::uint64_t n = 0;
  for (auto& c : impl_->conns)
    impl::each(d, [&](std::size_t i) { n += (i == 0 ? c.up : c.down).held; });
  return n;
}

}  // namespace dlock::test
