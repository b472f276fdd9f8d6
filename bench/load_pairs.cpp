// dlock_load w2 (load.cpp): lockers on distinct names, each a lock+unlock loop, chained by
// completion handlers on one client (async) or a thread each (threads).
#include <sys/resource.h>
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

// CPU seconds of this process so far, every thread: the bench divides the window's by its pairs.
double cpu_s() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

}  // namespace

int w2(const bench::options& opt) {
  const auto lockers = opt.integer("lockers", 50);
  const auto mode = opt.str("mode", "async");
  const auto prefix = opt.str("prefix", "bench:w2:" + std::to_string(::getpid()));
  dlock::client client{dlock::config::from_uri(opt.required("url"))};
  client.ping();
  std::int64_t pairs = 0, errors = 0;
  const auto t0 = bench::start_line(opt);
  const auto deadline = t0 + seconds_ns(opt, 3);
  const double cpu0 = cpu_s();
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
                                  .field("cpu_s", cpu_s() - cpu0)
                                  .str());
  return 0;
}

}  // namespace bench::load
