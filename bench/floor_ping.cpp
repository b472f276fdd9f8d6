// dlock_floor_ping — the round trip W3's unlock pays. W3's holder sends its unlock after a 1 ms
// hold, during which the server may have had nothing to do; `redis-benchmark -c 1` sends its
// PINGs back to back and never lets it idle. On a virtual machine a CPU that idled wakes late
// (the hypervisor halted it), so the two round trips can differ by several times. This measures
// both on one plain connection (hiredis' synchronous API), in pairs: a PING sent after a hold
// (bench::hold_until_ns, as W3's drivers hold) since the previous reply, then one at once.
//
//   dlock_floor_ping --host 127.0.0.1 --port 6379 [--iterations 2000] [--warmup 50]
//                    [--hold-us 1000]
//
// Prints one JSON object: {"system": "floor-ping", "n", "hold_us", "after_hold_p50_us",
// "after_hold_p99_us", "back_to_back_p50_us"} (what the report shows). Exits 1 on any unexpected
// reply.
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "common.hpp"
#include "floor.hpp"

namespace {

using bench::plain::conn;

// One PING's round trip in µs.
double ping_us(conn& c, const std::vector<std::string>& ping) {
  const auto t0 = bench::mono_ns();
  auto r = c.command(ping);
  const auto t1 = bench::mono_ns();
  if (r->type != REDIS_REPLY_STATUS || std::string{r->str, r->len} != "PONG") {
    throw std::runtime_error("PING: unexpected reply");
  }
  return static_cast<double>(t1 - t0) / 1e3;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const bench::options opt{argc, argv, 1};
    conn c{opt};
    const auto iterations = opt.integer("iterations", 2000);
    const auto warmup = opt.integer("warmup", 50);
    const auto hold_us = opt.integer("hold-us", 1000);
    if (iterations < 1 || warmup < 0 || hold_us < 0) {
      throw std::runtime_error("bad --iterations, --warmup or --hold-us");
    }
    const std::vector<std::string> ping{"PING"};
    std::vector<double> after_hold, back_to_back;
    after_hold.reserve(static_cast<std::size_t>(iterations));
    back_to_back.reserve(static_cast<std::size_t>(iterations));
    for (std::int64_t i = 0; i < warmup + iterations; ++i) {
      bench::hold_until_ns(bench::mono_ns() + hold_us * 1000);
      const double cold = ping_us(c, ping);
      const double warm = ping_us(c, ping);
      if (i < warmup) continue;
      after_hold.push_back(cold);
      back_to_back.push_back(warm);
    }
    bench::emit(opt.str("out"),
                bench::json{}
                    .field("system", "floor-ping")
                    .field("n", static_cast<std::int64_t>(after_hold.size()))
                    .field("hold_us", hold_us)
                    .field("after_hold_p50_us", bench::percentile(after_hold, 0.50))
                    .field("after_hold_p99_us", bench::percentile(after_hold, 0.99))
                    .field("back_to_back_p50_us", bench::percentile(back_to_back, 0.50))
                    .str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlock_floor_ping: %s\n", e.what());
    return 1;
  }
}
