#include "topology/sentinel_view.hpp"

#include <charconv>
#include <utility>

#include "dlock/error.hpp"

namespace dlock::topology {
namespace {

std::optional<std::uint16_t> parse_port(std::string_view s) {
  unsigned v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || p != s.data() + s.size() || v == 0 || v > 65535) return std::nullopt;
  return static_cast<std::uint16_t>(v);
}

}  // namespace

sentinel_view::sentinel_view(std::vector<endpoint> sentinels, std::string master)
    : sentinels_{std::move(sentinels)}, name_{std::move(master)} {}

std::size_t sentinel_view::begin_round() {
  asked_ = 0;
  unknown_ = false;
  last_error_.clear();
  return preferred_;
}

sentinel_view::step sentinel_view::on_reply(std::size_t asked, std::error_code ec, const reply& r) {
  ++asked_;
  if (!ec) {
    if (auto at = parse_address(r)) {
      preferred_ = asked;
      return {.ask = std::nullopt, .found = std::move(at), .failed = {}};
    }
    // A nil reply: this sentinel monitors no master of that name. Anything else is not an
    // answer either.
    if (r.is_nil()) {
      unknown_ = true;
    } else {
      last_error_ = errc::protocol_error;
    }
  } else {
    last_error_ = ec;
  }
  if (asked_ < sentinels_.size()) {
    return {.ask = (asked + 1) % sentinels_.size(), .found = std::nullopt, .failed = {}};
  }
  const std::error_code why = unknown_ ? std::error_code{errc::unknown_master} : last_error_;
  return {.ask = std::nullopt, .found = std::nullopt, .failed = why};
}

bool sentinel_view::adopt(const endpoint& e) {
  const bool moved = master_ && *master_ != e;
  master_ = e;
  return moved;
}

std::optional<endpoint> sentinel_view::switched(std::string_view payload) const {
  std::vector<std::string_view> words;
  while (!payload.empty()) {
    const auto space = payload.find(' ');
    if (space != 0) words.push_back(payload.substr(0, space));
    if (space == std::string_view::npos) break;
    payload.remove_prefix(space + 1);
  }
  if (words.size() != 5 || words[0] != name_) return std::nullopt;
  const auto port = parse_port(words[4]);
  if (!port || words[3].empty()) return std::nullopt;
  return endpoint{std::string{words[3]}, *port};
}

std::optional<endpoint> sentinel_view::parse_address(const reply& r) {
  if (!r.is_array() || r.elements().size() != 2) return std::nullopt;
  const auto& host = r.elements()[0];
  const auto& port = r.elements()[1];
  if (!host.is_string() || !port.is_string() || host.str().empty()) return std::nullopt;
  const auto p = parse_port(port.str());
  if (!p) return std::nullopt;
  return endpoint{std::string{host.str()}, *p};
}

}  // namespace dlock::topology
