// dlock_load — the load driver of scripts/bench: one process of a (multi-process) workload.
// Every sub-command prints one JSON object on stdout (or to --out FILE). Processes that must run
// together get the same --start-at: a CLOCK_MONOTONIC time in ns (shared by every process on
// the host) at which they all begin.
//
//   dlock_load w2 --url U --lockers 50 --seconds S [--mode async|threads] [--prefix P]
//       50 lockers on distinct names, each a lock+unlock loop, for S seconds.
//       async:   one client; each locker chains mutex::async_lock and lease::async_unlock by
//                their completion handlers (on the client's I/O thread).
//       threads: one client; each locker is a thread calling mutex::lock() and unlock().
//       -> {"pairs", "seconds", "pairs_per_s", "errors"}
//   dlock_load w3 --url U --name N --hold-us 1000 --think-us 1000 --seconds S [--id K]
//       One thread: try_lock_for(until the end), hold, unlock, think; until the end.
//       -> {"id", "events": [[call, acquired, unlock_call, unlock_returned] (ns), ...], "errors"}
//   dlock_load w4 --url U --name N --waiters 10 --hold-us 1000 --seconds S
//       [--count-from T --count-to T]: also counts the acquisitions within that window
//       `waiters` threads of one client on one name: try_lock_for(until the end), hold, unlock.
//       -> {"acquisitions", "timeouts", "errors", "refused_subscriptions"}
//   dlock_load w5 --url U --locks 10000 [--periods 3] [--prefix P]
//       Takes `locks` watchdog locks (async_lock, no lease; set the URI's ?watchdog= short),
//       holds them for `periods` renewal periods (watchdog/3), checks every lease's lost(),
//       releases them. Counts the scripts Redis ran meanwhile (INFO commandstats: evalsha calls,
//       hexists calls = holds renewed) and this process's RSS before and while holding.
//   dlock_load w6 --url U --locks 100000 [--clients 50] [--window 2000] [--prefix P]
//       Takes `locks` locks (10-minute lease) spread over `clients` clients, `window`
//       acquisitions in flight per client at a time, and reads Redis' used_memory and DBSIZE
//       before, while holding and after releasing them; times taking and releasing them all.
//
// Exit status: 0 when the run completed (errors are reported in the JSON), 1 when it could not
// run, 64 for bad usage.
#include <asio/post.hpp>
#include <atomic>
#include <cstdio>
#include <exception>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common.hpp"
#include "dlock/dlock.hpp"
#include "runtime/client_access.hpp"
#include "runtime/client_impl.hpp"

namespace {

using std::chrono::milliseconds;

std::int64_t seconds_ns(const bench::options& opt, double fallback) {
  return static_cast<std::int64_t>(opt.number("seconds", fallback) * 1e9);
}

std::map<std::string, std::string> info(dlock::client& c, const std::string& section) {
  return bench::parse_info(c.execute({"INFO", section}).str());
}

// ---- w2 ---------------------------------------------------------------------------------------

// One locker: lock+unlock pairs chained by completion handlers until the deadline.
class async_locker {
 public:
  async_locker(dlock::client& c, std::string name, std::int64_t deadline)
      : m_{c, std::move(name)}, deadline_{deadline} {}

  void start() { next(); }
  std::future<void> finished() { return done_.get_future(); }
  std::int64_t pairs() const { return pairs_; }
  std::int64_t errors() const { return errors_; }

 private:
  void next() {
    if (bench::mono_ns() >= deadline_) return done_.set_value();
    m_.async_lock([this](std::error_code ec, dlock::lease l) {
      if (ec) {
        ++errors_;
        return next();
      }
      lease_ = std::move(l);
      lease_.async_unlock([this](std::error_code uec) {
        if (uec) {
          ++errors_;
        } else {
          ++pairs_;
        }
        next();
      });
    });
  }

