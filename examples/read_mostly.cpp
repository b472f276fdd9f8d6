// A catalog many readers use at once and one writer updates: dlock::shared_mutex with
// std::shared_lock and std::unique_lock. A waiting writer holds new readers back, so a stream
// of readers cannot starve it.
//
//   DLOCK_URL=redis://127.0.0.1:6379 ./read_mostly
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <dlock/dlock.hpp>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <vector>

int main() {
  const char* url = std::getenv("DLOCK_URL");
  try {
    dlock::client client{dlock::config::from_uri(url ? url : "redis://127.0.0.1:6379")};
    std::atomic<int> reading{0}, most_at_once{0};
    std::atomic<bool> writer_overlapped{false};

    std::vector<std::thread> readers;
    for (int r = 0; r < 3; ++r) {
      readers.emplace_back([&] {
        dlock::shared_mutex catalog{client, "examples:catalog"};
        for (int i = 0; i < 5; ++i) {
          std::shared_lock read{catalog};  // lock_shared(): readers do not exclude each other
          const int now = ++reading;
          int seen = most_at_once.load();
          while (now > seen && !most_at_once.compare_exchange_weak(seen, now)) {
          }
          std::this_thread::sleep_for(std::chrono::milliseconds{20});
          --reading;
        }
      });
    }
    dlock::shared_mutex catalog{client, "examples:catalog"};
    for (int update = 0; update < 2; ++update) {
      std::unique_lock write{catalog};  // exclusive: waits for the readers, new ones wait for it
      if (reading.load() != 0) writer_overlapped = true;
      std::printf("updating the catalog (fencing token %llu)\n",
                  static_cast<unsigned long long>(catalog.write_side().fencing_token()));
      {
        std::shared_lock check{catalog};  // a writer may read its own write (a downgrade)
      }
    }
    for (auto& t : readers) t.join();
    std::printf("at most %d readers at once\n", most_at_once.load());
    if (writer_overlapped) {
      std::fputs("the writer overlapped a reader\n", stderr);
      return 1;
    }
    return 0;
  } catch (const dlock::lock_error& e) {
    std::fprintf(stderr, "read_mostly: %s\n", e.what());
    return 2;
  }
}
