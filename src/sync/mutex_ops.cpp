// Argument checks and deadlines shared by dlock::mutex's forms (mutex_ops.hpp).
#include "sync/mutex_ops.hpp"

#include "dlock/error.hpp"

namespace dlock::detail {

std::error_code validate_name(const config& cfg, const std::string& name) {
  if (name.empty() || name.size() > cfg.max_name_length) return errc::invalid_argument;
  return {};
}

std::error_code validate_lease(std::chrono::milliseconds lease) {
  if (lease.count() <= 0 || lease > max_lease) return errc::invalid_argument;
  return {};
}

std::optional<clock::time_point> deadline_after(std::optional<std::chrono::milliseconds> wait) {
  if (!wait) return std::nullopt;
  if (*wait >= forever) return std::nullopt;  // now + wait would overflow: wait as lock() does
  return clock::now() + std::max(*wait, std::chrono::milliseconds{0});
}

}  // namespace dlock::detail
