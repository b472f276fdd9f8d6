// dlock_load w1, w2 and w3 with --kind red (load.cpp): dlock::red_lock over the servers of
// --urls U1,U2,... (one dlock::client each, a majority of them needed), as W1, W2 and W3 take
// the mutex on one server. Every acquisition takes the watchdog lease (renewed while held), as
// the mutex's W1 and W2 do; fencing is on (the client's default), so each acquisition also writes
// its token back to the servers that took it (red_lock.hpp).
#include <unistd.h>

#include <asio/post.hpp>
#include <chrono>
#include <functional>
#include <future>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "common.hpp"
#include "dlock/dlock.hpp"
#include "dlock/red_lock.hpp"
#include "load.hpp"

namespace bench::load {
namespace {

constexpr auto kForever = std::numeric_limits<std::int64_t>::max();

// One dlock::client per URL of --urls, each answering a PING before the clock starts.
class servers {
 public:
  explicit servers(const bench::options& opt) {
    const auto urls = opt.required("urls");
    std::size_t from = 0;
    while (from <= urls.size()) {
      const auto comma = std::min(urls.find(',', from), urls.size());
      if (comma > from) {
        clients_.push_back(std::make_unique<dlock::client>(
            dlock::config::from_uri(urls.substr(from, comma - from))));
      }
      from = comma + 1;
    }
    if (clients_.empty()) throw std::runtime_error("--urls names no server");
    for (auto& c : clients_) c->ping();
  }
  std::vector<std::reference_wrapper<dlock::client>> refs() const {
    std::vector<std::reference_wrapper<dlock::client>> out;
    for (const auto& c : clients_) out.emplace_back(*c);
    return out;
  }
  dlock::client& first() { return *clients_.front(); }
  std::int64_t size() const { return static_cast<std::int64_t>(clients_.size()); }

 private:
  std::vector<std::unique_ptr<dlock::client>> clients_;
};

// One chain of async_lock + multi_lease::async_unlock pairs, each started by the completion of
// the one before (on whichever client's I/O thread completed it), until `count` pairs or the
// deadline. With `us`, each pair's latency goes there.
class async_chain {
 public:
  async_chain(const servers& s, std::string name, std::int64_t count, std::int64_t deadline,
              std::vector<double>* us)
      : lock_{s.refs(), std::move(name)}, count_{count}, deadline_{deadline}, us_{us} {}

  void start() { next(); }
  std::future<void> finished() { return done_.get_future(); }
  std::int64_t pairs() const { return pairs_; }
  std::int64_t errors() const { return errors_; }

 private:
  void next() {
    if (pairs_ + errors_ >= count_ || bench::mono_ns() >= deadline_) return done_.set_value();
    t0_ = bench::mono_ns();
    lock_.async_lock([this](std::error_code ec, dlock::multi_lease l) {
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
          if (us_) us_->push_back(static_cast<double>(bench::mono_ns() - t0_) / 1e3);
        }
        next();
      });
    });
  }

  dlock::red_lock lock_;
  std::int64_t count_, deadline_, t0_ = 0;
  std::vector<double>* us_;
  dlock::multi_lease lease_;
  std::int64_t pairs_ = 0, errors_ = 0;
  std::promise<void> done_;
};

// W1, sync: lock() + unlock() on the calling thread, one pair after the other.
std::int64_t w1_sync(servers& s, const std::string& name, std::int64_t warmup, std::int64_t n,
                     std::vector<double>& us) {
  dlock::red_lock r{s.refs(), name};
  std::int64_t errors = 0;
  for (std::int64_t i = 0; i < warmup + n; ++i) {
    const auto t0 = bench::mono_ns();
    std::error_code ec;
    r.lock(ec);
    if (!ec) r.unlock(ec);
    const auto t1 = bench::mono_ns();
    if (ec) {
      ++errors;
    } else if (i >= warmup) {
      us.push_back(static_cast<double>(t1 - t0) / 1e3);
    }
  }
  return errors;
}

// W1, async: one chain (the warm-up first, its samples dropped).
std::int64_t w1_async(servers& s, const std::string& name, std::int64_t warmup, std::int64_t n,
                      std::vector<double>& us) {
  std::int64_t errors = 0;
  for (const auto count : {warmup, n}) {
    std::vector<double> got;
    async_chain chain{s, name, count, kForever, &got};
    auto done = chain.finished();
    asio::post(s.first().get_executor(), [&chain] { chain.start(); });
    done.wait();
    errors += chain.errors();
    if (count == n) us = std::move(got);
  }
  return errors;
}

}  // namespace

