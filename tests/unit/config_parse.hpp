// What the config tests share: parsing a URI that must be good.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <system_error>

#include "dlock/config.hpp"

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

}  // namespace dlock::test
