// A lease-owned lock in a coroutine: wait up to 5 s, stop the job if the lease is lost, unlock.
//
//   DLOCK_URL=redis://127.0.0.1:6379 ./async_lease
#include <asio/co_spawn.hpp>
#include <asio/experimental/as_tuple.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/use_future.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <dlock/dlock.hpp>

using namespace std::chrono_literals;
using asio::experimental::as_tuple;

asio::awaitable<int> nightly(dlock::client& client) {
  dlock::mutex job{client, "examples:jobs:nightly"};
  auto [ec, lease] = co_await job.async_lock_for(5s, as_tuple(asio::use_awaitable));
  if (ec == dlock::errc::timeout) {
    std::puts("another host runs the job");
    co_return 0;
  }
  if (ec) {
    std::fprintf(stderr, "async_lease: %s\n", ec.message().c_str());
    co_return 2;
  }
  std::stop_callback on_lost{lease.lost(), [] { std::puts("lease lost: aborting the batch"); }};
  std::printf("batch runs with fencing token %llu\n",
              static_cast<unsigned long long>(lease.fencing_token()));
  asio::steady_timer work{co_await asio::this_coro::executor, 50ms};  // the batch itself
  co_await work.async_wait(asio::use_awaitable);
  auto [unlock_ec] = co_await lease.async_unlock(as_tuple(asio::use_awaitable));
  co_return unlock_ec ? 1 : 0;
}

int main() {
  const char* url = std::getenv("DLOCK_URL");
  dlock::client client{dlock::config::from_uri(url ? url : "redis://127.0.0.1:6379")};
  // Run the coroutine on the client's own I/O thread and wait for its result here.
  auto result = asio::co_spawn(client.get_executor(), nightly(client), asio::use_future);
  return result.get();
}
