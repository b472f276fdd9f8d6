// dlock_load w3 and w4 (load.cpp): one name, contended — w3 one thread of one process of many
// (hold, think, events recorded), w4 `waiters` threads of one client.
#include <asio/post.hpp>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <system_error>
#include <thread>
#include <vector>

#include "common.hpp"
#include "dlock/dlock.hpp"
#include "load.hpp"
#include "runtime/client_access.hpp"
#include "runtime/client_impl.hpp"

namespace bench::load {
namespace {

std::uint64_t refused_subscriptions(dlock::client& c) {
  std::promise<std::uint64_t> p;
  auto& impl = dlock::detail::client_access::impl(c);
  asio::post(impl.strand(), [&] { p.set_value(impl.waiters().refused()); });
  return p.get_future().get();
}

}  // namespace

int w3(const bench::options& opt) {
  const auto hold = opt.integer("hold-us", 1000) * 1000;
  const auto think = opt.integer("think-us", 1000) * 1000;
  dlock::client client{dlock::config::from_uri(opt.required("url"))};
  dlock::detail::lock_base m{client, opt.required("name"), kind_of(opt)};
  client.ping();
  const auto t0 = bench::start_line(opt);
  const auto deadline = t0 + seconds_ns(opt, 10);
  bench::w3_events events;
  std::int64_t errors = 0;
  for (;;) {
    const auto call = bench::mono_ns();
    if (call >= deadline) break;
    std::error_code ec;
    if (!m.try_lock_for(std::chrono::nanoseconds{deadline - call}, ec)) {
      if (!ec) break;  // not acquired before the end: the run is over
      ++errors;
      continue;
    }
    const auto acquired = bench::mono_ns();
    bench::hold_until_ns(acquired + hold);
    const auto unlock_call = bench::mono_ns();
    m.unlock(ec);
    const auto unlocked = bench::mono_ns();
    if (ec) ++errors;
    events.add(call, acquired, unlock_call, unlocked);
    bench::sleep_ns(think);
  }
  const auto kind = opt.str("kind", "mutex");
  events.emit(opt.str("out"), kind == "mutex" ? "dlock" : "dlock-" + kind, opt.integer("id", 0), t0,
              deadline, errors);
  return 0;
}

int w4(const bench::options& opt) {
  const auto waiters = opt.integer("waiters", 10);
  const auto hold = opt.integer("hold-us", 1000) * 1000;
  dlock::client client{dlock::config::from_uri(opt.required("url"))};
  const auto name = opt.required("name");
  client.ping();
  const auto t0 = bench::start_line(opt);
  const auto deadline = t0 + seconds_ns(opt, 10);
  // Acquisitions within [count-from, count-to) (shared clock), for a steady-state window.
  const auto count_from = opt.integer("count-from", 0);
  const auto count_to = opt.integer("count-to", 0);
  std::atomic<std::int64_t> acquisitions{0}, in_window{0}, timeouts{0}, errors{0};
  std::vector<std::thread> threads;
  for (std::int64_t i = 0; i < waiters; ++i) {
    threads.emplace_back([&] {
      dlock::mutex m{client, name};
      for (;;) {
        const auto now = bench::mono_ns();
        if (now >= deadline) return;
        std::error_code ec;
        if (!m.try_lock_for(std::chrono::nanoseconds{deadline - now}, ec)) {
          if (ec) {
            ++errors;
          } else {
            ++timeouts;
          }
          continue;
        }
        ++acquisitions;
        if (const auto at = bench::mono_ns(); at >= count_from && at < count_to) ++in_window;
        bench::sleep_ns(hold);
        m.unlock(ec);
        if (ec) ++errors;
      }
    });
  }
  for (auto& t : threads) t.join();
  bench::emit(
      opt.str("out"),
      bench::json{}
          .field("system", "dlock")
          .field("acquisitions", acquisitions.load())
          .field("window_acquisitions", in_window.load())
          .field("timeouts", timeouts.load())
          .field("errors", errors.load())
          .field("refused_subscriptions", static_cast<std::int64_t>(refused_subscriptions(client)))
          .field("seconds", static_cast<double>(bench::mono_ns() - t0) / 1e9)
          .str());
  return 0;
}

}  // namespace bench::load
