// dlock status --metrics: finding the synchronizer names that match a pattern, with SCAN (never
// KEYS, which blocks the server while it walks every key), on every master of a Redis Cluster.
#pragma once

#include <cstddef>
#include <cstdint>
#include <dlock/dlock.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace dlock_cli {

// The synchronizer name a key found by SCAN stands for: the key itself (a lock hash, a counter,
// or any key of the user's), the name whose queue or leased permits it is
// (`redisson_lock_queue:{NAME}`, `dlock_lock_queue:{NAME}`, `{NAME}:timeout`,
// `{NAME}:dlock_writers`), or nullopt for the other keys dlock and Redisson keep beside a name
// (keys.hpp: fair deadlines, waiter records, holder descriptions, fencing counters, yield and
// taken markers, read holds' lease keys), which are reported with their name. A user key named
// like one of those is taken for it.
std::optional<std::string> name_of_key(std::string_view key);

// Why `pattern` is not a usable SCAN MATCH glob (empty, a `[` never closed, a trailing lone
// `\`), or "" if it is.
std::string pattern_error(const std::string& pattern);

struct scan_result {
  std::vector<std::string> names;  // each once, in the order found
  std::int64_t keys = 0;           // keys SCAN returned (matching the pattern)
  std::size_t nodes = 0;           // servers scanned: 1, or every master of a cluster
  bool truncated = false;          // `limit` names were found before the scan ended
};

// SCAN MATCH `pattern` over the server `c` uses (in a cluster, every master, each on a connection
// of its own: SCAN's cursor belongs to one node), the keys mapped by name_of_key, stopping at
// `limit` names. Errors: the connection's (a cluster master that cannot be reached included),
// errc::protocol_error for a reply that is not SCAN's.
scan_result scan_names(dlock::client& c, const std::string& pattern, std::size_t limit,
                       std::error_code& ec);

}  // namespace dlock_cli
