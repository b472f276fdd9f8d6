// dlock's events (config::on_event) in an spdlog log: leases lost or at risk, connections lost
// and re-established, Sentinel failovers, warnings. The library does not depend on spdlog; this
// is the one place that does.
//
//   DLOCK_URL=redis://127.0.0.1:6379 ./events_spdlog
//
// It takes a lock, then deletes the lock's key behind its own back (as an operator's DEL, or a
// failover that lost the write, would): the watchdog's next renewal finds it gone, and the log
// says so while the holder's lease_lost() token stops its work.
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <dlock/dlock.hpp>
#include <string>
#include <thread>

namespace {

void log_event(const dlock::event& e) {
  using dlock::event_type;
  switch (e.type) {
    case event_type::lease_lost:
    case event_type::disconnected:
      spdlog::error("dlock {}: {}", dlock::to_string(e.type), e.message);
      break;
    case event_type::lease_at_risk:
    case event_type::warning:
      spdlog::warn("dlock {}: {}", dlock::to_string(e.type), e.message);
      break;
    case event_type::reconnected:
    case event_type::failover:
      spdlog::info("dlock {}: {}", dlock::to_string(e.type), e.message);
      break;
  }
}

}  // namespace

int main() {
  const char* url = std::getenv("DLOCK_URL");
  try {
    auto cfg = dlock::config::from_uri(url ? url : "redis://127.0.0.1:6379");
    cfg.watchdog_lease = std::chrono::milliseconds{900};  // renewed every 300 ms
    cfg.on_event = log_event;  // on the client's I/O thread: log, never block
    dlock::client client{cfg};
    dlock::mutex report{client, "examples:events:report"};

    report.lock();
    spdlog::info("holding {} (fencing token {})", report.name(), report.fencing_token());
    client.execute({"DEL", report.name()});  // the lock vanishes under its holder
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{3};
    while (!report.lease_lost().stop_requested() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds{20});  // the work, checking its lease
    }
    std::error_code ec;
    report.unlock(ec);
    spdlog::info("unlock: {}", ec ? ec.message() : "ok");
    const auto lost = client.metrics().of(dlock::sync_kind::mutex).lost();
    spdlog::info("leases lost so far: {}", lost);
    return lost == 1 ? 0 : 1;
  } catch (const dlock::lock_error& e) {
    std::fprintf(stderr, "events_spdlog: %s\n", e.what());
    return 2;
  }
}
