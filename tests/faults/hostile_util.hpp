// What the hostile tests share (hostile_keys_test.cpp, hostile_server_test.cpp,
// hostile_input_test.cpp): the time bounds, an admin-side EXISTS, and the check that every path
// to a lock is refused with one typed errc, in time, leaving nothing held.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <future>
#include <string>
#include <system_error>

#include "dlock/keys.hpp"
#include "dlock/mutex.hpp"
#include "measured.hpp"
#include "support/async_code.hpp"
#include "support/redis_server.hpp"

namespace dlock::test::hostile {

using namespace std::chrono_literals;
using std::chrono::milliseconds;
using steady = std::chrono::steady_clock;

// Under a sanitizer (TSan above all) handshakes and scheduling run several times slower; the
// bounds below get this much more there. The tight bounds are checked by the plain build.
#ifdef DLOCK_TEST_SANITIZED
inline constexpr auto sanitizer_extra = 1000ms;
#else
inline constexpr auto sanitizer_extra = 0ms;
#endif
// What a refusal may cost past the caller's deadline: one round trip, a 50 ms retry pause and
// scheduling on a 2-core host shared with the servers and other tests.
inline constexpr auto slop = 300ms + sanitizer_extra;
// A refusal "at once": one round trip plus scheduling.
inline constexpr auto prompt = 500ms + sanitizer_extra;

inline milliseconds since(steady::time_point start) {
  return std::chrono::duration_cast<milliseconds>(steady::now() - start);
}

inline bool exists(const redis_server& srv, const std::string& key) {
  return srv.command({"EXISTS", key}) == ":1";
}

// The fencing counter a default client's acquisitions of `name` use (one per cluster slot).
inline std::string counter(const std::string& name) {
  return dlock::keys::slot_fencing_counter_of(name);
}

// One call's outcome and time, for docs/safety.md's hostile-inputs table.
inline void measured_call(const std::string& call, std::error_code ec, milliseconds took) {
  dlock::faults::measured(call + ": " + (ec ? ec.message() : std::string{"ok"}) + " in " +
                          std::to_string(took.count()) + " ms");
}

// The paths a caller can take to a lock, each expected to fail with `want` in time:
// try_lock(), try_lock_for(wait), async_lock_for(wait) and lock() (no deadline; within
// `lock_bound`). `held_nowhere` runs after each and checks (with ASSERTs/EXPECTs) that no lock
// was left behind. Each path's outcome and time are measured, prefixed with `what` (the case,
// when a test runs several).
inline void expect_refused_on_every_path(dlock::mutex& m, dlock::errc want, milliseconds wait,
                                         milliseconds lock_bound,
                                         const std::function<void()>& held_nowhere,
                                         const std::string& what = "") {
  const auto label = [&](const std::string& call) {
    return what.empty() ? call : what + ", " + call;
  };
  const auto wait_text = "(" + std::to_string(wait.count()) + "ms)";
  std::error_code ec;
  {
    SCOPED_TRACE("try_lock()");
    const auto start = steady::now();
    EXPECT_FALSE(m.try_lock(ec));
    const auto took = since(start);
    EXPECT_EQ(ec, want) << ec.message();
    EXPECT_LT(took, std::max(lock_bound, wait) + slop);
    measured_call(label("try_lock()"), ec, took);
    held_nowhere();
  }
  {
    SCOPED_TRACE("try_lock_for" + wait_text);
    const auto start = steady::now();
    EXPECT_FALSE(m.try_lock_for(wait, ec));
    const auto took = since(start);
    EXPECT_EQ(ec, want) << ec.message();
    EXPECT_LT(took, wait + slop) << "the caller's deadline plus " << slop.count() << " ms";
    measured_call(label("try_lock_for" + wait_text), ec, took);
    held_nowhere();
  }
  {
    SCOPED_TRACE("async_lock_for" + wait_text);
    const auto start = steady::now();
    auto f = async_code([&](auto h) { m.async_lock_for(wait, std::move(h)); });
    ASSERT_EQ(f.wait_for(wait + 10s), std::future_status::ready) << "hangs";
    const std::error_code got = f.get();
    const auto took = since(start);
    EXPECT_EQ(got, want) << got.message();
    EXPECT_LT(took, wait + slop);
    measured_call(label("async_lock_for" + wait_text), got, took);
    held_nowhere();
  }
  {
    SCOPED_TRACE("lock()");
    const auto start = steady::now();
    m.lock(ec);
    const auto took = since(start);
    EXPECT_EQ(ec, want) << ec.message();
    EXPECT_LT(took, lock_bound + sanitizer_extra) << "lock() without a deadline";
    measured_call(label("lock()"), ec, took);
    EXPECT_FALSE(m.lease_lost().stop_requested());
    EXPECT_EQ(m.fencing_token(), 0u) << "no hold";
    held_nowhere();
  }
}

}  // namespace dlock::test::hostile
