// Cluster slots of dlock's keys, and the per-slot fencing counters' names.
#include "dlock/keys.hpp"

#include <array>
#include <mutex>

namespace dlock::keys {
namespace {

std::uint16_t crc16(std::string_view s) {
  std::uint16_t crc = 0;
  for (char ch : s) {
    crc ^= static_cast<std::uint16_t>(static_cast<unsigned char>(ch) << 8);
    for (int i = 0; i < 8; ++i) {
      crc = (crc & 0x8000) ? static_cast<std::uint16_t>((crc << 1) ^ 0x1021)
                           : static_cast<std::uint16_t>(crc << 1);
    }
  }
  return crc;
}

constexpr std::size_t slots = 16384;
constexpr std::string_view alphabet = "0123456789abcdefghijklmnopqrstuvwxyz";

// For every slot, the first string over `alphabet` (shortest first, then in order) that hashes
// to it. Built once per process (under 1.7 million CRCs at worst, a few ms); deterministic, so
// every client names a slot's counter alike.
const std::array<std::string, slots>& slot_tags() {
  static const auto table = [] {
    std::array<std::string, slots> t;
    std::size_t filled = 0;
    std::string s;
    for (std::size_t len = 1; filled < slots; ++len) {
      std::size_t total = 1;
      for (std::size_t i = 0; i < len; ++i) total *= alphabet.size();
      s.assign(len, alphabet[0]);
      for (std::size_t n = 0; n < total && filled < slots; ++n) {
        std::size_t v = n;
        for (std::size_t i = len; i-- > 0;) {
          s[i] = alphabet[v % alphabet.size()];
          v /= alphabet.size();
        }
        auto& slot_tag = t[crc16(s) % slots];
        if (slot_tag.empty()) {
          slot_tag = s;
          ++filled;
        }
      }
    }
    return t;
  }();
  return table;
}

}  // namespace

std::uint16_t slot(std::string_view key) {
  const auto open = key.find('{');
  if (open != std::string_view::npos) {
    const auto close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) {
      key = key.substr(open + 1, close - open - 1);
    }
  }
  return static_cast<std::uint16_t>(crc16(key) % slots);
}

bool same_slot(std::string_view name) {
  const auto s = slot(name);
  // Prefixed names share one form, suffixed ones another: one of each stands for all.
  return slot(lock_channel(name)) == s && slot(yield_marker(name)) == s;
}

std::string slot_fencing_counter(std::uint16_t s) {
  return "dlock_fencing:{" + slot_tags()[s % slots] + "}";
}

}  // namespace dlock::keys
