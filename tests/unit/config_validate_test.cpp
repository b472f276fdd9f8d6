// dlock::parse_duration and config::validate. (config::from_uri: config_uri_test.cpp.)
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <string_view>
#include <system_error>

#include "dlock/config.hpp"
#include "dlock/error.hpp"

namespace {

using namespace std::chrono_literals;
using dlock::config;
using dlock::errc;

// ---------------------------------------------------------------------------------------------
// parse_duration

TEST(parse_duration, units) {
  std::error_code ec;
  EXPECT_EQ(dlock::parse_duration("250ms", ec), 250ms);
  EXPECT_FALSE(ec);
  EXPECT_EQ(dlock::parse_duration("30s", ec), 30s);
  EXPECT_FALSE(ec);
  EXPECT_EQ(dlock::parse_duration("2m", ec), 2min);
  EXPECT_FALSE(ec);
  EXPECT_EQ(dlock::parse_duration("2min", ec), 2min);
  EXPECT_FALSE(ec);
  EXPECT_EQ(dlock::parse_duration("1h", ec), 1h);
  EXPECT_FALSE(ec);
  EXPECT_EQ(dlock::parse_duration("1500", ec), 1500ms);
  EXPECT_FALSE(ec);
  EXPECT_EQ(dlock::parse_duration("0", ec), 0ms);
  EXPECT_FALSE(ec);
  EXPECT_EQ(dlock::parse_duration("007s", ec), 7s);
  EXPECT_FALSE(ec);
}

TEST(parse_duration, upper_bound_is_one_year) {
  std::error_code ec;
  EXPECT_EQ(dlock::parse_duration("8760h", ec), 8760h);
  EXPECT_FALSE(ec);
  dlock::parse_duration("8761h", ec);
  EXPECT_EQ(ec, errc::invalid_argument);
}

TEST(parse_duration, clears_a_previous_error) {
  std::error_code ec = errc::invalid_argument;
  EXPECT_EQ(dlock::parse_duration("5s", ec), 5s);
  EXPECT_FALSE(ec);
}

TEST(parse_duration, rejects_garbage) {
  for (std::string_view text :
       {"", "ms", "abc", "-5ms", "-1", "+5", "1.5s", "1e3", "10parsecs", "5 s", " 5s", "5s ",
        "5sec", "5S", "99999999999h", "18446744073709551616", "99999999999999999999999ms"}) {
    std::error_code ec;
    const auto d = dlock::parse_duration(text, ec);
    EXPECT_EQ(ec, errc::invalid_argument) << '"' << text << '"';
    EXPECT_EQ(d, 0ms) << '"' << text << '"';
  }
}

// ---------------------------------------------------------------------------------------------
// validate

std::error_code validate(const config& cfg) {
  std::string reason;
  auto ec = cfg.validate(reason);
  if (ec) {
    EXPECT_FALSE(reason.empty());
  }
  return ec;
}

TEST(config_validate, default_config_is_valid) {
  std::string reason;
  EXPECT_FALSE(config{}.validate(reason));
}

TEST(config_validate, empty_host) {
  config cfg;
  cfg.host.clear();
  EXPECT_EQ(validate(cfg), errc::invalid_uri);
}

TEST(config_validate, zero_port) {
  config cfg;
  cfg.port = 0;
  EXPECT_EQ(validate(cfg), errc::invalid_uri);
}

TEST(config_validate, negative_database) {
  config cfg;
  cfg.database = -1;
  EXPECT_EQ(validate(cfg), errc::invalid_uri);
}

TEST(config_validate, zero_or_negative_timeouts) {
  {
    config cfg;
    cfg.command_timeout = 0ms;
    EXPECT_EQ(validate(cfg), errc::invalid_uri);
  }
  {
    config cfg;
    cfg.command_timeout = -1ms;
    EXPECT_EQ(validate(cfg), errc::invalid_uri);
  }
  {
    config cfg;
    cfg.connect_timeout = 0ms;
    EXPECT_EQ(validate(cfg), errc::invalid_uri);
  }
  {
    config cfg;
    cfg.reconnect_min = 0ms;
    EXPECT_EQ(validate(cfg), errc::invalid_uri);
  }
  {
    config cfg;
    cfg.health_check_interval = -1ms;
    EXPECT_EQ(validate(cfg), errc::invalid_uri);
  }
}

TEST(config_validate, health_check_zero_is_off_not_invalid) {
  config cfg;
  cfg.health_check_interval = 0ms;
  EXPECT_FALSE(validate(cfg));
}

TEST(config_validate, reconnect_max_below_min) {
  config cfg;
  cfg.reconnect_min = 500ms;
  cfg.reconnect_max = 100ms;
  EXPECT_EQ(validate(cfg), errc::invalid_uri);
}

TEST(config_validate, watchdog_lease_too_short) {
  config cfg;
  cfg.watchdog_lease = 10ms;
  EXPECT_EQ(validate(cfg), errc::invalid_uri);
}

TEST(config_validate, durations_above_a_year) {
  // What a URI cannot express (parse_duration stops at a year) a struct must not carry either.
  const auto year_and_a_day = std::chrono::milliseconds{366ll * 24 * 3'600'000};
  for (auto field : {&config::watchdog_lease, &config::wait_recheck, &config::wait_timeout,
                     &config::command_timeout, &config::connect_timeout,
                     &config::health_check_interval, &config::reconnect_max}) {
    config cfg;
    cfg.*field = year_and_a_day;
    EXPECT_EQ(validate(cfg), errc::invalid_uri);
  }
}

TEST(config_validate, fencing_either_way_is_valid) {
  config cfg;
  cfg.fencing = config::fencing_mode::off;
  EXPECT_FALSE(validate(cfg));
  cfg.fencing = config::fencing_mode::on;
  EXPECT_FALSE(validate(cfg));
}

TEST(config_validate, client_name_must_be_printable_without_spaces) {
  for (std::string_view name : {"my app", "tab\there", "nl\n", "\x7f"}) {
    config cfg;
    cfg.client_name = name;
    EXPECT_EQ(validate(cfg), errc::invalid_uri) << name;
  }
  config ok;
  ok.client_name = "orders-service_1.2";
  EXPECT_FALSE(validate(ok));
  ok.client_name.clear();
  EXPECT_FALSE(validate(ok));
}

TEST(config_validate, username_needs_a_password) {
  config cfg;
  cfg.username = "app";
  EXPECT_EQ(validate(cfg), errc::invalid_uri);
  cfg.password = "pw";
  EXPECT_FALSE(validate(cfg));
  config password_only;
  password_only.password = "pw";
  EXPECT_FALSE(validate(password_only));
}

}  // namespace