  dlock::mutex m_;
  std::int64_t deadline_;
  dlock::lease lease_;
  std::int64_t pairs_ = 0, errors_ = 0;
  std::promise<void> done_;
};

int w2(const bench::options& opt) {
  const auto lockers = opt.integer("lockers", 50);
  const auto mode = opt.str("mode", "async");
  const auto prefix = opt.str("prefix", "bench:w2:" + std::to_string(::getpid()));
  dlock::client client{dlock::config::from_uri(opt.required("url"))};
  client.ping();
  std::int64_t pairs = 0, errors = 0;
  const auto t0 = bench::start_line(opt);
  const auto deadline = t0 + seconds_ns(opt, 3);
  if (mode == "async") {
    std::vector<std::unique_ptr<async_locker>> ls;
    std::vector<std::future<void>> done;
    for (std::int64_t i = 0; i < lockers; ++i) {
      ls.push_back(
          std::make_unique<async_locker>(client, prefix + ":" + std::to_string(i), deadline));
      done.push_back(ls.back()->finished());
    }
    // Start them from the I/O thread, as an asynchronous program would.
    asio::post(client.get_executor(), [&ls] {
      for (auto& l : ls) l->start();
    });
    for (auto& f : done) f.wait();
    for (auto& l : ls) {
      pairs += l->pairs();
      errors += l->errors();
    }
  } else if (mode == "threads") {
    std::atomic<std::int64_t> total{0}, failed{0};
    std::vector<std::thread> threads;
    for (std::int64_t i = 0; i < lockers; ++i) {
      threads.emplace_back([&, i] {
        dlock::mutex m{client, prefix + ":" + std::to_string(i)};
        std::int64_t n = 0, e = 0;
        while (bench::mono_ns() < deadline) {
          std::error_code ec;
          m.lock(ec);
          if (!ec) m.unlock(ec);
          if (ec) {
            ++e;
          } else {
            ++n;
          }
        }
        total += n;
        failed += e;
      });
    }
    for (auto& t : threads) t.join();
    pairs = total;
    errors = failed;
  } else {
    throw std::runtime_error("--mode is async or threads");
  }
  const double secs = static_cast<double>(bench::mono_ns() - t0) / 1e9;
  bench::emit(opt.str("out"), bench::json{}
                                  .field("system", "dlock-" + mode)
                                  .field("lockers", lockers)
                                  .field("pairs", pairs)
                                  .field("seconds", secs)
                                  .field("pairs_per_s", static_cast<double>(pairs) / secs)
                                  .field("errors", errors)
                                  .str());
  return 0;
}

// ---- w3 ---------------------------------------------------------------------------------------

int w3(const bench::options& opt) {
  const auto hold = opt.integer("hold-us", 1000) * 1000;
  const auto think = opt.integer("think-us", 1000) * 1000;
  dlock::client client{dlock::config::from_uri(opt.required("url"))};
  dlock::mutex m{client, opt.required("name")};
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
  events.emit(opt.str("out"), "dlock", opt.integer("id", 0), t0, deadline, errors);
  return 0;
}

// ---- w4 ---------------------------------------------------------------------------------------

std::uint64_t refused_subscriptions(dlock::client& c) {
  std::promise<std::uint64_t> p;
  auto& impl = dlock::detail::client_access::impl(c);
  asio::post(impl.strand(), [&] { p.set_value(impl.waiters().refused()); });
  return p.get_future().get();
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

// ---- w5 / w6: many locks held at once ---------------------------------------------------------

// Acquires locks[i] for every i, `window` acquisitions in flight at a time, chained by the
// completion handlers on the I/O thread. Returns the number of failures.
std::int64_t acquire_all(dlock::client& c, std::vector<dlock::mutex>& locks,
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

std::vector<dlock::mutex> make_locks(dlock::client& c, const std::string& prefix, std::int64_t n) {
  std::vector<dlock::mutex> out;
  out.reserve(static_cast<std::size_t>(n));
  char buf[32];
  for (std::int64_t i = 0; i < n; ++i) {
    std::snprintf(buf, sizeof buf, ":%08lld", static_cast<long long>(i));
    out.emplace_back(c, prefix + buf);
  }
  return out;
}

int w5(const bench::options& opt) {
  const auto n = opt.integer("locks", 10000);
  const auto periods = opt.number("periods", 3);
  const auto prefix = opt.str("prefix", "bench:w5:" + std::to_string(::getpid()));
  dlock::client client{dlock::config::from_uri(opt.required("url"))};
  const auto lease = client.cfg().watchdog_lease;
  const auto period_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(lease).count() / 3;
  client.ping();
  auto locks = make_locks(client, prefix, n);
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
  const auto scripts =
      bench::cmdstat_calls(after, "evalsha") - bench::cmdstat_calls(before, "evalsha");
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
  std::vector<std::vector<dlock::mutex>> locks(static_cast<std::size_t>(k));
  std::vector<std::vector<dlock::lease>> leases(static_cast<std::size_t>(k));
  for (std::int64_t c = 0; c < k; ++c) {
    clients.push_back(std::make_unique<dlock::client>(cfg));
    clients.back()->ping();
  }
  char buf[32];
  for (std::int64_t i = 0; i < n; ++i) {
    std::snprintf(buf, sizeof buf, ":%08lld", static_cast<long long>(i));
    const auto c = static_cast<std::size_t>(i % k);
    locks[c].emplace_back(*clients[c], prefix + buf);
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

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fputs("usage: dlock_load w2|w3|w4|w5|w6 --url URL [options] (see bench/load.cpp)\n",
               stderr);
    return 64;
  }
  const std::string cmd = argv[1];
  try {
    const bench::options opt{argc, argv, 2};
    if (cmd == "w2") return w2(opt);
    if (cmd == "w3") return w3(opt);
    if (cmd == "w4") return w4(opt);
    if (cmd == "w5") return w5(opt);
    if (cmd == "w6") return w6(opt);
    std::fprintf(stderr, "dlock_load: unknown workload %s\n", cmd.c_str());
    return 64;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlock_load %s: %s\n", cmd.c_str(), e.what());
    return 1;
  }
}
