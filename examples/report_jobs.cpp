// At most 3 report jobs at once across the fleet: dlock::leased_semaphore. Here 8 threads stand
// for 8 hosts; each permit is renewed by the watchdog while its job runs, and comes back by
// itself if the host dies (the lease ends).
//
//   DLOCK_URL=redis://127.0.0.1:6379 ./report_jobs
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <dlock/dlock.hpp>
#include <thread>
#include <vector>

int main() {
  const char* url = std::getenv("DLOCK_URL");
  try {
    dlock::client client{dlock::config::from_uri(url ? url : "redis://127.0.0.1:6379")};
    dlock::leased_semaphore reports{client, "examples:report-jobs"};
    reports.try_set_permits(3);  // once: a no-op when the semaphore already has its permits
    std::atomic<int> running{0}, most_at_once{0}, done{0};

    std::vector<std::thread> hosts;
    for (int h = 0; h < 8; ++h) {
      hosts.emplace_back([&] {
        for (int job = 0; job < 3; ++job) {
          auto permit = reports.try_acquire_for(std::chrono::seconds{20});  // a dlock::permit
          if (!permit) continue;
          const int now = ++running;
          int seen = most_at_once.load();
          while (now > seen && !most_at_once.compare_exchange_weak(seen, now)) {
          }
          // The job: stop early if the permit's lease may be lost (permit.lost()).
          for (int step = 0; step < 5 && !permit.lost().stop_requested(); ++step) {
            std::this_thread::sleep_for(std::chrono::milliseconds{4});
          }
          --running;
          ++done;
        }  // the permit goes back here
      });
    }
    for (auto& t : hosts) t.join();
    std::printf("%d jobs, at most %d at once, %lld permits free\n", done.load(),
                most_at_once.load(), static_cast<long long>(reports.available()));
    return done == 24 && most_at_once <= 3 ? 0 : 1;
  } catch (const dlock::lock_error& e) {
    std::fprintf(stderr, "report_jobs: %s\n", e.what());
    return 2;
  }
}
