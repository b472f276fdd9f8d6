// Fencing: a lease is not a mutex. A holder paused past its lease (GC, SIGSTOP, swap) may wake
// up after another has taken the lock, so the resource itself must refuse stale writers. Here
// the "resource" is a Redis hash that accepts a write only with a token at least as large as
// the largest it has seen (a compare in one Lua script, like a database's conditional update).
//
//   DLOCK_URL=redis://127.0.0.1:6379 ./fencing
#include <cstdio>
#include <cstdlib>
#include <dlock/dlock.hpp>
#include <mutex>
#include <string>

namespace {

// The protected resource's side: apply `value` only if `token` is not older than the last one.
bool fenced_write(dlock::client& c, std::uint64_t token, const std::string& value) {
  static const char* script =
      "local last = tonumber(redis.call('hget', KEYS[1], 'token') or '0') "
      "if tonumber(ARGV[1]) < last then return 0 end "
      "redis.call('hset', KEYS[1], 'token', ARGV[1], 'value', ARGV[2]) return 1";
  return c.execute({"EVAL", script, "1", "examples:fenced-resource", std::to_string(token), value})
             .integer() == 1;
}

}  // namespace

int main() {
  const char* url = std::getenv("DLOCK_URL");
  dlock::client client{dlock::config::from_uri(url ? url : "redis://127.0.0.1:6379")};
  dlock::mutex m{client, "examples:fenced"};

  std::uint64_t first = 0;
  {
    std::lock_guard g{m};
    first = m.fencing_token();
    if (!fenced_write(client, first, "written by the first holder")) return 1;
  }
  {
    std::lock_guard g{m};  // a later holder: a larger token
    if (!fenced_write(client, m.fencing_token(), "written by the second holder")) return 1;
  }
  // The first holder, "waking up" late with its old token, is refused by the resource.
  const bool stale_accepted = fenced_write(client, first, "stale write");
  std::printf("stale write with token %llu %s\n", static_cast<unsigned long long>(first),
              stale_accepted ? "ACCEPTED (bug)" : "refused");
  return stale_accepted ? 1 : 0;
}
