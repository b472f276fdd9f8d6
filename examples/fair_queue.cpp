// Jobs served in the order they asked, across threads (or hosts): dlock::fair_mutex.
//
//   DLOCK_URL=redis://127.0.0.1:6379 ./fair_queue
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <dlock/dlock.hpp>
#include <mutex>
#include <thread>
#include <vector>

int main() {
  const char* url = std::getenv("DLOCK_URL");
  try {
    dlock::client client{dlock::config::from_uri(url ? url : "redis://127.0.0.1:6379")};
    dlock::fair_mutex printer{client, "examples:printer"};
    std::mutex out;  // the order of this process's lines
    std::vector<int> served;

    std::unique_lock first{printer};  // hold it while the jobs line up
    std::vector<std::thread> jobs;
    for (int job = 0; job < 4; ++job) {
      jobs.emplace_back([&, job] {
        dlock::fair_mutex p{client, "examples:printer"};
        if (!p.try_lock_for(std::chrono::seconds{30})) return;  // a bounded wait
        {
          std::lock_guard g{out};
          served.push_back(job);
          std::printf("job %d printing (fencing token %llu)\n", job,
                      static_cast<unsigned long long>(p.fencing_token()));
        }
        p.unlock();  // the next in the queue hears its turn on its own channel
      });
      // Let each job join the queue before the next one starts, so the order is known.
      while (client.execute({"LLEN", dlock::keys::fair_queue("examples:printer")}).integer() <= job)
        std::this_thread::sleep_for(std::chrono::milliseconds{5});
    }
    first.unlock();
    for (auto& j : jobs) j.join();
    for (int i = 0; i < 4; ++i) {
      if (served.size() != 4 || served[static_cast<std::size_t>(i)] != i) {
        std::fputs("jobs were not served in arrival order\n", stderr);
        return 1;
      }
    }
    std::puts("served in arrival order");
    return 0;
  } catch (const dlock::lock_error& e) {
    std::fprintf(stderr, "fair_queue: %s\n", e.what());
    return 2;
  }
}
