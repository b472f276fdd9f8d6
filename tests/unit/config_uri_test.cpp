// dlock::config::from_uri: the URIs it accepts and what they set, and the ones it rejects
// (errc::invalid_uri with a reason, or lock_error from the throwing overload). (parse_duration
// and config::validate: config_validate_test.cpp.)
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <string_view>
#include <system_error>

#include "config_parse.hpp"
#include "dlock/config.hpp"
#include "dlock/error.hpp"

namespace {

using namespace std::chrono_literals;
using dlock::config;
using dlock::errc;

using dlock::test::parse_ok;

// ---------------------------------------------------------------------------------------------
// Good URIs

TEST(config_from_uri, defaults) {
  const auto cfg = parse_ok("redis://h");
  const config def;
  EXPECT_EQ(cfg.host, "h");
  EXPECT_EQ(cfg.port, 6379);
  EXPECT_EQ(cfg.database, 0);
  EXPECT_TRUE(cfg.username.empty());
  EXPECT_TRUE(cfg.password.empty());
  EXPECT_FALSE(cfg.tls.enabled);
  EXPECT_EQ(cfg.connect_timeout, def.connect_timeout);
  EXPECT_EQ(cfg.command_timeout, def.command_timeout);
  EXPECT_EQ(cfg.health_check_interval, def.health_check_interval);
  EXPECT_EQ(cfg.reconnect_min, def.reconnect_min);
  EXPECT_EQ(cfg.reconnect_max, def.reconnect_max);
  EXPECT_EQ(cfg.watchdog_lease, def.watchdog_lease);
  EXPECT_EQ(cfg.client_name, def.client_name);
  EXPECT_EQ(cfg.fencing, config::fencing_mode::on);
}

TEST(config_from_uri, host_and_port) {
  const auto cfg = parse_ok("redis://10.0.0.5:6380");
  EXPECT_EQ(cfg.host, "10.0.0.5");
  EXPECT_EQ(cfg.port, 6380);
  EXPECT_EQ(parse_ok("redis://h:1").port, 1);
  EXPECT_EQ(parse_ok("redis://h:65535").port, 65535);
}

TEST(config_from_uri, database_path) {
  EXPECT_EQ(parse_ok("redis://h:6379/2").database, 2);
  EXPECT_EQ(parse_ok("redis://h/15").database, 15);
  EXPECT_EQ(parse_ok("redis://h/").database, 0);
  EXPECT_EQ(parse_ok("redis://h/0?timeout=1s").database, 0);
}

TEST(config_from_uri, user_and_password) {
  const auto cfg = parse_ok("redis://app:secret@h:6379/2");
  EXPECT_EQ(cfg.username, "app");
  EXPECT_EQ(cfg.password, "secret");
  EXPECT_EQ(cfg.host, "h");
  EXPECT_EQ(cfg.database, 2);
}

TEST(config_from_uri, password_only_with_colon) {
  const auto cfg = parse_ok("redis://:pass@h");
  EXPECT_TRUE(cfg.username.empty());
  EXPECT_EQ(cfg.password, "pass");
}

TEST(config_from_uri, password_only_without_colon) {
  const auto cfg = parse_ok("redis://secret@h");
  EXPECT_TRUE(cfg.username.empty());
  EXPECT_EQ(cfg.password, "secret");
  EXPECT_EQ(cfg.host, "h");
}

TEST(config_from_uri, percent_encoded_credentials) {
  const auto cfg = parse_ok("redis://u%3Ax:p%40ss@h");
  EXPECT_EQ(cfg.username, "u:x");
  EXPECT_EQ(cfg.password, "p@ss");
  EXPECT_EQ(parse_ok("redis://:%2f%3F%25@h").password, "/?%");
}

TEST(config_from_uri, ipv6_host) {
  const auto cfg = parse_ok("redis://[::1]:6380");
  EXPECT_EQ(cfg.host, "::1");
  EXPECT_EQ(cfg.port, 6380);
  const auto bare = parse_ok("redis://u:p@[fe80::1]/3");
  EXPECT_EQ(bare.host, "fe80::1");
  EXPECT_EQ(bare.port, 6379);
  EXPECT_EQ(bare.database, 3);
  EXPECT_EQ(bare.password, "p");
}

TEST(config_from_uri, tls) {
  const auto cfg = parse_ok(
      "rediss://redis.internal:6380?ca=/etc/ssl/ca.pem&cert=/etc/ssl/me.pem&key=/etc/ssl/me.key"
      "&sni=redis.example.com");
  EXPECT_TRUE(cfg.tls.enabled);
  EXPECT_EQ(cfg.host, "redis.internal");
  EXPECT_EQ(cfg.port, 6380);
  EXPECT_EQ(cfg.tls.ca_file, "/etc/ssl/ca.pem");
  EXPECT_EQ(cfg.tls.cert_file, "/etc/ssl/me.pem");
  EXPECT_EQ(cfg.tls.key_file, "/etc/ssl/me.key");
  EXPECT_EQ(cfg.tls.server_name, "redis.example.com");
}

TEST(config_from_uri, tls_without_parameters) {
  const auto cfg = parse_ok("rediss://h");
  EXPECT_TRUE(cfg.tls.enabled);
  EXPECT_TRUE(cfg.tls.ca_file.empty());
  EXPECT_TRUE(cfg.tls.server_name.empty());
}

TEST(config_from_uri, durations) {
  const auto cfg = parse_ok(
      "redis://h?timeout=250ms&connect_timeout=3s&reconnect_max=2m&reconnect_min=1500"
      "&watchdog=10s&health_check=0");
  EXPECT_EQ(cfg.command_timeout, 250ms);
  EXPECT_EQ(cfg.connect_timeout, 3s);
  EXPECT_EQ(cfg.reconnect_max, 2min);
  EXPECT_EQ(cfg.reconnect_min, 1500ms);
  EXPECT_EQ(cfg.watchdog_lease, 10s);
  EXPECT_EQ(cfg.health_check_interval, 0ms);
  EXPECT_EQ(parse_ok("redis://h?timeout=1500").command_timeout, 1500ms);
  EXPECT_EQ(parse_ok("redis://h?health_check=1h").health_check_interval, 1h);
}

TEST(config_from_uri, name) {
  EXPECT_EQ(parse_ok("redis://h?name=orders-service").client_name, "orders-service");
}

TEST(config_from_uri, wait_policy) {
  const auto off = parse_ok("redis://h");
  EXPECT_EQ(off.wait_replicas, 0u);
  EXPECT_EQ(off.wait_timeout, std::chrono::milliseconds{500});
  EXPECT_EQ(off.on_shortfall, dlock::config::shortfall_policy::fail);
  const auto on = parse_ok("redis://h?wait_replicas=2&wait_timeout=250ms&on_shortfall=accept");
  EXPECT_EQ(on.wait_replicas, 2u);
  EXPECT_EQ(on.wait_timeout, std::chrono::milliseconds{250});
  EXPECT_EQ(on.on_shortfall, dlock::config::shortfall_policy::accept);
  EXPECT_EQ(parse_ok("redis://h?on_shortfall=fail").on_shortfall,
            dlock::config::shortfall_policy::fail);
}

TEST(config_from_uri, fencing_on_by_default_off_on_request) {
  using mode = dlock::config::fencing_mode;
  EXPECT_EQ(config{}.fencing, mode::on);
  EXPECT_EQ(parse_ok("redis://h").fencing, mode::on);
  EXPECT_EQ(parse_ok("redis://h?fencing=on").fencing, mode::on);
  EXPECT_EQ(parse_ok("redis://h?fencing=off").fencing, mode::off);
  EXPECT_EQ(parse_ok("redis://h?fencing=off&fencing=on").fencing, mode::on) << "the last one wins";
}

// Settings this version removed: a URI naming them is refused, whatever the value, so that a
// deployment relying on them learns at start-up rather than running with another behaviour.
TEST(config_from_uri, removed_settings_are_refused) {
  for (std::string_view uri :
       {"redis://h?io_threads=2", "redis://h?io_threads=1", "redis://h?caller_io=off",
        "redis://h?caller_io=on", "redis://h?handoff=0", "redis://h?handoff=100ms",
        "redis://h?grant=off", "redis://h?grant=on", "redis://h?linger=0", "redis://h?linger=1s",
        "redis://h?fencing=per-lock", "redis://h?fencing=shared",
        "redis://h?timeout=1s&handoff=0&watchdog=10s"}) {
    std::error_code ec;
    std::string reason;
    const auto cfg = config::from_uri(uri, ec, reason);
    EXPECT_EQ(ec, errc::invalid_uri) << uri;
    EXPECT_FALSE(reason.empty()) << uri;
    EXPECT_EQ(cfg.host, config{}.host) << uri << ": a refused URI gives the default config";
    EXPECT_THROW(config::from_uri(uri), dlock::lock_error) << uri;
  }
}

TEST(config_from_uri, empty_parameters_are_skipped) {
  EXPECT_EQ(parse_ok("redis://h?").host, "h");
  EXPECT_EQ(parse_ok("redis://h?&timeout=5s&").command_timeout, 5s);
}

TEST(config_from_uri, error_code_is_cleared_on_success) {
  std::error_code ec = errc::timeout;
  config::from_uri("redis://h", ec);
  EXPECT_FALSE(ec);
}

TEST(config_from_uri, throwing_overload_returns_the_config) {
  const auto cfg = config::from_uri("redis://app:pw@h:7000/1?timeout=1s");
  EXPECT_EQ(cfg.host, "h");
  EXPECT_EQ(cfg.port, 7000);
  EXPECT_EQ(cfg.database, 1);
  EXPECT_EQ(cfg.command_timeout, 1s);
}

// ---------------------------------------------------------------------------------------------
// Bad URIs: each is rejected with errc::invalid_uri, a reason, and by the throwing overload.

class bad_uri : public testing::TestWithParam<std::string_view> {};

TEST_P(bad_uri, is_rejected_with_invalid_uri) {
  std::error_code ec;
  std::string reason;
  const auto cfg = config::from_uri(GetParam(), ec, reason);
  EXPECT_EQ(ec, errc::invalid_uri);
  EXPECT_FALSE(reason.empty());
  // A failed parse returns the default config, not a half-filled one.
  const config def;
  EXPECT_EQ(cfg.host, def.host);
  EXPECT_EQ(cfg.port, def.port);
  EXPECT_EQ(cfg.password, def.password);
  EXPECT_FALSE(cfg.tls.enabled);
}

TEST_P(bad_uri, error_code_overload) {
  std::error_code ec;
  config::from_uri(GetParam(), ec);
  EXPECT_EQ(ec, errc::invalid_uri);
}

TEST_P(bad_uri, throwing_overload_throws_lock_error_with_reason) {
  std::error_code ec;
  std::string reason;
  config::from_uri(GetParam(), ec, reason);
  ASSERT_FALSE(reason.empty());
  try {
    config::from_uri(GetParam());
    FAIL() << "no exception for " << GetParam();
  } catch (const dlock::lock_error& e) {
    EXPECT_EQ(e.code(), errc::invalid_uri);
    const std::string what = e.what();
    EXPECT_NE(what.find(reason), std::string::npos) << what;
  }
}

INSTANTIATE_TEST_SUITE_P(
    config, bad_uri,
    testing::Values(
        // scheme
        "http://h", "redis:/x", "", "redis//h", "redis:", "h:6379", "rediss:/h",
        // port
        "redis://h:0", "redis://h:65536", "redis://h:99999", "redis://h:abc",
        "redis://h:", "redis://h:-1", "redis://h:63 79", "redis://h:6379:7000",
        "redis://[::1]:", "redis://[::1]:0", "redis://[::1]x",
        // host
        "redis://", "redis://:6379", "redis://user:pw@:6379", "redis://u:p@", "redis://[]:6379",
        "redis:///0",
        // database
        "redis://h/x", "redis://h/-1", "redis://h/1.5", "redis://h/99999999999", "redis://h/2/3",
        // parameters
        "redis://h?foo=1", "redis://h?timeout", "redis://h?timeout=1s&bar", "redis://h?=1",
        "redis://h?name=a%20b", "redis://h?fencing=", "redis://h?fencing=yes",
        "redis://h?fencing=OFF", "redis://h?fencing=per_lock", "redis://h?fencing=shared",
        "redis://h?wait_replicas=-1", "redis://h?wait_replicas=x", "redis://h?wait_replicas=65",
        "redis://h?wait_timeout=0", "redis://h?on_shortfall=maybe",
        "redis://h?on_shortfall=", "redis://h?fencing=per-lock", "redis://h?fencing=on,off",
        // removed settings
        "redis://h?io_threads=2", "redis://h?caller_io=off", "redis://h?handoff=0",
        "redis://h?grant=off", "redis://h?linger=0",
        // durations
        "redis://h?timeout=abc", "redis://h?timeout=-5ms", "redis://h?timeout=1.5s",
        "redis://h?timeout=10parsecs", "redis://h?timeout=0", "redis://h?timeout=99999999999h",
        "redis://h?timeout=", "redis://h?connect_timeout=0ms", "redis://h?health_check=-1",
        "redis://h?reconnect_min=5s&reconnect_max=1s",
        // TLS parameters need rediss://
        "redis://h?ca=/x", "redis://h?cert=/x", "redis://h?key=/x", "redis://h?sni=x",
        "rediss://h?ca=",
        // percent-encoding
        "redis://u:%zz@h", "redis://u:%4@h", "redis://%@h", "redis://h?name=%g1",
        // credentials
        "redis://user:@h",
        // IPv6
        "redis://[::1", "redis://[::1:6379"));

}  // namespace
