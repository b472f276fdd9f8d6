// dlock's metrics on a Prometheus /metrics endpoint (prometheus-cpp's pull Exposer), while four
// workers take turns on a few locks.
//
//   DLOCK_URL=redis://127.0.0.1:6379 ./metrics_exporter [LISTEN] [SECONDS]
//   curl -s http://127.0.0.1:9464/metrics | grep dlock_lock_wait_seconds
//
// LISTEN defaults to 127.0.0.1:9464 (port 0 picks a free one); the program prints the URL it
// serves, then runs for SECONDS (default 30). Scrape it with Prometheus:
//   scrape_configs: [{job_name: orders, static_configs: [{targets: ["host:9464"]}]}]
#include <prometheus/exposer.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <dlock/dlock.hpp>
#include <dlock/prometheus.hpp>
#include <string>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  const char* url = std::getenv("DLOCK_URL");
  const std::string listen = argc > 1 ? argv[1] : "127.0.0.1:9464";
  const auto seconds = std::chrono::seconds{argc > 2 ? std::atoi(argv[2]) : 30};
  try {
    dlock::client client{dlock::config::from_uri(url ? url : "redis://127.0.0.1:6379")};
    prometheus::Exposer exposer{listen};
    auto collector = std::make_shared<dlock::prometheus_collector>(
        client, std::map<std::string, std::string>{{"client", "metrics_exporter"}});
    exposer.RegisterCollectable(collector);
    std::printf("serving http://127.0.0.1:%d/metrics\n", exposer.GetListeningPorts().at(0));
    std::fflush(stdout);

    const auto end = std::chrono::steady_clock::now() + seconds;
    std::vector<std::thread> workers;
    for (int w = 0; w < 4; ++w) {
      workers.emplace_back([&client, end, w] {
        dlock::mutex jobs{client, "examples:metrics:" + std::to_string(w % 2)};
        while (std::chrono::steady_clock::now() < end) {
          std::error_code ec;
          if (!jobs.try_lock_for(std::chrono::milliseconds{50}, ec)) continue;
          std::this_thread::sleep_for(std::chrono::milliseconds{5});  // the work
          jobs.unlock(ec);  // lease_lost is reported in the metrics; the loop goes on
        }
      });
    }
    for (auto& t : workers) t.join();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "metrics_exporter: %s\n", e.what());
    return 2;
  }
}
