// Built against an installed dlock with COMPONENTS prometheus (tests/package/check): a client's
// metrics as Prometheus families, rendered by prometheus-cpp's text serializer.
#include <prometheus/text_serializer.h>

#include <dlock/prometheus.hpp>
#include <iostream>

int main() {
  std::error_code ec;
  auto cfg = dlock::config::from_uri("redis://127.0.0.1:1?connect_timeout=100ms", ec);
  if (ec) return 1;
  dlock::client c{cfg};
  dlock::prometheus_collector collector{c, {{"client", "consumer"}}};
  std::cout << prometheus::TextSerializer{}.Serialize(collector.Collect());
  c.shutdown();
  return 0;
}
