// dlock_load w5 and w6 (load.cpp): many locks held at once — w5 watchdog locks renewed for a
// few periods (the scripts Redis ran, this process's RSS), w6 locks spread over clients (Redis'
// memory and keys per lock).
#include <unistd.h>

#include <algorithm>
#include <asio/post.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "common.hpp"
#include "dlock/dlock.hpp"
#include "load.hpp"
#include "runtime/client_access.hpp"
#include "runtime/client_impl.hpp"

namespace bench::load {
namespace {

using std::chrono::milliseconds;

std::map<std::string, std::string> info(dlock::client& c, const std::string& section) {
  return bench::parse_info(c.execute({"INFO", section}).str());
}

// Acquires locks[i] for every i, `window` acquisitions in flight at a time, chained by the
// completion handlers on the I/O thread. Returns the number of failures.
std::int64_t acquire_all(dlock::client& c, std::vector<dlock::detail::lock_base>& locks,
                         std::vector<dlock::lease>& leases, std::optional<milliseconds> lease_time,
                         std::size_t window) {
  struct state {
    std::size_t next = 0, done = 0;
    std::int64_t failed = 0;
    std::promise<void> finished;
  } st;
  const auto n = locks.size();
  leases.resize(n);
  std::function<void()> launch = [&] {
    const auto i = st.next++;
    auto handler = [&, i](std::error_code ec, dlock::lease l) {
      if (ec) ++st.failed;
      leases[i] = std::move(l);
      if (st.next < n) launch();
      if (++st.done == n) st.finished.set_value();
    };
    if (lease_time) {
      locks[i].async_lock(*lease_time, handler);
    } else {
      locks[i].async_lock(handler);
    }
  };
  if (n == 0) return 0;
  asio::post(c.get_executor(), [&] {
    for (std::size_t k = 0; k < std::min(window, n); ++k) launch();
  });
  st.finished.get_future().wait();
  return st.failed;
}

// Releases every lease, `window` at a time. Returns the number of failures (lease_lost counts).
std::int64_t release_all(dlock::client& c, std::vector<dlock::lease>& leases, std::size_t window) {
  struct state {
    std::size_t next = 0, done = 0;
    std::int64_t failed = 0;
    std::promise<void> finished;
  } st;
  const auto n = leases.size();
  std::function<void()> launch = [&] {
    const auto i = st.next++;
    auto handler = [&](std::error_code ec) {
      if (ec) ++st.failed;
      if (st.next < n) launch();
      if (++st.done == n) st.finished.set_value();
    };
    if (!leases[i].owns()) {
      asio::post(c.get_executor(), [handler] { handler(make_error_code(dlock::errc::not_owner)); });
      return;
    }
    leases[i].async_unlock(handler);
  };
  if (n == 0) return 0;
  asio::post(c.get_executor(), [&] {
    for (std::size_t k = 0; k < std::min(window, n); ++k) launch();
  });
  st.finished.get_future().wait();
  return st.failed;
}

std::vector<dlock::detail::lock_base> make_locks(dlock::client& c, const std::string& prefix,
                                                 std::int64_t n, dlock::detail::lock_kind kind) {
  std::vector<dlock::detail::lock_base> out;
  out.reserve(static_cast<std::size_t>(n));
  char buf[32];
  for (std::int64_t i = 0; i < n; ++i) {
    std::snprintf(buf, sizeof buf, ":%08lld", static_cast<long long>(i));
    out.emplace_back(c, prefix + buf, kind);
  }
  return out;
}

}  // namespace

int w5(const bench::options& opt) {
  const auto n = opt.integer("locks", 10000);
  const auto periods = opt.number("periods", 3);
  const auto prefix = opt.str("prefix", "bench:w5:" + std::to_string(::getpid()));
  dlock::client client{dlock::config::from_uri(opt.required("url"))};
  const auto lease = client.cfg().watchdog_lease;
  const auto period_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(lease).count() / 3;
  client.ping();
  auto locks = make_locks(client, prefix, n, kind_of(opt));
  std::vector<dlock::lease> leases;
  leases.reserve(static_cast<std::size_t>(n));
  const long rss0 = bench::rss_bytes();
  const auto t_acq = bench::mono_ns();
  const auto failed = acquire_all(client, locks, leases, std::nullopt, 1000);
  const auto acquire_s = static_cast<double>(bench::mono_ns() - t_acq) / 1e9;
  const long rss1 = bench::rss_bytes();
  const auto before = info(client, "commandstats");
  auto& watchdog = dlock::detail::client_access::impl(client).watchdog();
  const auto renewals0 = watchdog.renewals_sent();
  const auto t_hold = bench::mono_ns();
  bench::sleep_ns(static_cast<std::int64_t>(periods * static_cast<double>(period_ns)));
  const auto after = info(client, "commandstats");
  const auto renewals1 = watchdog.renewals_sent();
  const auto held_s = static_cast<double>(bench::mono_ns() - t_hold) / 1e9;
  std::int64_t lost = 0;
  for (const auto& l : leases) {
    if (!l.owns() || l.lost().stop_requested()) ++lost;
  }
  const long rss2 = bench::rss_bytes();
  const auto release_failed = release_all(client, leases, 1000);
  // On a cluster INFO reaches one master: count the scripts the watchdog sent instead.
  const auto scripts = client.cfg().cluster() ? static_cast<std::int64_t>(renewals1 - renewals0)
                                              : bench::cmdstat_calls(after, "evalsha") -
                                                    bench::cmdstat_calls(before, "evalsha");
  const auto renewed =
      bench::cmdstat_calls(after, "hexists") - bench::cmdstat_calls(before, "hexists");
  const double holds_periods = static_cast<double>(n) / 100.0 * periods;
  bench::emit(
      opt.str("out"),
      bench::json{}
          .field("system", "dlock")
          .field("locks", n)
          .field("watchdog_ms", static_cast<std::int64_t>(lease.count()))
          .field("periods", periods)
          .field("held_s", held_s)
          .field("acquire_s", acquire_s)
          .field("acquire_failed", failed)
          .field("lost", lost)
          .field("release_failed", release_failed)
          .field("renewal_scripts", scripts)
          .field("renewal_scripts_client", static_cast<std::int64_t>(renewals1 - renewals0))
          .field("holds_renewed", renewed)
          .field("renewals_per_hold", static_cast<double>(renewed) / static_cast<double>(n))
          .field("scripts_per_100_holds_per_period", static_cast<double>(scripts) / holds_periods)
          .field("scripts_per_100_renewals",
                 renewed > 0 ? 100.0 * static_cast<double>(scripts) / static_cast<double>(renewed)
                             : 0.0)
          .field("rss_before", static_cast<std::int64_t>(rss0))
          .field("rss_holding", static_cast<std::int64_t>(std::max(rss1, rss2)))
          .field("rss_per_lock",
                 static_cast<double>(std::max(rss1, rss2) - rss0) / static_cast<double>(n))
          .str());
  return 0;
}

int w6(const bench::options& opt) {
  const auto n = opt.integer("locks", 100000);
  const auto k = std::max<std::int64_t>(1, opt.integer("clients", 50));
  const auto window = static_cast<std::size_t>(opt.integer("window", 2000));
  const auto prefix = opt.str("prefix", "bench:w6:" + std::to_string(::getpid()));
  const auto cfg = dlock::config::from_uri(opt.required("url"));
  // The locks are spread over `k` clients, lock i on client i % k.
  std::vector<std::unique_ptr<dlock::client>> clients;
  const auto kind = kind_of(opt);
  std::vector<std::vector<dlock::detail::lock_base>> locks(static_cast<std::size_t>(k));
  std::vector<std::vector<dlock::lease>> leases(static_cast<std::size_t>(k));
  for (std::int64_t c = 0; c < k; ++c) {
    clients.push_back(std::make_unique<dlock::client>(cfg));
    clients.back()->ping();
  }
  char buf[32];
  for (std::int64_t i = 0; i < n; ++i) {
    std::snprintf(buf, sizeof buf, ":%08lld", static_cast<long long>(i));
    const auto c = static_cast<std::size_t>(i % k);
    locks[c].emplace_back(*clients[c], prefix + buf, kind);
  }
  auto& admin = *clients.front();
  auto used = [&]() -> std::int64_t { return std::stoll(info(admin, "memory").at("used_memory")); };
  auto dbsize = [&] { return admin.execute({"DBSIZE"}).integer(); };
  const auto mem0 = used();
  const auto keys0 = dbsize();
  std::int64_t failed = 0, release_failed = 0;
  const auto t0 = bench::mono_ns();
  for (std::size_t c = 0; c < clients.size(); ++c) {
    failed += acquire_all(*clients[c], locks[c], leases[c], milliseconds{600000}, window);
  }
  const auto acquire_s = static_cast<double>(bench::mono_ns() - t0) / 1e9;
  const auto mem1 = used();
  const auto keys1 = dbsize();
  const auto t1 = bench::mono_ns();
  for (std::size_t c = 0; c < clients.size(); ++c) {
    release_failed += release_all(*clients[c], leases[c], window);
  }
  const auto release_s = static_cast<double>(bench::mono_ns() - t1) / 1e9;
  const auto mem2 = used();
  const auto keys2 = dbsize();
  const auto dn = static_cast<double>(n);
  bench::emit(opt.str("out"),
              bench::json{}
                  .field("system", "dlock")
                  .field("locks", n)
                  .field("clients", k)
                  .field("acquire_failed", failed)
                  .field("release_failed", release_failed)
                  .field("acquire_s", acquire_s)
                  .field("release_s", release_s)
                  .field("used_memory_before", mem0)
                  .field("used_memory_holding", mem1)
                  .field("used_memory_released", mem2)
                  .field("bytes_per_lock", static_cast<double>(mem1 - mem0) / dn)
                  .field("bytes_left_per_released_lock", static_cast<double>(mem2 - mem0) / dn)
                  .field("keys_per_lock", static_cast<double>(keys1 - keys0) / dn)
                  .field("keys_left_per_released_lock", static_cast<double>(keys2 - keys0) / dn)
                  .str());
  return 0;
}

}  // namespace bench::load
