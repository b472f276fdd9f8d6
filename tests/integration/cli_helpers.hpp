// Shared by the tests of the `dlock` command (cli_*_test.cpp), which run it against real
// redis-server processes.
//
// Each test starts its own server and uses its own lock names. dlock runs as a
// dlock::test::child_process (stdout and stderr on separate pipes) and is given the server with
// --url. Commands run under dlock are /bin/sh scripts with bounded lifetimes, so that none
// outlives a failed test for long; scripts that must be signalled print "ready" once their
// traps are installed. Every wait is bounded; nothing sleeps to order events.
#pragma once

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "support/child_process.hpp"
#include "support/redis_server.hpp"

#ifndef DLOCK_CLI
#error "DLOCK_CLI must name the dlock executable"
#endif

namespace dlock::test::cli {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

inline constexpr const char* sh = "/bin/sh";

// dlock's exit codes (tools/dlock/cli.hpp).
inline constexpr int exit_usage = 64, exit_unavailable = 69, exit_software = 70, exit_tempfail = 75;

inline milliseconds ms_since(steady::time_point t) {
  return std::chrono::duration_cast<milliseconds>(steady::now() - t);
}

inline std::vector<std::string> dlock_argv(std::vector<std::string> args) {
  args.insert(args.begin(), DLOCK_CLI);
  return args;
}

inline std::string with_query(const redis_server& srv, const std::string& query) {
  return srv.url() + "?" + query;
}

// A dlock run to completion.
struct cli_result {
  std::optional<int> code;  // nullopt: still running at the limit (then killed)
  std::string out, err;
  milliseconds took{};
};

inline std::string describe(const cli_result& r) {
  return "exit " + (r.code ? std::to_string(*r.code) : std::string{"(none: still running)"}) +
         " after " + std::to_string(r.took.count()) + " ms, stdout '" + r.out + "', stderr '" +
         r.err + "'";
}

inline cli_result run_dlock(std::vector<std::string> args, milliseconds limit = 15s) {
  const auto started = steady::now();
  child_process p{dlock_argv(std::move(args))};
  cli_result r;
  r.out = p.read_to_eof(limit);
  r.code = p.wait_exit(std::max(0ms, limit - ms_since(started)));
  r.took = ms_since(started);
  r.err = p.read_stderr();
  return r;
}

// A dlock left running. On scope exit it gets SIGTERM (which it forwards to its command) and a
// bounded wait before child_process's SIGKILL, so its command does not outlive the test.
class dlock_process {
 public:
  explicit dlock_process(std::vector<std::string> args) : p_{dlock_argv(std::move(args))} {}
  ~dlock_process() {
    if (p_.pid() > 0) {
      ::kill(p_.pid(), SIGTERM);
      p_.wait_exit(3s);
    }
  }
  dlock_process(const dlock_process&) = delete;
  dlock_process& operator=(const dlock_process&) = delete;
  child_process* operator->() { return &p_; }

 private:
  child_process p_;
};

// A shell script: `prologue`, then "ready", then naps of `nap` seconds for at most about
// `seconds` seconds.
inline std::string script(const std::string& prologue, int seconds,
                          const std::string& nap = "0.05") {
  const int naps = static_cast<int>(seconds / std::stod(nap));
  return prologue + " echo ready; i=0; while [ $i -lt " + std::to_string(naps) + " ]; do sleep " +
         nap + "; i=$((i+1)); done";
}

// Traps that print which signal came and exit 7.
inline const std::string traps =
    "trap 'echo got-TERM; exit 7' TERM; trap 'echo got-INT; exit 7' INT; "
    "trap 'echo got-HUP; exit 7' HUP;";

inline std::string exists(const redis_server& srv, const std::string& key) {
  return srv.command({"EXISTS", key});
}

inline std::size_t count_lines(const std::string& s) {
  return static_cast<std::size_t>(std::count(s.begin(), s.end(), '\n'));
}

// Lines dlock wrote on the stderr it shares with its command (a shell there may report, say,
// "Terminated" for a child killed with the command's process group).
inline std::size_t dlock_lines(const std::string& err) {
  std::size_t n = 0;
  std::istringstream in{err};
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("dlock: ")) ++n;
  }
  return n;
}

}  // namespace dlock::test::cli
