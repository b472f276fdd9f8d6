// libFuzzer target: connection URIs and durations. Whatever the bytes, parsing returns a config
// or a typed error (errc::invalid_uri / invalid_argument) — never a crash, UB or a config that
// its own validate() rejects.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "dlock/config.hpp"
#include "dlock/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text{reinterpret_cast<const char*>(data), size};
  std::error_code ec;
  std::string reason;
  const auto cfg = dlock::config::from_uri(text, ec, reason);
  if (ec) {
    if (ec != dlock::errc::invalid_uri || reason.empty()) std::abort();
  } else {
    std::string why;
    if (cfg.validate(why) || cfg.port == 0 || cfg.host.empty()) std::abort();
  }
  std::error_code dec;
  const auto d = dlock::parse_duration(text, dec);
  if (dec ? dec != dlock::errc::invalid_argument : d.count() < 0) std::abort();
  return 0;
}
