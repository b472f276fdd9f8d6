// Start the batch when all 5 shards are loaded: dlock::latch. A coordinator sets the count, each
// loader counts down when its shard is in, and the batch waits (bounded) for zero.
//
//   DLOCK_URL=redis://127.0.0.1:6379 ./shards_loaded
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
    dlock::latch loaded{client, "examples:shards-loaded"};
    // Set the count before anyone waits: an absent latch reads as open.
    if (!loaded.try_set_count(5)) std::puts("the latch already had a count");

    std::vector<std::thread> loaders;
    for (int shard = 0; shard < 5; ++shard) {
      loaders.emplace_back([&, shard] {
        std::this_thread::sleep_for(std::chrono::milliseconds{20 * (shard + 1)});  // loading
        loaded.count_down();
      });
    }
    const bool ready = loaded.wait_for(std::chrono::seconds{20});
    for (auto& t : loaders) t.join();
    std::printf(ready ? "all shards loaded: starting the batch\n" : "shards still loading\n");
    return ready && loaded.count() == 0 ? 0 : 1;
  } catch (const dlock::lock_error& e) {
    std::fprintf(stderr, "shards_loaded: %s\n", e.what());
    return 2;
  }
}
