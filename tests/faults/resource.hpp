// The shared resource the fault lab's workers protect: two counters on their own redis-server
// (not the lock server, so restarting the lock server leaves it alone).
//
// - The fenced counter keeps the highest fencing token it has seen. A read or write carrying a
//   smaller token is refused; one carrying the same or a larger token is accepted and raises the
//   fence to it — so once a newer holder has read, a stale holder can no longer write
//   (Kleppmann's fencing, with reads fencing too so a read-modify-write stays whole).
// - The unfenced counter beside it is a plain GET and SET: what an application without fencing
//   would do. Its SET returns the value it replaced, so a lost update shows on the write itself.
//
// Thread safety: as dlock::client (any thread).
#pragma once

#include <cstdint>
#include <string>
#include <system_error>

#include "dlock/client.hpp"

namespace dlock::faults {

struct fenced_result {
  bool accepted = false;
  std::int64_t value = 0;  // read: the value read; write: the value it replaced (or found)
};

class resource {
 public:
  resource(dlock::client& c, std::string name);

  // The keys on the resource server.
  static std::string fence_key(const std::string& name) { return "resource:{" + name + "}:fence"; }
  static std::string fenced_key(const std::string& name) {
    return "resource:{" + name + "}:fenced";
  }
  static std::string plain_key(const std::string& name) { return "resource:{" + name + "}:plain"; }

  fenced_result fenced_read(std::uint64_t token, std::error_code& ec);
  fenced_result fenced_write(std::uint64_t token, std::int64_t value, std::error_code& ec);
  std::int64_t plain_get(std::error_code& ec);
  // Sets the plain counter and returns the value it replaced.
  std::int64_t plain_set(std::int64_t value, std::error_code& ec);

 private:
  fenced_result fenced(const char* script, std::uint64_t token, std::int64_t value,
                       std::error_code& ec);

  dlock::client& client_;
  std::string name_;
};

}  // namespace dlock::faults
