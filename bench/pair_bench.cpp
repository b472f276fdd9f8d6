// dlock_bench_pair — W1 of scripts/bench on Google Benchmark: one client, one lock name, a
// lock+unlock loop, each pair timed on its own.
//
//   dlock_bench_pair --url=redis://127.0.0.1:6379 [--iterations=20000] [--warmup=500]
//                    [--names=A,B,...] [--samples-dir=DIR] [--benchmark_format=json]
//                    [--benchmark_filter=...]
//
// --names: the pairs cycle over these names (each suffixed `:sync:<pid>` or `:async:<pid>`),
// one pair per name in turn; on a cluster the bench gives one hash tag per master, so that the
// loop visits every master. Without it, one name.
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
#include <deque>
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
  std::vector<std::string> names;  // --names, split at commas; empty: one name
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

// The mutexes a W1 loop cycles over: one per --names entry, or `bench:w1:<what>:<pid>`.
std::deque<dlock::mutex> mutexes(dlock::client& c, const settings& s, const char* what) {
  const auto suffix = std::string{what} + ":" + std::to_string(::getpid());
  std::deque<dlock::mutex> out;
  if (s.names.empty()) out.emplace_back(c, "bench:w1:" + suffix);
  for (const auto& base : s.names) out.emplace_back(c, base + ":" + suffix);
  return out;
}

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  std::size_t from = 0;
  while (from < list.size()) {
    auto comma = list.find(',', from);
    if (comma == std::string::npos) comma = list.size();
    if (comma > from) out.push_back(list.substr(from, comma - from));
    from = comma + 1;
  }
  return out;
}

void dlock_sync(benchmark::State& state, const settings& s) {
  dlock::client client{dlock::config::from_uri(s.url)};
  auto ms = mutexes(client, s, "sync");
  std::size_t turn = 0;
  for (std::int64_t i = 0; i < s.warmup; ++i) {
    auto& m = ms[turn++ % ms.size()];
    m.lock();
    m.unlock();
  }
  std::vector<double> us;
  us.reserve(static_cast<std::size_t>(s.iterations));
  for (auto _ : state) {
    auto& m = ms[turn++ % ms.size()];
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

// A chain of lock+unlock pairs driven by completion handlers on the client's I/O thread, one
// mutex after the other.
class async_chain {
 public:
  async_chain(std::deque<dlock::mutex>& ms, std::int64_t pairs, std::vector<double>& us)
      : ms_{ms}, left_{pairs}, us_{us} {}

  std::future<std::error_code> start() {
    auto f = done_.get_future();
    next();
    return f;
  }

 private:
  void next() {
    if (left_ == 0) return done_.set_value({});
    t0_ = bench::mono_ns();
    ms_[turn_++ % ms_.size()].async_lock([this](std::error_code ec, dlock::lease l) {
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

  std::deque<dlock::mutex>& ms_;
  std::size_t turn_ = 0;
  std::int64_t left_;
  std::vector<double>& us_;
  std::int64_t t0_ = 0;
  dlock::lease lease_;
  std::promise<std::error_code> done_;
};

void dlock_async(benchmark::State& state, const settings& s) {
  dlock::client client{dlock::config::from_uri(s.url)};
  auto ms = mutexes(client, s, "async");
  std::vector<double> warm, us;
  {
    async_chain w{ms, s.warmup, warm};
    if (auto ec = w.start().get()) return state.SkipWithError(ec.message().c_str());
  }
  us.reserve(static_cast<std::size_t>(s.iterations));
  for (auto _ : state) {
    async_chain chain{ms, s.iterations, us};
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
    s.names = split(opt.str("names"));
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
