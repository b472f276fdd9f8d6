// red_lock: run a job at most once at a time across hosts, over three independent Redis servers,
// so that losing one of them (a crash, a restart) neither stops the job nor lets two run.
// The job's output is written with the lock's fencing token, which the store checks: a holder
// paused past its lease is refused there even if a new majority formed behind its back.
//
//   DLOCK_URLS="redis://a:6379 redis://b:6379 redis://c:6379" ./nightly_report
// (With DLOCK_URL alone, it uses databases 0, 1 and 2 of that server, for a quick try.)
#include <cstdio>
#include <cstdlib>
#include <dlock/dlock.hpp>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::vector<std::string> server_urls() {
  std::vector<std::string> urls;
  if (const char* many = std::getenv("DLOCK_URLS")) {
    std::istringstream in{many};
    for (std::string u; in >> u;) urls.push_back(u);
    return urls;
  }
  const char* one = std::getenv("DLOCK_URL");
  const std::string base = one ? one : "redis://127.0.0.1:6379";
  for (int db = 0; db < 3; ++db) urls.push_back(base + "/" + std::to_string(db));
  return urls;
}

}  // namespace

int main() {
  std::vector<std::unique_ptr<dlock::client>> clients;
  std::vector<std::reference_wrapper<dlock::client>> servers;
  for (const auto& url : server_urls()) {
    clients.push_back(std::make_unique<dlock::client>(dlock::config::from_uri(url)));
    servers.emplace_back(*clients.back());
  }
  dlock::red_lock job{servers, "examples:nightly-report"};
  if (!job.try_lock_for(std::chrono::seconds{5})) {
    std::puts("another host is running the report");
    return 1;
  }
  const auto token = job.fencing_token();
  // Check the lease before each protected write; the store checks the token.
  if (job.lease_time_left() > std::chrono::seconds{1}) {
    std::printf("report written with fencing token %llu (lease: %lld ms left)\n",
                static_cast<unsigned long long>(token),
                static_cast<long long>(job.lease_time_left().count()));
  }
  job.unlock();
  return 0;
}
