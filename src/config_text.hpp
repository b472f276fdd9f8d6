// Pieces of config::from_uri shared by its files (config.cpp: schemes, nodes, validation;
// config_params.cpp: the query parameters). Internal.
#pragma once

#include <charconv>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>

#include "dlock/config.hpp"
#include "dlock/error.hpp"

namespace dlock::detail::uri {

// One year bounds every duration: larger values are typos, and they keep deadline arithmetic
// on steady_clock far from overflow.
inline constexpr std::chrono::milliseconds max_duration{365ll * 24 * 3'600'000};

inline bool parse_uint(std::string_view s, std::uint64_t& out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc{} && p == s.data() + s.size();
}

inline int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

inline bool percent_decode(std::string_view in, std::string& out) {
  out.clear();
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out.push_back(in[i]);
      continue;
    }
    if (i + 2 >= in.size()) return false;
    const int hi = hex_value(in[i + 1]), lo = hex_value(in[i + 2]);
    if (hi < 0 || lo < 0) return false;
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return true;
}

// Holds the first failure of a parse: the code and a human-readable reason.
struct parse_state {
  std::error_code& ec;
  std::string& reason;
  bool fail(std::string why) {
    ec = errc::invalid_uri;
    reason = std::move(why);
    return false;
  }
};

// One query parameter `key=raw` (raw still percent-encoded) into cfg.
bool parse_parameter(std::string_view key, std::string_view raw, config& cfg, parse_state& st);

}  // namespace dlock::detail::uri
