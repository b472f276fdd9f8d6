// dlock status --metrics: the names matching a pattern, found with SCAN (status_scan.hpp).
#include "status_scan.hpp"

#include <memory>
#include <unordered_set>
#include <utility>

namespace dlock_cli {
namespace status_scan_detail {

// Keys `<prefix>:{NAME}` (keys::prefixed) that stand for NAME: its waiting acquisitions.
constexpr std::string_view name_prefixes[] = {"redisson_lock_queue:", "dlock_lock_queue:"};
// Keys `<prefix>:...` reported with their name, or not at all (the slot fencing counters).
constexpr std::string_view aux_prefixes[] = {
    "redisson_lock_timeout:", "dlock_lock_records:", "dlock_lock_info:", "redisson_lock_token:",
    "dlock_fencing:"};
// Keys `{NAME}:<suffix>` (keys::suffixed) that stand for NAME: leased permits, waiting writers.
constexpr std::string_view name_suffixes[] = {":timeout", ":dlock_writers"};
constexpr std::string_view aux_suffix = ":dlock_yield";
// `{NAME}:dlock_taken:<owner>` (counting_marker), `{NAME}:<owner>:rwlock_timeout:<n>`.
constexpr std::string_view aux_infixes[] = {":dlock_taken:", ":rwlock_timeout:"};

// The name inside a prefixed or suffixed key: `{NAME}` for a name without braces, else the name
// with its own hash tag as it is. nullopt without a brace: keys.hpp writes no such key. (A name
// `{x}` and a name `x` share every derived key; they are read as `x`.)
std::optional<std::string> untag(std::string_view tagged) {
  if (tagged.find('{') == std::string_view::npos) return std::nullopt;
  if (tagged.size() > 2 && tagged.front() == '{' && tagged.back() == '}') {
    const auto inner = tagged.substr(1, tagged.size() - 2);
    if (inner.find_first_of("{}") == std::string_view::npos) return std::string{inner};
  }
  return std::string{tagged};
}

// Prefixed forms: nullopt if `key` has none of them, else what it stands for.
std::optional<std::optional<std::string>> by_prefix(std::string_view key) {
  for (const auto p : name_prefixes) {
    if (key.starts_with(p)) return untag(key.substr(p.size()));
  }
  for (const auto p : aux_prefixes) {
    if (key.starts_with(p)) return std::optional<std::string>{};
  }
  return std::nullopt;
}

// Suffixed forms (their name part carries a brace): likewise.
std::optional<std::optional<std::string>> by_suffix(std::string_view key) {
  const auto brace = key.find('{');
  if (brace == std::string_view::npos) return std::nullopt;
  for (const auto s : name_suffixes) {
    if (key.ends_with(s)) {
      const auto base = key.substr(0, key.size() - s.size());
      if (base.find('{') != std::string_view::npos) return untag(base);
    }
  }
  const auto close = key.find('}', brace);
  if (close == std::string_view::npos) return std::nullopt;
  const auto after = key.substr(close);
  bool aux = key.ends_with(aux_suffix) && key.size() - aux_suffix.size() > close;
  for (const auto i : aux_infixes) aux = aux || after.find(i) != std::string_view::npos;
  if (aux) return std::optional<std::string>{};
  return std::nullopt;
}

// The masters to SCAN: the client's own server, or (a cluster) a client of each master, which
// `owned` keeps. Warnings were the main client's to give.
std::vector<dlock::client*> scan_targets(dlock::client& c,
                                         std::vector<std::unique_ptr<dlock::client>>& owned,
                                         std::error_code& ec) {
  if (!c.cfg().cluster()) return {&c};
  const auto nodes = c.ping_nodes(ec);
  if (ec) return {};
  std::vector<dlock::client*> out;
  for (const auto& n : nodes) {
    if (n.role != dlock::node_role::master || n.slots.empty()) continue;
    if (n.error) {
      ec = n.error;  // a master's keys would be missing: no partial view
      return {};
    }
    auto cfg = c.cfg();
    cfg.cluster_nodes.clear();
    cfg.host = n.address.host;
    cfg.port = n.address.port;
    cfg.on_warning = [](dlock::warning, std::string_view) {};
    owned.push_back(std::make_unique<dlock::client>(std::move(cfg)));
    out.push_back(owned.back().get());
  }
  return out;
}

class name_collector {
 public:
  name_collector(std::size_t limit, scan_result& out) : limit_{limit}, out_{out} {}

  // Adds the name `key` stands for; false once `limit` names are taken and another comes.
  bool add(std::string_view key) {
    ++out_.keys;
    auto name = name_of_key(key);
    if (!name || seen_.contains(*name)) return true;
    if (out_.names.size() == limit_) {
      out_.truncated = true;
      return false;
    }
    seen_.insert(*name);
    out_.names.push_back(std::move(*name));
    return true;
  }

 private:
  std::size_t limit_;
  scan_result& out_;
  std::unordered_set<std::string> seen_;  // SCAN may return a key twice
};

// One node's keyspace, cursor by cursor; false when stopped by the limit or an error.
bool scan_node(dlock::client& node, const std::string& pattern, name_collector& names,
               std::error_code& ec) {
  std::string cursor = "0";
  do {
    auto r = node.execute({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"}, ec);
    if (ec) return false;
    const auto& e = r.elements();
    if (e.size() != 2 || !e[0].is_string() || !e[1].is_array()) {
      ec = dlock::errc::protocol_error;
      return false;
    }
    cursor = e[0].str();
    for (const auto& key : e[1].elements()) {
      if (!names.add(key.str())) return false;
    }
  } while (cursor != "0");
  return true;
}

}  // namespace status_scan_detail

std::optional<std::string> name_of_key(std::string_view key) {
  using namespace status_scan_detail;
  if (auto p = by_prefix(key)) return *p;
  if (auto s = by_suffix(key)) return *s;
  return std::string{key};
}

std::string pattern_error(const std::string& pattern) {
  if (pattern.empty()) return "the pattern is empty (use '*' for every key)";
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '\\') {
      if (++i == pattern.size()) return "the pattern ends in a lone '\\' (escape it as '\\\\')";
    } else if (pattern[i] == '[') {
      std::size_t j = i + 1;
      while (j < pattern.size() && pattern[j] != ']') j += pattern[j] == '\\' ? 2u : 1u;
      if (j >= pattern.size()) return "the pattern's '[' is never closed (escape it as '\\[')";
      i = j;
    }
  }
  return {};
}

scan_result scan_names(dlock::client& c, const std::string& pattern, std::size_t limit,
                       std::error_code& ec) {
  using namespace status_scan_detail;
  ec.clear();
  scan_result out;
  std::vector<std::unique_ptr<dlock::client>> owned;
  const auto targets = scan_targets(c, owned, ec);
  name_collector names{limit, out};
  for (auto* node : targets) {
    ++out.nodes;
    if (!scan_node(*node, pattern, names, ec)) break;
  }
  return out;
}

}  // namespace dlock_cli
