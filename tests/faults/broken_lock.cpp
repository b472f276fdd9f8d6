#include "broken_lock.hpp"

#include <unistd.h>

#include <thread>

#include "dlock/error.hpp"
#include "dlock/keys.hpp"

namespace dlock::faults {

namespace {
using clock = std::chrono::steady_clock;

// KEYS[1] lock; ARGV[1] owner; deletes the lock only if ARGV[1] holds it.
constexpr const char* compare_and_delete_lua = R"(
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
)";
}  // namespace

broken_lock::broken_lock(dlock::client& c, std::string name, flaw f,
                         std::chrono::milliseconds lease)
    : client_{c},
      name_{std::move(name)},
      flaw_{f},
      lease_{lease},
      owner_{c.id() + ":" + std::to_string(::getpid())} {}

std::optional<broken_lock::flaw> broken_lock::flaw_named(std::string_view lock) {
  if (lock == "broken-no-owner-check") return flaw::no_owner_check;
  if (lock == "broken-no-expiry") return flaw::no_expiry_check;
  if (lock == "broken-reuses-tokens") return flaw::reuses_tokens;
  if (lock == "broken-over-reports-trust") return flaw::over_reports_trust;
  return std::nullopt;
}

std::error_code broken_lock::acquire(std::chrono::milliseconds wait, std::uint64_t& token) {
  const auto until = clock::now() + wait;
  for (;;) {
    std::error_code ec;
    const auto sent = clock::now();
    auto r =
        client_.execute({"SET", name_, owner_, "NX", "PX", std::to_string(lease_.count())}, ec);
    if (ec) return ec;
    if (!r.is_nil()) {
      // The flaw of over_reports_trust: it believes its lease runs three times as long.
      deadline_ = sent + (flaw_ == flaw::over_reports_trust ? 3 * lease_ : lease_);
      return take_token(token);
    }
    if (clock::now() >= until) return dlock::errc::timeout;
    std::this_thread::sleep_for(std::chrono::milliseconds{10});
  }
}

std::error_code broken_lock::take_token(std::uint64_t& token) {
  std::error_code ec;
  const auto counter = dlock::keys::fencing_counter(name_);
  if (flaw_ == flaw::reuses_tokens) {  // the flaw: reads the counter, never moves it
    auto t = client_.execute({"GET", counter}, ec);
    if (ec) return ec;
    token = static_cast<std::uint64_t>(t.to_integer().value_or(0)) + 1;
    return {};
  }
  auto t = client_.execute({"INCR", counter}, ec);
  if (ec) return ec;
  token = static_cast<std::uint64_t>(t.to_integer().value_or(0));
  return {};
}

bool broken_lock::checks_lease() const {
  return flaw_ == flaw::no_owner_check || flaw_ == flaw::over_reports_trust;
}

bool broken_lock::expired() const { return checks_lease() && clock::now() >= deadline_; }

std::int64_t broken_lock::time_left_ms() const {
  if (!checks_lease()) return -1;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - clock::now());
  return std::max<std::int64_t>(left.count(), 0);
}

std::error_code broken_lock::release() {
  std::error_code ec;
  if (flaw_ == flaw::no_owner_check) {
    client_.execute({"DEL", name_}, ec);  // the flaw: whoever holds it now loses it
  } else {
    client_.execute({"EVAL", compare_and_delete_lua, "1", name_, owner_}, ec);
  }
  return ec;
}

}  // namespace dlock::faults
