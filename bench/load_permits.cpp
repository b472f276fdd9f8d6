// dlock_load w1 and w2 with --kind permits (load.cpp): dlock::leased_semaphore's acquire+release
// pair, as W1 and W2 take the mutex's lock+unlock. Every acquisition takes one permit without a
// lease (the watchdog's, as the mutex's W1 and W2 locks); the permits are set first
// (try_set_permits), before the start line.
#include <unistd.h>

#include <asio/post.hpp>
#include <future>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "common.hpp"
#include "dlock/dlock.hpp"
#include "dlock/leased_semaphore.hpp"
#include "load.hpp"

namespace bench::load {
namespace {

// One acquirer: acquire(1)+release pairs chained by completion handlers until the deadline.
class async_acquirer {
 public:
  async_acquirer(dlock::leased_semaphore& s, std::int64_t deadline) : s_{s}, deadline_{deadline} {}

  void start() { next(); }
  std::future<void> finished() { return done_.get_future(); }
  std::int64_t pairs() const { return pairs_; }
  std::int64_t errors() const { return errors_; }

 private:
  void next() {
    if (bench::mono_ns() >= deadline_) return done_.set_value();
    s_.async_acquire(1, [this](std::error_code ec, dlock::permit p) {
      if (ec) {
        ++errors_;
        return next();
      }
      permit_ = std::move(p);
      permit_.async_release([this](std::error_code uec) {
        if (uec) {
          ++errors_;
        } else {
          ++pairs_;
        }
        next();
      });
    });
  }

  dlock::leased_semaphore& s_;
  std::int64_t deadline_;
  dlock::permit permit_;
  std::int64_t pairs_ = 0, errors_ = 0;
  std::promise<void> done_;
};

// The semaphore `name` with `n` permits available, whatever an earlier run left.
void set_up(dlock::leased_semaphore& s, std::int64_t n) {
  if (!s.try_set_permits(n)) s.add_permits(n - s.available());
}

}  // namespace

int w1_permits(const bench::options& opt) {
  const auto iterations = opt.integer("iterations", 20000);
  const auto warmup = opt.integer("warmup", 500);
  dlock::client client{dlock::config::from_uri(opt.required("url"))};
  dlock::leased_semaphore s{client, opt.str("name", "bench:w1:permits")};
  client.ping();
  set_up(s, 1);
  std::vector<double> us;
  us.reserve(static_cast<std::size_t>(iterations));
  std::int64_t errors = 0;
  for (std::int64_t i = 0; i < warmup + iterations; ++i) {
    const auto t0 = bench::mono_ns();
    std::error_code ec;
    auto p = s.acquire(1, ec);
    if (!ec) p.release(ec);
    const auto t1 = bench::mono_ns();
    if (ec) {
      ++errors;
    } else if (i >= warmup) {
      us.push_back(static_cast<double>(t1 - t0) / 1e3);
    }
  }
  bench::write_samples(opt.str("samples"), us);
  bench::emit(opt.str("out"), bench::json{}
                                  .field("system", "dlock-permits")
                                  .field("n", static_cast<std::int64_t>(us.size()))
                                  .field("p50_us", us.empty() ? 0.0 : bench::percentile(us, 0.50))
                                  .field("p99_us", us.empty() ? 0.0 : bench::percentile(us, 0.99))
                                  .field("errors", errors)
                                  .str());
  return 0;
}

// --name: all acquirers on that one semaphore of `lockers` permits; else each on a semaphore
// of its own (--prefix P: P:0, P:1, ...) of 1 permit.
int w2_permits(const bench::options& opt) {
  const auto lockers = opt.integer("lockers", 50);
  const auto shared = opt.str("name");
  const auto prefix = opt.str("prefix", "bench:w2:" + std::to_string(::getpid()));
  dlock::client client{dlock::config::from_uri(opt.required("url"))};
  client.ping();
  std::vector<std::unique_ptr<dlock::leased_semaphore>> sems;
  for (std::int64_t i = 0; i < (shared.empty() ? lockers : 1); ++i) {
    sems.push_back(std::make_unique<dlock::leased_semaphore>(
        client, shared.empty() ? prefix + ":" + std::to_string(i) : shared));
    set_up(*sems.back(), shared.empty() ? 1 : lockers);
  }
  const auto t0 = bench::start_line(opt);
  const auto deadline = t0 + seconds_ns(opt, 3);
  std::vector<std::unique_ptr<async_acquirer>> as;
  std::vector<std::future<void>> done;
  for (std::int64_t i = 0; i < lockers; ++i) {
    as.push_back(std::make_unique<async_acquirer>(
        *sems[shared.empty() ? static_cast<std::size_t>(i) : 0], deadline));
    done.push_back(as.back()->finished());
  }
  asio::post(client.get_executor(), [&as] {
    for (auto& a : as) a->start();
  });
  for (auto& f : done) f.wait();
  std::int64_t pairs = 0, errors = 0;
  for (const auto& a : as) {
    pairs += a->pairs();
    errors += a->errors();
  }
  const double secs = static_cast<double>(bench::mono_ns() - t0) / 1e9;
  bench::emit(opt.str("out"), bench::json{}
                                  .field("system", "dlock-permits")
                                  .field("kind", "permits")
                                  .field("lockers", lockers)
                                  .field("pairs", pairs)
                                  .field("write_pairs", std::int64_t{0})
                                  .field("seconds", secs)
                                  .field("pairs_per_s", static_cast<double>(pairs) / secs)
                                  .field("errors", errors)
                                  .str());
  return 0;
}

}  // namespace bench::load
