// Bad input from the caller, through dlock::mutex against a real server: names (empty, too
// long, any bytes, names that cannot share their cluster slot), leases and waits (zero,
// negative, NaN, too long to express) and invalid configurations. Every refusal is typed and
// immediate, and nothing is written. docs/safety.md lists each case with the test that covers it.
#include <gtest/gtest.h>

#include <future>
#include <limits>
#include <string>
#include <utility>

#include "dlock/mutex.hpp"
#include "hostile_util.hpp"
#include "integration/test_util.hpp"
#include "support/async_code.hpp"
#include "support/redis_server.hpp"

using dlock::errc;

namespace {

using dlock::test::config_for;
using dlock::test::redis_server;
using namespace dlock::test::hostile;  // since, exists, counter, slop, prompt, steady, ...

// ---- Bad input ---------------------------------------------------------------------------------

TEST(hostile, empty_and_too_long_names_are_refused_at_once_everywhere) {
  redis_server srv;
  dlock::client c{config_for(srv, "max_name=64")};
  for (const auto& name : {std::string{}, std::string(65, 'x')}) {
    const auto what = "name of " + std::to_string(name.size()) + " bytes";
    SCOPED_TRACE(what);
    dlock::mutex m{c, name};
    expect_refused_on_every_path(
        m, errc::invalid_argument, 500ms, 100ms,
        [&] {
          if (!name.empty()) {
            EXPECT_FALSE(exists(srv, name));
          }
          EXPECT_EQ(srv.command({"DBSIZE"}), ":0");
        },
        what);
    std::error_code ec;
    m.force_unlock(ec);
    EXPECT_EQ(ec, errc::invalid_argument);
    m.is_locked(ec);
    EXPECT_EQ(ec, errc::invalid_argument);
    m.remaining_lease(ec);
    EXPECT_EQ(ec, errc::invalid_argument);
  }
  dlock::mutex longest{c, std::string(64, 'x')};
  EXPECT_TRUE(longest.try_lock());
  longest.unlock();
  EXPECT_EQ(srv.command({"DBSIZE"}), ":1") << "only the fencing counter remains";
}

// Names are bytes, as Redis keys are: invalid UTF-8, NUL, CR LF, spaces and a hash tag are
// accepted and name exactly that key (Redisson's names are Java strings sent as UTF-8). A name
// whose derived keys cannot share its cluster slot (keys::same_slot: `a{b`, `x{}y`, `a}b`) is
// refused at once with invalid_argument, and nothing is written.
TEST(hostile, names_are_bytes_and_any_bytes_lock_their_own_key) {
  redis_server srv;
  dlock::client c{config_for(srv)};
  using namespace std::string_literals;
  for (const auto& name : {"\xff\xfe bad utf-8"s, "nul\0inside"s, "crlf\r\n*1\r\n$4\r\nPING"s,
                           "with space"s, "{tag}rest"s, "\xc3\xa9t\xc3\xa9"s}) {
    SCOPED_TRACE(::testing::PrintToString(name));
    dlock::mutex m{c, name};
    std::error_code ec;
    EXPECT_TRUE(m.try_lock_for(1s, ec)) << ec.message();
    EXPECT_TRUE(exists(srv, name));
    EXPECT_EQ(srv.command({"TYPE", name}), "+hash");
    m.unlock(ec);
    EXPECT_FALSE(ec) << ec.message();
    EXPECT_FALSE(exists(srv, name));
  }
  const auto keys_before = srv.command({"DBSIZE"});
  for (const auto& name : {"close}only"s, "open{only"s, "x{}y"s}) {
    SCOPED_TRACE(::testing::PrintToString(name));
    dlock::mutex m{c, name};
    expect_refused_on_every_path(
        m, errc::invalid_argument, 500ms, 100ms,
        [&] {
          EXPECT_FALSE(exists(srv, name));
          EXPECT_EQ(srv.command({"DBSIZE"}), keys_before);
        },
        "name " + name);
  }
}

TEST(hostile, non_positive_leases_are_refused_at_once_on_every_form) {
  redis_server srv;
  dlock::client c{config_for(srv)};
  const auto name = dlock::test::unique_name("lock");
  dlock::mutex m{c, name};
  for (const auto lease : {0ms, -1ms, milliseconds::min()}) {
    SCOPED_TRACE(lease.count());
    std::error_code ec;
    const auto start = steady::now();
    m.lock(lease, ec);
    EXPECT_EQ(ec, errc::invalid_argument);
    EXPECT_FALSE(m.try_lock_for(1s, lease, ec));
    EXPECT_EQ(ec, errc::invalid_argument);
    auto f = dlock::test::async_code([&](auto h) { m.async_lock_for(1s, lease, std::move(h)); });
    ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
    EXPECT_EQ(f.get(), errc::invalid_argument);
    EXPECT_LT(since(start), 100ms) << "no round trip";
    EXPECT_FALSE(exists(srv, name));
  }
  // A floating-point NaN lease (a division by zero upstream) is refused the same way.
  const std::chrono::duration<double> nan{std::numeric_limits<double>::quiet_NaN()};
  std::error_code ec;
  EXPECT_FALSE(m.try_lock_for(1s, nan, ec));
  EXPECT_EQ(ec, errc::invalid_argument);
  EXPECT_FALSE(exists(srv, name));
}

// A lease too long for Redis (PEXPIRE overflows its clock) or for the steady clock: refused
// before anything is written, never a lock without expiry.
TEST(hostile, a_lease_too_long_to_express_is_refused_and_leaves_no_lock_held) {
  redis_server srv;
  dlock::client c{config_for(srv)};
  const auto name = dlock::test::unique_name("lock");
  dlock::mutex m{c, name};
  std::error_code ec;
  const auto start = steady::now();
  m.lock(milliseconds::max(), ec);
  EXPECT_LT(since(start), prompt);
  EXPECT_EQ(ec, errc::invalid_argument) << ec.message();
  EXPECT_FALSE(exists(srv, name)) << "left held, PTTL " << srv.command({"PTTL", name});
  srv.command({"DEL", name});
}

// Waits: zero or negative is one try (as std::timed_mutex::try_lock_for); a wait too long to
// add to the clock waits as long as lock() does, not zero.
TEST(hostile, non_positive_and_huge_waits_mean_one_try_and_forever) {
  redis_server srv;
  dlock::client holder{config_for(srv)}, waiter{config_for(srv)};
  const auto name = dlock::test::unique_name("lock");
  dlock::mutex h{holder, name}, w{waiter, name};
  for (const auto wait : {0ms, -1ms, milliseconds::min()}) {
    SCOPED_TRACE(wait.count());
    EXPECT_TRUE(w.try_lock_for(wait)) << "free: acquired";
    w.unlock();
    h.lock();
    const auto start = steady::now();
    EXPECT_FALSE(w.try_lock_for(wait)) << "held: one try";
    EXPECT_LT(since(start), prompt);
    h.unlock();
  }
  {
    // A NaN wait is one try too, not undefined behaviour in the conversion.
    const std::chrono::duration<double> nan{std::numeric_limits<double>::quiet_NaN()};
    h.lock();
    const auto start = steady::now();
    EXPECT_FALSE(w.try_lock_for(nan)) << "held: one try";
    EXPECT_LT(since(start), prompt);
    h.unlock();
  }
  h.lock();
  auto t = std::async(std::launch::async, [&] {
    std::error_code ec;
    const bool got = w.try_lock_for(milliseconds::max(), ec);
    if (got) w.unlock();
    return std::pair{got, ec};
  });
  EXPECT_EQ(t.wait_for(300ms), std::future_status::timeout) << "a huge wait returned at once";
  h.unlock();
  ASSERT_EQ(t.wait_for(5s), std::future_status::ready);
  const auto [got, ec] = t.get();
  EXPECT_TRUE(got) << ec.message();
  EXPECT_FALSE(exists(srv, name));
}

TEST(hostile, invalid_configuration_is_typed_at_construction_and_on_every_call) {
  std::error_code ec;
  std::string reason;
  for (const auto* uri :
       {"redis://127.0.0.1:0", "redis://127.0.0.1?timeout=-1s", "redis://h?timeout=1.5s",
        "redis://h?timeout=9999999999999999999ms", "http://h", "redis://h?wat=1"}) {
    SCOPED_TRACE(uri);
    dlock::config::from_uri(uri, ec, reason);
    EXPECT_EQ(ec, errc::invalid_uri);
    EXPECT_FALSE(reason.empty());
  }
  dlock::config bad;
  bad.command_timeout = 0ms;
  EXPECT_THROW(dlock::client{bad}, dlock::lock_error);
  // An unusable client: every call reports why, as ping() does.
  dlock::client c{bad, ec};
  EXPECT_EQ(ec, errc::invalid_uri);
  std::error_code ping_ec;
  c.ping(ping_ec);
  EXPECT_EQ(ping_ec, errc::invalid_uri);
  dlock::mutex m{c, "lock"};
  expect_refused_on_every_path(
      m, errc::invalid_uri, 500ms, 100ms, [] {}, "invalid config");

  // TLS files that cannot be loaded.
  dlock::client tls{dlock::config::from_uri("rediss://127.0.0.1:1?ca=/nonexistent/ca.pem"), ec};
  EXPECT_EQ(ec, errc::tls_config_invalid);
  tls.ping(ping_ec);
  EXPECT_EQ(ping_ec, errc::tls_config_invalid);
  dlock::mutex t{tls, "lock"};
  expect_refused_on_every_path(
      t, errc::tls_config_invalid, 500ms, 100ms, [] {}, "unusable TLS files");
}

}  // namespace
