// One process at a time in a critical section, with std::lock_guard over a dlock::mutex.
//
//   DLOCK_URL=redis://127.0.0.1:6379 ./lock_guard
#include <cstdio>
#include <cstdlib>
#include <dlock/dlock.hpp>
#include <mutex>

int main() {
  const char* url = std::getenv("DLOCK_URL");
  try {
    dlock::client client{dlock::config::from_uri(url ? url : "redis://127.0.0.1:6379")};
    dlock::mutex nightly{client, "examples:nightly-report"};

    std::lock_guard guard{nightly};  // waits; the watchdog keeps the lease alive while held
    std::printf("running the nightly report (fencing token %llu)\n",
                static_cast<unsigned long long>(nightly.fencing_token()));
    {
      std::lock_guard again{nightly};  // the same thread may re-enter
      std::printf("re-entered: hold count %u\n", nightly.hold_count());
    }
    if (nightly.lease_lost().stop_requested()) {
      std::puts("lease lost: stop before writing anything");
      return 1;
    }
    return 0;  // guard's destructor unlocks; waiters on other hosts wake at once
  } catch (const dlock::lock_error& e) {
    std::fprintf(stderr, "lock_guard: %s\n", e.what());
    return 2;
  }
}
