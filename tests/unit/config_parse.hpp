// What the config tests share: parsing a URI that must be good, or must be refused.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <system_error>

#include "dlock/config.hpp"
#include "dlock/error.hpp"

namespace dlock::test {

// Parses a URI that must be good: no error, no reason.
inline config parse_ok(std::string_view uri) {
  std::error_code ec;
  std::string reason;
  auto cfg = config::from_uri(uri, ec, reason);
  EXPECT_FALSE(ec) << uri << ": " << reason;
  EXPECT_TRUE(reason.empty()) << reason;
  return cfg;
}

// Success when `uri` is refused with dlock::errc::invalid_uri, a reason containing `why`, and the
// default config (no half-parsed node list).
inline testing::AssertionResult refused(std::string_view uri, std::string_view why) {
  std::error_code ec;
  std::string reason;
  const auto cfg = config::from_uri(uri, ec, reason);
  if (ec != dlock::errc::invalid_uri) {
    return testing::AssertionFailure()
           << uri << ": not refused as invalid_uri (" << ec.message() << ")";
  }
  if (reason.find(why) == std::string::npos) {
    return testing::AssertionFailure()
           << uri << ": reason '" << reason << "' lacks '" << why << "'";
  }
  if (cfg.cluster() || cfg.sentinel()) {
    return testing::AssertionFailure() << uri << ": nodes left in the config";
  }
  return testing::AssertionSuccess();
}

// Success when `cfg.validate` refuses with dlock::errc::invalid_uri and a reason containing `why`.
inline testing::AssertionResult invalid(const config& cfg, std::string_view why) {
  std::string reason;
  const auto ec = cfg.validate(reason);
  if (ec != dlock::errc::invalid_uri)
    return testing::AssertionFailure() << "not refused: " << reason;
  if (reason.find(why) == std::string::npos) {
    return testing::AssertionFailure() << "reason '" << reason << "' lacks '" << why << "'";
  }
  return testing::AssertionSuccess();
}

}  // namespace dlock::test