int w1_red(const bench::options& opt) {
  const auto mode = opt.str("mode", "sync");
  if (mode != "sync" && mode != "async") throw std::runtime_error("--mode is sync or async");
  servers s{opt};
  const auto name = opt.str("name", "bench:w1:red:" + std::to_string(::getpid()));
  const auto n = opt.integer("iterations", 5000), warmup = opt.integer("warmup", 200);
  std::vector<double> us;
  us.reserve(static_cast<std::size_t>(n));
  const auto errors =
      mode == "sync" ? w1_sync(s, name, warmup, n, us) : w1_async(s, name, warmup, n, us);
  bench::write_samples(opt.str("samples"), us);
  bench::emit(opt.str("out"), bench::json{}
                                  .field("system", "dlock-red-" + mode)
                                  .field("servers", s.size())
                                  .field("n", static_cast<std::int64_t>(us.size()))
                                  .field("p50_us", us.empty() ? 0.0 : bench::percentile(us, 0.50))
                                  .field("p99_us", us.empty() ? 0.0 : bench::percentile(us, 0.99))
                                  .field("errors", errors)
                                  .str());
  return 0;
}

// `lockers` async chains, each on a name of its own (--prefix P: P:0, P:1, ...).
int w2_red(const bench::options& opt) {
  const auto lockers = opt.integer("lockers", 50);
  const auto prefix = opt.str("prefix", "bench:w2:red:" + std::to_string(::getpid()));
  servers s{opt};
  const auto t0 = bench::start_line(opt);
  const auto deadline = t0 + seconds_ns(opt, 3);
  const double cpu0 = bench::cpu_s();
  std::vector<std::unique_ptr<async_chain>> chains;
  std::vector<std::future<void>> done;
  for (std::int64_t i = 0; i < lockers; ++i) {
    chains.push_back(std::make_unique<async_chain>(s, prefix + ":" + std::to_string(i), kForever,
                                                   deadline, nullptr));
    done.push_back(chains.back()->finished());
  }
  asio::post(s.first().get_executor(), [&chains] {
    for (auto& c : chains) c->start();
  });
  for (auto& f : done) f.wait();
  std::int64_t pairs = 0, errors = 0;
  for (const auto& c : chains) {
    pairs += c->pairs();
    errors += c->errors();
  }
  const double secs = static_cast<double>(bench::mono_ns() - t0) / 1e9;
  bench::emit(opt.str("out"), bench::json{}
                                  .field("system", "dlock-red-async")
                                  .field("servers", s.size())
                                  .field("lockers", lockers)
                                  .field("pairs", pairs)
                                  .field("seconds", secs)
                                  .field("pairs_per_s", static_cast<double>(pairs) / secs)
                                  .field("errors", errors)
                                  .field("cpu_s", bench::cpu_s() - cpu0)
                                  .str());
  return 0;
}

// One process of several on one name: try_lock_for(until the end), hold, unlock, think (W3's).
int w3_red(const bench::options& opt) {
  const auto hold = opt.integer("hold-us", 1000) * 1000;
  const auto think = opt.integer("think-us", 1000) * 1000;
  servers s{opt};
  dlock::red_lock r{s.refs(), opt.required("name")};
  const auto t0 = bench::start_line(opt);
  const auto deadline = t0 + seconds_ns(opt, 10);
  bench::w3_events events;
  std::int64_t errors = 0;
  for (;;) {
    const auto call = bench::mono_ns();
    if (call >= deadline) break;
    std::error_code ec;
    if (!r.try_lock_for(std::chrono::nanoseconds{deadline - call}, ec)) {
      if (!ec) break;  // not acquired before the end: the run is over
      ++errors;
      continue;
    }
    const auto acquired = bench::mono_ns();
    bench::hold_until_ns(acquired + hold);
    const auto unlock_call = bench::mono_ns();
    r.unlock(ec);
    const auto unlocked = bench::mono_ns();
    if (ec) ++errors;
    events.add(call, acquired, unlock_call, unlocked);
    bench::sleep_ns(think);
  }
  events.emit(opt.str("out"), "dlock-red", opt.integer("id", 0), t0, deadline, errors);
  return 0;
}

}  // namespace bench::load
