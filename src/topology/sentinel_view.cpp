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

std::size_t sentinel_view::begin_round(bool doubted) {
  asked_ = 0;
  unknown_ = false;
  last_error_.clear();
  if (doubted) preferred_ = (preferred_ + 1) % sentinels_.size();
  return preferred_;
}

sentinel_view::step sentinel_view::on_reply(std::size_t asked, std::error_code ec, const reply& r) {
  ++asked_;
  if (!ec) {
    const auto m = parse_master(r);
    if (m && m->epoch >= floor_) {
      preferred_ = asked;
      return {.ask = std::nullopt, .found = m, .failed = {}};
    }
    // An older configuration (this sentinel has not heard of the failover yet) is no answer;
    // neither is a reply without the fields.
    if (!m) last_error_ = errc::protocol_error;
  } else if (r.str().find("No such master") != std::string::npos) {
    unknown_ = true;  // this sentinel monitors no master of that name
  } else {
    last_error_ = ec;
  }
  if (asked_ < sentinels_.size()) {
    return {.ask = (asked + 1) % sentinels_.size(), .found = std::nullopt, .failed = {}};
  }
  const std::error_code why = unknown_ ? std::error_code{errc::unknown_master} : last_error_;
  return {.ask = std::nullopt, .found = std::nullopt, .failed = why};
}

bool sentinel_view::adopt(const master_info& m) {
  if (m.epoch < floor_) return false;
  const bool moved = master_ && *master_ != m.at;
  master_ = m.at;
  epoch_ = m.epoch;
  floor_ = m.epoch;
  return moved;
}

bool sentinel_view::adopt_switch(const endpoint& e) {
  if (master_ == e) return false;  // heard already (every sentinel that switched says so)
  const bool moved = master_.has_value();
  master_ = e;
  floor_ = epoch_ + 1;
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

std::optional<sentinel_view::master_info> sentinel_view::parse_master(const reply& r) {
  if (!r.is_array()) return std::nullopt;
  const auto& items = r.elements();
  std::string_view ip, port, epoch;
  for (std::size_t i = 0; i + 1 < items.size(); i += 2) {
    if (!items[i].is_string() || !items[i + 1].is_string()) continue;
    const std::string_view key = items[i].str();
    if (key == "ip") ip = items[i + 1].str();
    if (key == "port") port = items[i + 1].str();
    if (key == "config-epoch") epoch = items[i + 1].str();
  }
  const auto p = parse_port(port);
  std::uint64_t e = 0;
  auto [end, ec] = std::from_chars(epoch.data(), epoch.data() + epoch.size(), e);
  if (ip.empty() || !p || epoch.empty() || ec != std::errc{} ||
      end != epoch.data() + epoch.size()) {
    return std::nullopt;
  }
  return master_info{endpoint{std::string{ip}, *p}, e};
}

}  // namespace dlock::topology
