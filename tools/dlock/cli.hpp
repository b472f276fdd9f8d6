// The dlock command: shared pieces of its subcommands.
#pragma once

#include <chrono>
#include <dlock/dlock.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "exec_schedule.hpp"

namespace dlock_cli {

// Exit codes (sysexits.h where one fits).
inline constexpr int exit_held = 0, exit_free = 1;
inline constexpr int exit_usage = 64;        // EX_USAGE: bad usage or bad input
inline constexpr int exit_unavailable = 69;  // EX_UNAVAILABLE: Redis unreachable, auth, TLS
inline constexpr int exit_software = 70;     // EX_SOFTWARE: the lease was lost while CMD ran
inline constexpr int exit_tempfail = 75;     // EX_TEMPFAIL: not acquired within --wait
inline constexpr int exit_not_found = 127;   // CMD not found

struct global_options {
  std::string url;                // --url, else $DLOCK_URL, else redis://127.0.0.1:6379
  std::vector<std::string> urls;  // every --url given (several: exec over a red_lock)
  std::string user, password, ca, cert, key, sni;
  std::string timeout;  // --timeout, a duration
  bool verbose = false;
};

// The config the options describe. Throws dlock::lock_error (errc::invalid_uri, ...) with the
// reason on bad input.
dlock::config make_config(const global_options& g);

// Parses `250ms`, `30s`, `2m`; throws std::invalid_argument naming `what` on bad input.
std::chrono::milliseconds duration_arg(const std::string& text, const char* what);

// Maps an error to the exit code the command reports for it.
int exit_code_for(std::error_code ec);

// One line on stderr: "dlock: <what>: <message>".
void complain(const std::string& what, std::error_code ec);
void complain(const std::string& what, const std::string& message);

// Diagnostics on stderr with -v.
void verbose(const global_options& g, const std::string& line);

// "250 ms".
std::string ms_text(std::chrono::milliseconds d);
// This host's name ("unknown" if it has none).
std::string host_name();
// The words of `v`, separated by spaces.
std::string join(const std::vector<std::string>& v);

// The kinds of lock `dlock exec` takes: --fair, --shared (a read hold), --rw (a write hold).
enum class lock_kind { mutex, fair, read, write };

// "fair lock", "read hold of a read-write lock"...: for messages.
std::string kind_text(lock_kind kind);

// The lock of the kind asked for, as the dlock::detail::lock_base every kind is (a mutex, a
// fair_mutex, or one side of a shared_mutex), so that exec has one code path for all.
class chosen_lock {
 public:
  chosen_lock(dlock::client& c, const std::string& name, lock_kind kind);
  dlock::detail::lock_base& get() noexcept { return *side_; }

 private:
  std::variant<std::monostate, dlock::mutex, dlock::fair_mutex, dlock::shared_mutex> lock_;
  dlock::detail::lock_base* side_ = nullptr;
};

struct exec_options {
  std::optional<std::string> wait, lease;
  std::optional<std::string> kill_after;          // default: a third of the lease, at most 10s
  std::optional<std::string> permits;             // --permits N: a leased semaphore of N
  bool fair = false, shared = false, rw = false;  // at most one, and not with --permits
  std::vector<std::string> names;  // several: a multi_lock (a lock of the kind, else)
  std::string name;                // the name, or the names separated by spaces
  std::vector<std::string> command;
};
int run_exec(const global_options& g, const exec_options& o);

// exec's options, checked and read.
struct exec_args {
  lock_kind kind = lock_kind::mutex;
  std::optional<std::chrono::milliseconds> wait, lease_time;
  std::chrono::milliseconds lease{};  // --lease, else the config's watchdog lease
  exec_timing timing{};               // --kill-after (or its default) and the margin
  std::int64_t permits = 0;           // --permits N; 0: a lock
};
// Reads `o` against `cfg` into `a`; on bad usage says why on stderr and returns false.
bool check_exec_args(const exec_options& o, const dlock::config& cfg, exec_args& a);

// A count given on the command line (--permits N, latch set N): a whole number from 1 to `max`;
// nullopt (and why on stderr, for `what`) otherwise.
std::optional<std::int64_t> count_arg(const std::string& text, const char* what,
                                      std::int64_t max = 1'000'000'000);

// dlock latch NAME set N | count-down [N] | wait [--timeout DUR] | count (latch.cpp).
struct latch_options {
  std::vector<std::string> words;  // NAME, the operation, its argument
  std::optional<std::string> timeout;
};
int run_latch(const global_options& g, const latch_options& o);

// For status: `s` as a JSON string literal; `unix_ms` as ISO-8601 UTC with milliseconds.
std::string json_string(const std::string& s);
std::string iso_time(std::int64_t unix_ms);
// status of a leased semaphore or a bare counter (status_counters.cpp).
void print_counter_text(const std::string& name, const dlock::lock_status& s);
void print_counter_json(const std::string& name, const dlock::lock_status& s);

int run_status(const global_options& g, const std::string& name, bool json);

// dlock status --metrics [--match PATTERN] [--limit N] (status_metrics.cpp): every synchronizer
// whose name matches PATTERN (SCAN, never KEYS), in the Prometheus text format, on stdout.
struct metrics_options {
  std::string match = "*";      // a SCAN MATCH glob
  std::string limit = "10000";  // names read at most; checked by run_status_metrics
};
int run_status_metrics(const global_options& g, const metrics_options& o);
int run_unlock(const global_options& g, const std::string& name, bool force);
int run_ping(const global_options& g);

}  // namespace dlock_cli
