// dlock_load w2 (load.cpp): lockers on distinct names (or all on one), each a lock+unlock loop,
// chained by completion handlers on one client (async) or a thread each (threads).
#include <unistd.h>

#include <asio/post.hpp>
#include <atomic>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common.hpp"
#include "dlock/dlock.hpp"
#include "load.hpp"

namespace bench::load {
namespace {

// One locker: lock+unlock pairs chained by completion handlers until the deadline.
class async_locker {
 public:
  async_locker(dlock::client& c, std::string name, dlock::detail::lock_kind kind,
               std::int64_t deadline)
      : m_{c, std::move(name), kind}, deadline_{deadline} {}

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

  dlock::detail::lock_base m_;
  std::int64_t deadline_;
  dlock::lease lease_;
  std::int64_t pairs_ = 0, errors_ = 0;
  std::promise<void> done_;
};

// What the lockers did: every pair, the writers' among them, and the failures.
struct tally {
  std::int64_t pairs = 0, write_pairs = 0, errors = 0;
};

// Locker i's name and kind: its own name, or the shared one; the first `writers` of them take
// the write side.
struct plan {
  std::string prefix, shared_name;
  dlock::detail::lock_kind kind;
  std::int64_t writers;

  std::string name(std::int64_t i) const {
    return shared_name.empty() ? prefix + ":" + std::to_string(i) : shared_name;
  }
  dlock::detail::lock_kind kind_of(std::int64_t i) const {
    return i < writers ? dlock::detail::lock_kind::write : kind;
  }
};

tally run_async(dlock::client& client, const plan& p, std::int64_t lockers, std::int64_t deadline) {
  std::vector<std::unique_ptr<async_locker>> ls;
  std::vector<std::future<void>> done;
  for (std::int64_t i = 0; i < lockers; ++i) {
    ls.push_back(std::make_unique<async_locker>(client, p.name(i), p.kind_of(i), deadline));
    done.push_back(ls.back()->finished());
  }
  // Start them from the I/O thread, as an asynchronous program would.
  asio::post(client.get_executor(), [&ls] {
    for (auto& l : ls) l->start();
  });
  for (auto& f : done) f.wait();
  tally t;
  for (std::int64_t i = 0; i < lockers; ++i) {
    const auto& l = *ls[static_cast<std::size_t>(i)];
    t.pairs += l.pairs();
    if (i < p.writers) t.write_pairs += l.pairs();
    t.errors += l.errors();
  }
  return t;
}

tally run_threads(dlock::client& client, const plan& p, std::int64_t lockers,
                  std::int64_t deadline) {
  std::atomic<std::int64_t> total{0}, written{0}, failed{0};
  std::vector<std::thread> threads;
  for (std::int64_t i = 0; i < lockers; ++i) {
    threads.emplace_back([&, i] {
      dlock::detail::lock_base m{client, p.name(i), p.kind_of(i)};
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
      if (i < p.writers) written += n;
      failed += e;
    });
  }
  for (auto& t : threads) t.join();
  return {total, written, failed};
}

}  // namespace

int w2(const bench::options& opt) {
  const auto lockers = opt.integer("lockers", 50);
  const auto mode = opt.str("mode", "async");
  const plan p{opt.str("prefix", "bench:w2:" + std::to_string(::getpid())), opt.str("name"),
               kind_of(opt), opt.integer("writers", 0)};
  if (p.writers > 0 && p.kind != dlock::detail::lock_kind::read) {
    throw std::runtime_error("--writers goes with --kind read");
  }
  if (mode != "async" && mode != "threads") throw std::runtime_error("--mode is async or threads");
  dlock::client client{dlock::config::from_uri(opt.required("url"))};
  client.ping();
  const auto t0 = bench::start_line(opt);
  const auto deadline = t0 + seconds_ns(opt, 3);
  const double cpu0 = bench::cpu_s();
  const auto t = mode == "async" ? run_async(client, p, lockers, deadline)
                                 : run_threads(client, p, lockers, deadline);
  const double secs = static_cast<double>(bench::mono_ns() - t0) / 1e9;
  bench::emit(opt.str("out"), bench::json{}
                                  .field("system", "dlock-" + mode)
                                  .field("kind", opt.str("kind", "mutex"))
                                  .field("lockers", lockers)
                                  .field("pairs", t.pairs)
                                  .field("write_pairs", t.write_pairs)
                                  .field("seconds", secs)
                                  .field("pairs_per_s", static_cast<double>(t.pairs) / secs)
                                  .field("errors", t.errors)
                                  .field("cpu_s", bench::cpu_s() - cpu0)
                                  .str());
  return 0;
}

}  // namespace bench::load
