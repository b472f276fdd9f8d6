#include "runtime/owner.hpp"

#include <atomic>

namespace dlock::detail {
namespace {
std::atomic<std::uint64_t> counter{0};
}

std::uint64_t this_thread_number() noexcept {
  thread_local const std::uint64_t n = ++counter;
  return n;
}

std::uint64_t next_lease_number() noexcept { return ++counter; }

}  // namespace dlock::detail
