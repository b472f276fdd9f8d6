// dlock_bench_pair — W1 of scripts/bench on Google Benchmark: one client, one lock name, a
// lock+unlock loop, each pair timed on its own.
//
//   dlock_bench_pair --url=redis://127.0.0.1:6379 [--iterations=20000] [--warmup=500]
//                    [--samples-dir=DIR] [--benchmark_format=json] [--benchmark_filter=...]
//
// Benchmarks:
//   w1/dlock_sync   dlock::mutex lock() + unlock() from the benchmark thread (the blocking API:
//                   each call hands its command to the client's I/O thread and waits for it).
//   w1/dlock_async  mutex::async_lock + lease::async_unlock chained by their completion handlers on
//                   the client's I/O thread (no thread hand-off per call); the benchmark thread
//                   starts the chain and waits for its end.
// Each reports its time per pair (manual time: the mean) and the counters p50_us, p99_us,
// mean_us, max_us and pairs; `--samples-dir` also writes every pair's latency (µs) to
// DIR/<name>.txt, one per line.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <exception>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "common.hpp"
#include "dlock/dlock.hpp"

namespace {

struct settings {
  std::string url;
  std::int64_t iterations = 20000;
  std::int64_t warmup = 500;
  std::string samples_dir;
};

void report(benchmark::State& state, std::vector<double> us, const settings& s,
            const std::string& file) {
  if (!s.samples_dir.empty()) bench::write_samples(s.samples_dir + "/" + file, us);
  const double avg = bench::mean(us);
  const double p50 = bench::percentile(us, 0.50);
  const double p99 = bench::percentile(us, 0.99);
  state.counters["p50_us"] = p50;
  state.counters["p99_us"] = p99;
  state.counters["mean_us"] = avg;
  state.counters["max_us"] = us.empty() ? 0 : us.back();
  state.counters["pairs"] = static_cast<double>(us.size());
}

std::string lock_name(const char* what) {
  return std::string{"bench:w1:"} + what + ":" + std::to_string(::getpid());
}

void dlock_sync(benchmark::State& state, const settings& s) {
  dlock::client client{dlock::config::from_uri(s.url)};
  dlock::mutex m{client, lock_name("sync")};
  for (std::int64_t i = 0; i < s.warmup; ++i) {
    m.lock();
    m.unlock();
  }
  std::vector<double> us;
  us.reserve(static_cast<std::size_t>(s.iterations));
  for (auto _ : state) {
    const auto t0 = bench::mono_ns();
    m.lock();
    m.unlock();
    const auto t1 = bench::mono_ns();
    const auto ns = static_cast<double>(t1 - t0);
    state.SetIterationTime(ns / 1e9);
    us.push_back(ns / 1e3);
  }
  report(state, std::move(us), s, "dlock-sync.txt");
}

// A chain of lock+unlock pairs driven by completion handlers on the client's I/O thread.
class async_chain {
 public:
  async_chain(dlock::mutex& m, std::int64_t pairs, std::vector<double>& us)
      : m_{m}, left_{pairs}, us_{us} {}

  std::future<std::error_code> start() {
    auto f = done_.get_future();
    next();
    return f;
  }

 private:
  void next() {
    if (left_ == 0) return done_.set_value({});
    t0_ = bench::mono_ns();
    m_.async_lock([this](std::error_code ec, dlock::lease l) {
      if (ec) return done_.set_value(ec);
      lease_ = std::move(l);
      lease_.async_unlock([this](std::error_code uec) {
        if (uec) return done_.set_value(uec);
        us_.push_back(static_cast<double>(bench::mono_ns() - t0_) / 1e3);
        --left_;
        next();
      });
    });
  }

  dlock::mutex& m_;
  std::int64_t left_;
  std::vector<double>& us_;
  std::int64_t t0_ = 0;
  dlock::lease lease_;
  std::promise<std::error_code> done_;
};

void dlock_async(benchmark::State& state, const settings& s) {
  dlock::client client{dlock::config::from_uri(s.url)};
  dlock::mutex m{client, lock_name("async")};
  std::vector<double> warm, us;
  {
    async_chain w{m, s.warmup, warm};
    if (auto ec = w.start().get()) return state.SkipWithError(ec.message().c_str());
  }
  us.reserve(static_cast<std::size_t>(s.iterations));
  for (auto _ : state) {
    async_chain chain{m, s.iterations, us};
    const auto t0 = bench::mono_ns();
    if (auto ec = chain.start().get()) return state.SkipWithError(ec.message().c_str());
    state.SetIterationTime(static_cast<double>(bench::mono_ns() - t0) / 1e9 /
                           static_cast<double>(s.iterations));
  }
  report(state, std::move(us), s, "dlock-async.txt");
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  settings s;
  try {
    const bench::options opt{argc, argv, 1};
    s.url = opt.required("url");
    s.iterations = opt.integer("iterations", s.iterations);
    s.warmup = opt.integer("warmup", s.warmup);
    s.samples_dir = opt.str("samples-dir");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlock_bench_pair: %s\n", e.what());
    return 64;
  }
  benchmark::RegisterBenchmark("w1/dlock_sync", [&s](benchmark::State& st) { dlock_sync(st, s); })
      ->Iterations(s.iterations)
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("w1/dlock_async", [&s](benchmark::State& st) { dlock_async(st, s); })
      ->Iterations(1)
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond);
  try {
    benchmark::RunSpecifiedBenchmarks();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlock_bench_pair: %s\n", e.what());
    return 1;
  }
  benchmark::Shutdown();
  return 0;
}
