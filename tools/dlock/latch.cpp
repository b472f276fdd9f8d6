// dlock latch NAME set N | count-down [N] | wait [--timeout DUR] | count: a dlock::latch
// (Redisson's RCountDownLatch) from the shell.
#include <cstdio>
#include <optional>
#include <string>
#include <system_error>

#include "cli.hpp"

namespace dlock_cli {
namespace {

const char* latch_usage =
    "give NAME and one of: set N | count-down [N] | wait [--timeout DUR] | count";

struct latch_call {
  const global_options& g;
  const std::string& name;
  dlock::latch& latch;
};

// An error of a call on the latch: said on stderr; the exit code.
int failed(const latch_call& c, std::error_code ec) {
  complain("latch: " + c.name, ec);
  return exit_code_for(ec);
}

// set N: 0 if it set the count, 1 if the latch already had one.
int set_count(const latch_call& c, std::int64_t n) {
  std::error_code ec;
  if (c.latch.try_set_count(n, ec)) {
    verbose(c.g, c.name + ": count set to " + std::to_string(n));
    return 0;
  }
  if (ec) return failed(c, ec);
  const auto now = c.latch.count(ec);
  if (ec) return failed(c, ec);
  complain("latch: " + c.name,
           "it already has a count (" + std::to_string(now) +
               "): not changed (set only gives a count to a latch without one)");
  return 1;
}

int count_down(const latch_call& c, std::int64_t n) {
  std::error_code ec;
  c.latch.count_down(n, ec);
  if (ec) return failed(c, ec);
  if (c.g.verbose) {
    const auto left = c.latch.count(ec);
    if (!ec) verbose(c.g, c.name + ": count now " + std::to_string(left));
  }
  return 0;
}

// wait: 0 once open; with a timeout, 75 if still closed at its end.
int wait_open(const latch_call& c, std::optional<std::chrono::milliseconds> timeout) {
  std::error_code ec;
  if (!timeout) {
    c.latch.wait(ec);
    return ec ? failed(c, ec) : 0;
  }
  const bool open = c.latch.wait_for(*timeout, ec);
  if (ec) return failed(c, ec);
  if (!open) {
    verbose(c.g, c.name + ": still closed after " + ms_text(*timeout));
    return exit_tempfail;
  }
  return 0;
}

int print_count(const latch_call& c) {
  std::error_code ec;
  const auto n = c.latch.count(ec);
  if (ec) return failed(c, ec);
  std::printf("%lld\n", static_cast<long long>(n));
  return 0;
}

// Checks the words and options of `o`: the operation's count (1 when optional and absent), or
// nullopt after saying why on stderr.
std::optional<std::int64_t> check_latch_args(const latch_options& o,
                                             std::optional<std::chrono::milliseconds>& timeout) {
  const auto& w = o.words;
  if (w.size() < 2) {
    complain("latch",
             w.empty() ? std::string{latch_usage} : "no operation: " + std::string{latch_usage});
    return std::nullopt;
  }
  const std::string& op = w[1];
  const bool counted = op == "set" || op == "count-down";
  if (op != "set" && op != "count-down" && op != "wait" && op != "count") {
    complain("latch", "unknown operation '" + op + "': " + latch_usage);
    return std::nullopt;
  }
  if (w[0].empty()) {
    complain("latch", "the latch name must not be empty");
    return std::nullopt;
  }
  if (w.size() > (counted ? 3u : 2u) || (op == "set" && w.size() != 3)) {
    complain("latch", op == "set" ? "set takes one count: set N" : latch_usage);
    return std::nullopt;
  }
  if (o.timeout && op != "wait") {
    complain("latch", "--timeout is for wait only");
    return std::nullopt;
  }
  if (o.timeout) {
    try {
      timeout = duration_arg(*o.timeout, "--timeout");
    } catch (const std::invalid_argument& e) {
      complain("latch", e.what());
      return std::nullopt;
    }
  }
  if (w.size() == 3) return count_arg(w[2], ("latch: " + op).c_str());
  return 1;
}

}  // namespace

int run_latch(const global_options& g, const latch_options& o) {
  std::optional<std::chrono::milliseconds> timeout;
  const auto n = check_latch_args(o, timeout);
  if (!n) return exit_usage;
  const auto& name = o.words[0];
  const auto& op = o.words[1];
  dlock::client client{make_config(g)};
  dlock::latch latch{client, name};
  const latch_call c{g, name, latch};
  if (op == "set") return set_count(c, *n);
  if (op == "count-down") return count_down(c, *n);
  if (op == "wait") return wait_open(c, timeout);
  return print_count(c);
}

}  // namespace dlock_cli
