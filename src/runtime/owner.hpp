// Owner fields of lock hashes: `<client-uuid>:<n>`, where n identifies a thread (thread-owned
// holds, as Redisson's thread id) or a lease (lease-owned holds). Both come from one counter, so
// a thread and a lease of the same client never share a field.
#pragma once

#include <cstdint>
#include <string>

namespace dlock::detail {

// A number unique in this process for the calling thread, stable for its lifetime.
std::uint64_t this_thread_number() noexcept;
// A fresh number for a lease, never equal to any thread's or other lease's.
std::uint64_t next_lease_number() noexcept;

inline std::string owner_field(const std::string& client_id, std::uint64_t n) {
  return client_id + ':' + std::to_string(n);
}

}  // namespace dlock::detail
