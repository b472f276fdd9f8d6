// The `dlock` command (tools/dlock) against real redis-server processes: every exit code, the
// command's environment, signal forwarding, the lease-lost paths (lock deleted, Redis stopped,
// --kill-after), the stop before the lease's trust deadline (SIGTERM, then SIGKILL of the
// command's process group; --lease as a limit; no start without enough trust), mutual exclusion
// of concurrent `dlock exec`, `status --json`, the wake-up of a waiter by `unlock --force`, and
// `ping`.
//
// Each test starts its own server and uses its own lock names. dlock runs as a
// dlock::test::child_process (stdout and stderr on separate pipes) and is given the server with
// --url. Commands run under dlock are /bin/sh scripts with bounded lifetimes, so that none
// outlives a failed test for long; scripts that must be signalled print "ready" once their
// traps are installed. Every wait is bounded; nothing sleeps to order events.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dlock/error.hpp"
#include "dlock/keys.hpp"
#include "dlock/mutex.hpp"
#include "support/child_process.hpp"
#include "support/redis_server.hpp"
#include "support/tcp_proxy.hpp"
#include "test_util.hpp"

#ifndef DLOCK_CLI
#error "DLOCK_CLI must name the dlock executable"
#endif

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;
using dlock::test::child_process;
using dlock::test::redis_server;
using std::chrono::milliseconds;

namespace {

constexpr const char* sh = "/bin/sh";

// dlock's exit codes (tools/dlock/cli.hpp).
constexpr int exit_usage = 64, exit_unavailable = 69, exit_software = 70, exit_tempfail = 75;

milliseconds ms_since(steady::time_point t) {
  return std::chrono::duration_cast<milliseconds>(steady::now() - t);
}

std::vector<std::string> dlock_argv(std::vector<std::string> args) {
  args.insert(args.begin(), DLOCK_CLI);
  return args;
}

std::string with_query(const redis_server& srv, const std::string& query) {
  return srv.url() + "?" + query;
}

// A dlock run to completion.
struct cli_result {
  std::optional<int> code;  // nullopt: still running at the limit (then killed)
  std::string out, err;
  milliseconds took{};
};

std::string describe(const cli_result& r) {
  return "exit " + (r.code ? std::to_string(*r.code) : std::string{"(none: still running)"}) +
         " after " + std::to_string(r.took.count()) + " ms, stdout '" + r.out + "', stderr '" +
         r.err + "'";
}

cli_result run_dlock(std::vector<std::string> args, milliseconds limit = 15s) {
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
std::string script(const std::string& prologue, int seconds, const std::string& nap = "0.05") {
  const int naps = static_cast<int>(seconds / std::stod(nap));
  return prologue + " echo ready; i=0; while [ $i -lt " + std::to_string(naps) + " ]; do sleep " +
         nap + "; i=$((i+1)); done";
}

// Traps that print which signal came and exit 7.
const std::string traps =
    "trap 'echo got-TERM; exit 7' TERM; trap 'echo got-INT; exit 7' INT; "
    "trap 'echo got-HUP; exit 7' HUP;";

std::string exists(const redis_server& srv, const std::string& key) {
  return srv.command({"EXISTS", key});
}

std::size_t count_lines(const std::string& s) {
  return static_cast<std::size_t>(std::count(s.begin(), s.end(), '\n'));
}

// Lines dlock wrote on the stderr it shares with its command (a shell there may report, say,
// "Terminated" for a child killed with the command's process group).
std::size_t dlock_lines(const std::string& err) {
  std::size_t n = 0;
  std::istringstream in{err};
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("dlock: ")) ++n;
  }
  return n;
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "";
  return buf;
}

// The process group of `pid` (from /proc), or -1 when it is gone or a zombie.
pid_t process_group(pid_t pid) {
  std::ifstream in{"/proc/" + std::to_string(pid) + "/stat"};
  std::string stat;
  if (!std::getline(in, stat)) return -1;
  const auto paren = stat.rfind(')');  // the command name may hold spaces and parentheses
  if (paren == std::string::npos) return -1;
  char state = 0;
  long ppid = 0, pgrp = -1;
  std::istringstream fields{stat.substr(paren + 1)};
  fields >> state >> ppid >> pgrp;
  return state == 'Z' ? -1 : static_cast<pid_t>(pgrp);  // a zombie runs nothing
}

// The processes of group `pgid` still running (zombies excepted: they run nothing, and with no
// reaping init an orphan may stay one).
std::vector<pid_t> running_in_group(pid_t pgid) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator{"/proc", ec}) {
    const auto name = e.path().filename().string();
    pid_t pid = 0;
    const auto [end, err] = std::from_chars(name.data(), name.data() + name.size(), pid);
    if (err != std::errc{} || end != name.data() + name.size()) continue;
    if (process_group(pid) == pgid) out.push_back(pid);
  }
  return out;
}

// A command that ignores SIGTERM, as does what it started: it prints "pids <its pid> <its
// sleep's pid>", then "ready", then "got-TERM" at each SIGTERM, and keeps waiting for its
// `sleep` (which ignores SIGTERM) — only a SIGKILL to both ends it before `seconds`.
std::string stubborn_command(int seconds) {
  return "trap 'echo got-TERM' TERM; (trap '' TERM; exec sleep " + std::to_string(seconds) +
         ") & echo \"pids $$ $!\"; echo ready; while kill -0 $! 2>/dev/null; do wait $!; done";
}

// Reads stubborn_command's "pids" and "ready" lines; the shell's pid (which leads the group).
pid_t read_stubborn_pids(dlock_process& p, pid_t& sleep_pid) {
  const auto line = p->read_line(10s);
  std::istringstream in{line.value_or("")};
  std::string word;
  pid_t shell = -1;
  sleep_pid = -1;
  in >> word >> shell >> sleep_pid;
  if (word != "pids" || p->read_line(5s) != std::optional<std::string>{"ready"}) return -1;
  return shell;
}

// -- a minimal JSON reader, enough for `dlock status --json` --------------------------------------

struct json {
  enum class kind { null, boolean, number, string, array, object };
  kind type = kind::null;
  bool boolean = false;
  std::string text;  // a number as written, or a string's value
  std::vector<json> items;
  std::vector<std::pair<std::string, json>> members;  // in document order

  const json& at(const std::string& key) const {
    for (const auto& [k, v] : members) {
      if (k == key) return v;
    }
    throw std::runtime_error("no key '" + key + "'");
  }
  std::vector<std::string> keys() const {
    std::vector<std::string> out;
    for (const auto& m : members) out.push_back(m.first);
    return out;
  }
  // An integer number (no fraction or exponent); throws otherwise.
  std::int64_t integer() const {
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (type != kind::number || ec != std::errc{} || end != text.data() + text.size()) {
      throw std::runtime_error("not an integer: '" + text + "'");
    }
    return v;
  }
};

class json_reader {
 public:
  explicit json_reader(std::string_view s) : s_{s} {}

  json document() {
    json v = value();
    skip_space();
    if (i_ != s_.size()) fail("trailing characters");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("bad JSON at offset " + std::to_string(i_) + ": " + what);
  }
  void skip_space() {
    while (i_ < s_.size() && std::string_view{" \t\r\n"}.find(s_[i_]) != std::string_view::npos) {
      ++i_;
    }
  }
  char peek() {
    skip_space();
    if (i_ == s_.size()) fail("unexpected end");
    return s_[i_];
  }
  void expect(char c) {
    if (peek() != c) fail(std::string{"expected '"} + c + "'");
    ++i_;
  }
  bool literal(std::string_view word) {
    if (s_.substr(i_, word.size()) != word) return false;
    i_ += word.size();
    return true;
  }

  json value() {
    json v;
    const char c = peek();
    if (c == '{') {
      v.type = json::kind::object;
      ++i_;
      if (peek() == '}') {
        ++i_;
        return v;
      }
      for (;;) {
        if (peek() != '"') fail("expected a key");
        auto key = string();
        expect(':');
        v.members.emplace_back(std::move(key), value());
        if (peek() == ',') {
          ++i_;
          continue;
        }
        expect('}');
        return v;
      }
    }
    if (c == '[') {
      v.type = json::kind::array;
      ++i_;
      if (peek() == ']') {
        ++i_;
        return v;
      }
      for (;;) {
        v.items.push_back(value());
        if (peek() == ',') {
          ++i_;
          continue;
        }
        expect(']');
        return v;
      }
    }
    if (c == '"') {
      v.type = json::kind::string;
      v.text = string();
      return v;
    }
    if (literal("true") || literal("false")) {
      v.type = json::kind::boolean;
      v.boolean = s_[i_ - 4] == 't';
      return v;
    }
    if (literal("null")) return v;
    if (c == '-' || (c >= '0' && c <= '9')) {
      v.type = json::kind::number;
      const auto start = i_;
      constexpr std::string_view number_chars{"+-.eE0123456789"};
      while (i_ < s_.size() && number_chars.find(s_[i_]) != std::string_view::npos) ++i_;
      v.text = std::string{s_.substr(start, i_ - start)};
      return v;
    }
    fail("unexpected character");
  }

  std::string string() {
    expect('"');
    std::string out;
    for (;;) {
      if (i_ >= s_.size()) fail("unterminated string");
      const char c = s_[i_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (i_ >= s_.size()) fail("unterminated escape");
      const char e = s_[i_++];
      switch (e) {
        case '"':
          out.push_back('"');
          break;
        case '\\':
          out.push_back('\\');
          break;
        case '/':
          out.push_back('/');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'u': {
          unsigned code = 0;
          const auto hex = s_.substr(i_, 4);
          const auto [end, ec] = std::from_chars(hex.data(), hex.data() + hex.size(), code, 16);
          if (hex.size() != 4 || ec != std::errc{} || end != hex.data() + 4) fail("bad \\u");
          i_ += 4;
          if (code >= 0x80) fail("non-ASCII \\u escapes are not supported here");
          out.push_back(static_cast<char>(code));
          break;
        }
        default:
          fail("bad escape");
      }
    }
  }

  std::string_view s_;
  std::size_t i_ = 0;
};

json parse_json(const std::string& text) { return json_reader{text}.document(); }

// "2026-11-21T11:20:00.847Z" -> milliseconds since the epoch; nullopt if not that form.
std::optional<std::int64_t> parse_iso_utc(const std::string& s) {
  static const std::regex form{R"(^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{3})Z$)"};
  std::smatch m;
  if (!std::regex_match(s, m, form)) return std::nullopt;
  std::tm tm{};
  tm.tm_year = std::stoi(m[1]) - 1900;
  tm.tm_mon = std::stoi(m[2]) - 1;
  tm.tm_mday = std::stoi(m[3]);
  tm.tm_hour = std::stoi(m[4]);
  tm.tm_min = std::stoi(m[5]);
  tm.tm_sec = std::stoi(m[6]);
  return static_cast<std::int64_t>(::timegm(&tm)) * 1000 + std::stoi(m[7]);
}

std::int64_t unix_ms_now() {
  return std::chrono::duration_cast<milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// -- exit codes -----------------------------------------------------------------------------------

TEST(cli, exec_exits_with_the_commands_code_or_128_plus_its_signal) {
  redis_server srv;
  const auto name = dlock::test::unique_name("cli-code");
  struct {
    const char* script;
    int code;
  } const cases[] = {
      {"exit 0", 0},
      {"exit 3", 3},
      {"echo out; exit 42", 42},
      {"kill -TERM $$", 128 + SIGTERM},
      {"kill -KILL $$", 128 + SIGKILL},
      {"kill -INT $$", 128 + SIGINT},
  };
  std::string counter = "$-1";
  for (const auto& c : cases) {
    const auto r = run_dlock({"--url", srv.url(), "exec", name, "--", sh, "-c", c.script});
    EXPECT_EQ(r.code, std::optional<int>{c.code}) << c.script << ": " << describe(r);
    EXPECT_EQ(r.err, "") << c.script;
    EXPECT_EQ(exists(srv, name), ":0") << "released after `" << c.script << "`";
    const auto now = srv.command({"GET", dlock::keys::slot_fencing_counter_of(name)});
    EXPECT_NE(now, counter) << "one token per run";
    counter = now;
  }
}

TEST(cli, exec_exits_127_for_a_missing_command_and_126_for_one_not_executable) {
  redis_server srv;
  dlock::test::temp_dir dir;
  const auto name = dlock::test::unique_name("cli-notfound");
  for (const auto* cmd : {"dlock-test-no-such-command", "/nonexistent/dlock-test-cmd"}) {
    const auto r = run_dlock({"--url", srv.url(), "-v", "exec", name, "--", cmd, "arg"});
    EXPECT_EQ(r.code, std::optional<int>{127}) << cmd << ": " << describe(r);
    EXPECT_NE(r.err.find(cmd), std::string::npos) << "names the command: " << r.err;
    EXPECT_EQ(exists(srv, name), ":0") << "released";
  }
  const auto not_executable = dir.path() + "/not-executable";
  std::ofstream{not_executable} << "#!/bin/sh\nexit 0\n";
  ::chmod(not_executable.c_str(), 0644);
  const auto r = run_dlock({"--url", srv.url(), "exec", name, "--", not_executable});
  EXPECT_EQ(r.code, std::optional<int>{126}) << describe(r);
  EXPECT_EQ(exists(srv, name), ":0") << "released";
}

TEST(cli, bad_usage_or_input_exits_64) {
  redis_server srv;
  const auto name = dlock::test::unique_name("cli-usage");
  const auto url = srv.url();
  const std::vector<std::vector<std::string>> cases = {
      {"--url", url, "exec", "", "--", "true"},                     // empty name
      {"--url", url, "exec", "--wait", "abc", name, "--", "true"},  // bad duration
      {"--url", url, "exec", "--wait", "-1s", name, "--", "true"},
      {"--url", url, "exec", "--lease", "0", name, "--", "true"},  // lease must be > 0
      {"--url", url, "exec", "--lease", "10 parsecs", name, "--", "true"},
      {"--url", url, "exec", "--kill-after", "soon", name, "--", "true"},
      {"--url", url, "exec", "--kill-after", "11s", name, "--", "true"},  // > 30 s watchdog / 3
      {"--url", "http://x", "exec", name, "--", "true"},                  // bad URL: scheme
      {"--url", "redis://127.0.0.1:0", "exec", name, "--", "true"},       // bad URL: port 0
      {"--url", "redis://127.0.0.1:0", "ping"},
      {"--url", "http://x", "status", name},
      {"--url", url, "--timeout", "abc", "ping"},  // bad global duration
      {"--url", url, "exec", name},                // missing command
      {"--url", url, "exec", name, "--"},
      {"--url", url, "exec"},              // missing name
      {"--url", url, "frobnicate", name},  // unknown subcommand
      {"--url", url},                      // no subcommand
      {"--url", url, "unlock", name},      // unlock without --force
      {"--url", url, "status", ""},        // empty name
      {"--url", url, "exec", "--no-such-option", name, "--", "true"},
  };
  for (const auto& args : cases) {
    std::string joined;
    for (const auto& a : args) joined += " '" + a + "'";
    const auto r = run_dlock(args);
    EXPECT_EQ(r.code, std::optional<int>{exit_usage}) << "dlock" << joined << ": " << describe(r);
    EXPECT_NE(r.out + r.err, "") << "dlock" << joined << " says why";
  }
  EXPECT_EQ(srv.command({"DBSIZE"}), ":0") << "nothing was locked";
}

TEST(cli, kill_after_longer_than_a_third_of_the_lease_exits_64) {
  redis_server srv;
  const auto name = dlock::test::unique_name("cli-kill-after-usage");
  struct {
    std::vector<std::string> args;
    const char* says;
  } const cases[] = {
      {{"--url", srv.url(), "exec", "--kill-after", "10001ms", name, "--", "true"},
       "longer than a third of the watchdog lease (30000 ms)"},
      {{"--url", with_query(srv, "watchdog=600ms"), "exec", "--kill-after", "300ms", name, "--",
        "true"},
       "longer than a third of the watchdog lease (600 ms)"},
      {{"--url", srv.url(), "exec", "--lease", "3s", "--kill-after", "1001ms", name, "--", "true"},
       "longer than a third of the --lease (3000 ms)"},
      // The default --kill-after (20 ms) plus the 50 ms margin leave a 60 ms lease no time.
      {{"--url", srv.url(), "exec", "--lease", "60ms", name, "--", "true"}, "too short"},
  };
  for (const auto& c : cases) {
    const auto r = run_dlock(c.args);
    EXPECT_EQ(r.code, std::optional<int>{exit_usage}) << describe(r);
    EXPECT_EQ(count_lines(r.err), 1u) << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "") << "the command did not run";
  }
  EXPECT_EQ(srv.command({"DBSIZE"}), ":0") << "refused before anything was locked";
  // A third exactly is accepted.
  const auto r = run_dlock({"--url", srv.url(), "exec", "--lease", "3s", "--kill-after", "1s", name,
                            "--", sh, "-c", "echo ran"});
  EXPECT_EQ(r.code, std::optional<int>{0}) << describe(r);
  EXPECT_EQ(r.out, "ran\n");
}

TEST(cli, an_unreachable_redis_exits_69) {
  const auto url = "redis://127.0.0.1:" + std::to_string(dlock::test::free_port());
  const auto name = dlock::test::unique_name("cli-unreachable");
  // Concurrently: each takes the connect timeout (2 s) to give up.
  const std::vector<std::vector<std::string>> cases = {
      {"--url", url, "exec", name, "--", sh, "-c", "echo ran"},
      {"--url", url, "exec", "--wait", "0", name, "--", sh, "-c", "echo ran"},
      {"--url", url, "status", name},
      {"--url", url, "status", "--json", name},
      {"--url", url, "unlock", "--force", name},
      {"--url", url, "ping"},
  };
  const auto started = steady::now();
  std::vector<std::unique_ptr<child_process>> runs;
  for (const auto& args : cases) runs.push_back(std::make_unique<child_process>(dlock_argv(args)));
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto code = runs[i]->wait_exit(std::max(0ms, 15s - ms_since(started)));
    EXPECT_EQ(code, std::optional<int>{exit_unavailable}) << runs[i]->diagnostics();
    EXPECT_NE(runs[i]->read_stderr().find("connection refused"), std::string::npos)
        << runs[i]->diagnostics();
    EXPECT_EQ(runs[i]->read_to_eof(1s).find("ran"), std::string::npos) << "no command ran";
  }
  EXPECT_LT(ms_since(started), 10s);
}

TEST(cli, a_wrong_password_exits_69) {
  redis_server srv{{.requirepass = "s3cret"}};
  const auto name = dlock::test::unique_name("cli-auth");
  const auto port = std::to_string(srv.port());
  const std::vector<std::vector<std::string>> refused = {
      {"--url", srv.url(), "--password", "wrong", "exec", name, "--", sh, "-c", "echo ran"},
      {"--url", "redis://:wrong@127.0.0.1:" + port, "exec", name, "--", sh, "-c", "echo ran"},
      {"--url", "redis://:wrong@127.0.0.1:" + port, "status", name},
      {"--url", srv.url(), "--password", "wrong", "ping"},
      {"--url", srv.url(), "exec", name, "--", sh, "-c", "echo ran"},  // no password: NOAUTH
  };
  for (const auto& args : refused) {
    const auto r = run_dlock(args);
    EXPECT_EQ(r.code, std::optional<int>{exit_unavailable}) << describe(r);
    EXPECT_NE(r.err.find("auth"), std::string::npos) << describe(r);
    EXPECT_EQ(r.out.find("ran"), std::string::npos) << "no command ran";
  }
  // The right one works, both ways.
  auto r = run_dlock(
      {"--url", srv.url(), "--password", "s3cret", "exec", name, "--", sh, "-c", "echo ran"});
  EXPECT_EQ(r.code, std::optional<int>{0}) << describe(r);
  EXPECT_EQ(r.out, "ran\n");
  r = run_dlock({"--url", "redis://:s3cret@127.0.0.1:" + port, "ping"});
  EXPECT_EQ(r.code, std::optional<int>{0}) << describe(r);
}

TEST(cli, exec_exits_75_when_not_acquired_within_the_wait) {
  redis_server srv;
  const auto name = dlock::test::unique_name("cli-wait");
  // Held by another dlock exec.
  dlock_process holder{
      {"--url", srv.url(), "exec", name, "--", sh, "-c", "echo ready; exec sleep 30"}};
  ASSERT_EQ(holder->read_line(10s), std::optional<std::string>{"ready"}) << holder->diagnostics();

  auto r = run_dlock({"--url", srv.url(), "exec", "--wait", "0", name, "--", sh, "-c", "echo ran"});
  EXPECT_EQ(r.code, std::optional<int>{exit_tempfail}) << describe(r);
  EXPECT_EQ(r.out, "") << "the command did not run";
  EXPECT_LT(r.took, 3s) << "--wait 0 makes one attempt";

  r = run_dlock({"--url", srv.url(), "exec", "--wait", "200ms", name, "--", sh, "-c", "echo ran"});
  EXPECT_EQ(r.code, std::optional<int>{exit_tempfail}) << describe(r);
  EXPECT_EQ(r.out, "");
  EXPECT_GE(r.took, 200ms) << "waited the whole --wait";
  EXPECT_LT(r.took, 3s);

  // SIGTERM to the holder reaches `sleep`, which dies of it: 128+15, and the lock is released.
  ::kill(holder->pid(), SIGTERM);
  EXPECT_EQ(holder->wait_exit(5s), std::optional<int>{128 + SIGTERM}) << holder->diagnostics();
  EXPECT_EQ(exists(srv, name), ":0");

  // Held by a dlock::mutex in this process.
  dlock::client c{dlock::test::config_for(srv)};
  dlock::mutex m{c, name};
  m.lock();
  r = run_dlock({"--url", srv.url(), "exec", "--wait", "0", name, "--", sh, "-c", "echo ran"});
  EXPECT_EQ(r.code, std::optional<int>{exit_tempfail}) << describe(r);
  r = run_dlock({"--url", srv.url(), "exec", "--wait", "200ms", name, "--", sh, "-c", "echo ran"});
  EXPECT_EQ(r.code, std::optional<int>{exit_tempfail}) << describe(r);
  EXPECT_GE(r.took, 200ms);
  EXPECT_EQ(r.out, "");
  m.unlock();
  r = run_dlock({"--url", srv.url(), "exec", "--wait", "0", name, "--", sh, "-c", "echo ran"});
  EXPECT_EQ(r.code, std::optional<int>{0}) << "free again: " << describe(r);
  EXPECT_EQ(r.out, "ran\n");
}

// -- the command's environment --------------------------------------------------------------------

TEST(cli, the_command_sees_the_lock_name_and_its_fencing_token) {
  redis_server srv;
  const auto name = dlock::test::unique_name("cli env {x}");  // a space and a hash tag
  EXPECT_EQ(dlock::keys::fencing_counter(name), "redisson_lock_token:" + name)
      << "hash-tagged names are not braced again (RFencedLock's counter)";
  const auto counter = dlock::keys::slot_fencing_counter_of(name);
  // Tokens continue from whatever was issued before, even far ahead of the clock.
  EXPECT_EQ(srv.command({"SET", counter, "8000000000000041"}), "+OK");
  std::uint64_t last = 8000000000000041;
  // dlock's own environment reaches the command, except the two it sets: those are replaced.
  ::setenv("DLOCK_NAME", "stale", 1);
  ::setenv("DLOCK_TEST_INHERITED", "kept", 1);
  for (int i = 0; i < 3; ++i) {
    const auto r = run_dlock(
        {"--url", srv.url(), "exec", name, "--", sh, "-c",
         R"(printf '%s|%s|%s\n' "$DLOCK_TEST_INHERITED" "$DLOCK_NAME" "$DLOCK_FENCING_TOKEN")"});
    ASSERT_EQ(r.code, std::optional<int>{0}) << describe(r);
    const auto first = r.out.find('|');
    const auto bar = r.out.rfind('|');
    ASSERT_NE(bar, std::string::npos) << r.out;
    ASSERT_NE(first, bar) << r.out;
    EXPECT_EQ(r.out.substr(0, first), "kept");
    EXPECT_EQ(r.out.substr(first + 1, bar - first - 1), name);
    const auto token = std::stoull(r.out.substr(bar + 1));
    EXPECT_GT(token, last) << "strictly increasing";
    EXPECT_EQ(srv.command({"GET", counter}), std::to_string(token)) << "the token is the counter";
    last = token;
  }
  EXPECT_EQ(last, 8000000000000044u) << "counter + 1 each time, while it is ahead of the clock";
  {
    // Replaced, not added beside the inherited one (a shell reads the last of two; others the
    // first).
    const auto r = run_dlock({"--url", srv.url(), "exec", name, "--", "env"});
    ASSERT_EQ(r.code, std::optional<int>{0}) << describe(r);
    std::size_t names = 0;
    for (auto at = r.out.find("DLOCK_NAME="); at != std::string::npos;
         at = r.out.find("DLOCK_NAME=", at + 1))
      ++names;
    EXPECT_EQ(names, 1u) << r.out;
    EXPECT_EQ(r.out.find("DLOCK_NAME=stale"), std::string::npos) << r.out;
  }
  ::unsetenv("DLOCK_NAME");
  ::unsetenv("DLOCK_TEST_INHERITED");
  EXPECT_EQ(exists(srv, name), ":0");
}

// -- signals --------------------------------------------------------------------------------------

TEST(cli, sigterm_sigint_and_sighup_are_forwarded_and_the_lock_is_released) {
  redis_server srv;
  const std::vector<std::pair<int, std::string>> signals = {
      {SIGTERM, "TERM"}, {SIGINT, "INT"}, {SIGHUP, "HUP"}};
  for (const auto& [sig, sig_name] : signals) {
    const auto name = dlock::test::unique_name("cli-forward");
    dlock_process d{{"--url", srv.url(), "exec", name, "--", sh, "-c", script(traps, 30)}};
    ASSERT_EQ(d->read_line(10s), std::optional<std::string>{"ready"}) << d->diagnostics();
    EXPECT_EQ(exists(srv, name), ":1");
    ::kill(d->pid(), sig);
    EXPECT_EQ(d->read_line(5s), std::optional<std::string>{"got-" + sig_name}) << d->diagnostics();
    EXPECT_EQ(d->wait_exit(5s), std::optional<int>{7})
        << sig_name << ": the command's code; " << d->diagnostics();
    EXPECT_EQ(exists(srv, name), ":0") << "released once the command exited (" << sig_name << ")";
    EXPECT_EQ(exists(srv, dlock::keys::holder_info(name)), ":0") << "description removed";
    EXPECT_EQ(d->read_stderr(), "");
  }
}

TEST(cli, a_signal_while_waiting_ends_the_wait) {
  redis_server srv;
  const auto name = dlock::test::unique_name("cli-wait-signal");
  dlock::client c{dlock::test::config_for(srv)};
  dlock::mutex m{c, name};
  m.lock();
  dlock_process d{{"--url", srv.url(), "exec", name, "--", sh, "-c", "echo ran"}};
  const auto channel = dlock::keys::lock_channel(name);
  ASSERT_TRUE(dlock::test::wait_until([&] { return dlock::test::numsub(srv, channel) == 1; }, 10s))
      << "dlock waits, subscribed; " << d->diagnostics();
  ::kill(d->pid(), SIGTERM);
  EXPECT_EQ(d->wait_exit(5s), std::optional<int>{128 + SIGTERM}) << d->diagnostics();
  EXPECT_EQ(d->read_to_eof(1s), "") << "the command never ran";
  EXPECT_TRUE(m.is_held_by_current_thread()) << "the hold in this process is untouched";
  EXPECT_TRUE(dlock::test::wait_until([&] { return dlock::test::numsub(srv, channel) == 0; }, 5s));
  m.unlock();
}

// -- losing the lease while the command runs ------------------------------------------------------

TEST(cli, deleting_the_lock_stops_the_command_and_exits_70) {
  redis_server srv;
  const auto name = dlock::test::unique_name("cli-lost-del");
  // watchdog 600 ms: renewed every 200 ms.
  dlock_process d{{"--url", with_query(srv, "watchdog=600ms"), "exec", name, "--", sh, "-c",
                   script(traps, 30)}};
  ASSERT_EQ(d->read_line(10s), std::optional<std::string>{"ready"}) << d->diagnostics();
  const auto deleted_at = steady::now();
  EXPECT_EQ(srv.command({"DEL", name}), ":1");
  EXPECT_EQ(d->read_line(5s), std::optional<std::string>{"got-TERM"}) << d->diagnostics();
  const auto lag = ms_since(deleted_at);
  // The next renewal (<= 200 ms) finds the hold gone; the shell runs its trap after its current
  // 50 ms nap. Slop: 250 ms.
  EXPECT_LT(lag, 500ms) << "SIGTERM " << lag.count() << " ms after the DEL";
  EXPECT_EQ(d->wait_exit(5s), std::optional<int>{exit_software}) << d->diagnostics();
  const auto err = d->read_stderr();
  EXPECT_EQ(dlock_lines(err), 1u) << err;
  EXPECT_NE(err.find("lease lost"), std::string::npos) << err;
  EXPECT_EQ(exists(srv, name), ":0");
  EXPECT_EQ(exists(srv, dlock::keys::holder_info(name)), ":0") << "description removed";
}

TEST(cli, redis_stopping_stops_the_command_at_the_lease_deadline_and_exits_70) {
  redis_server srv;
  const auto name = dlock::test::unique_name("cli-lost-stop");
  dlock_process d{{"--url", with_query(srv, "watchdog=600ms&timeout=200ms"), "exec", name, "--", sh,
                   "-c", script(traps, 30, "0.02")}};
  ASSERT_EQ(d->read_line(10s), std::optional<std::string>{"ready"}) << d->diagnostics();
  srv.pause();
  const auto paused_at = steady::now();  // the server stopped before this
  const auto line = d->read_line(5s);
  const auto lag = ms_since(paused_at);
  // dlock gives up on releasing (bounded retries of 200 ms calls) and exits while Redis is still
  // stopped.
  const auto code = d->wait_exit(6s);
  const auto exited_after = ms_since(paused_at);
  srv.resume();
  ASSERT_EQ(line, std::optional<std::string>{"got-TERM"}) << d->diagnostics();
  // The last renewal confirmed before the stop was sent at most 200 ms (a renewal period)
  // before it, so dlock's deadline (that + 600 ms - 8 ms of drift) is 392 to 592 ms after the
  // stop. SIGTERM comes --kill-after (default 200 ms: a third of the lease) plus the 50 ms
  // margin before it: 142 to 342 ms after the stop, while the lease is still trusted, not when
  // it is lost. Slop 150 ms: the shell runs its trap after its current 20 ms nap; scheduling.
  EXPECT_LT(lag, 500ms) << "SIGTERM " << lag.count() << " ms after Redis stopped (lease 600 ms)";
  EXPECT_GT(lag, 120ms) << "the lease was trusted while it had more than kill-after + margin";
  EXPECT_EQ(code, std::optional<int>{exit_software}) << d->diagnostics();
  EXPECT_LT(exited_after, 6s);
  const auto err = d->read_stderr();
  EXPECT_EQ(dlock_lines(err), 1u) << err;
  EXPECT_NE(err.find("not renewed in time"), std::string::npos) << err;
  EXPECT_EQ(exists(srv, name), ":0") << "expired while Redis was stopped";
}

// Regression: the holder description for `status` used to be refreshed on dlock's signal loop,
// so while Redis did not answer, the lease-lost signal waited for that call's timeout (here 2 s)
// and the command ran on well past the lease.
TEST(cli, a_hanging_redis_call_does_not_delay_stopping_the_command) {
  redis_server srv;
  const auto name = dlock::test::unique_name("cli-lost-slow");
  dlock_process d{{"--url", with_query(srv, "watchdog=600ms&timeout=2s"), "exec", name, "--", sh,
                   "-c", script(traps, 30, "0.02")}};
  ASSERT_EQ(d->read_line(10s), std::optional<std::string>{"ready"}) << d->diagnostics();
  srv.pause();
  const auto paused_at = steady::now();
  const auto line = d->read_line(5s);
  const auto lag = ms_since(paused_at);
  srv.resume();  // the calls in flight are answered; dlock finishes
  ASSERT_EQ(line, std::optional<std::string>{"got-TERM"}) << d->diagnostics();
  EXPECT_LT(lag, 800ms) << "SIGTERM " << lag.count() << " ms after Redis stopped (lease 600 ms, "
                        << "call timeout 2 s)";
  EXPECT_EQ(d->wait_exit(15s), std::optional<int>{exit_software}) << d->diagnostics();
}

TEST(cli, a_fixed_lease_is_not_renewed_and_outliving_it_counts_as_losing_it) {
  redis_server srv;
  const auto name = dlock::test::unique_name("cli-lease");
  // Done within the lease: released at once, not left to expire.
  auto r = run_dlock({"--url", srv.url(), "exec", "--lease", "5s", name, "--", sh, "-c",
                      "echo $DLOCK_FENCING_TOKEN"});
  EXPECT_EQ(r.code, std::optional<int>{0}) << describe(r);
  EXPECT_EQ(exists(srv, name), ":0");

  const auto started = steady::now();  // before the acquire was sent
  dlock_process d{{"--url", srv.url(), "exec", "--lease", "300ms", name, "--", sh, "-c",
                   script(traps, 30, "0.02")}};
  ASSERT_EQ(d->read_line(10s), std::optional<std::string>{"ready"}) << d->diagnostics();
  const auto ready_at = steady::now();  // after the acquire was sent
  const auto pttl = std::stoll(srv.command({"PTTL", name}).substr(1));
  EXPECT_GT(pttl, 0);
  EXPECT_LE(pttl, 300) << "the fixed lease";
  EXPECT_EQ(d->read_line(5s), std::optional<std::string>{"got-TERM"}) << d->diagnostics();
  // Trusted until sent + 300 ms - 5 ms of drift; SIGTERM --kill-after (default 100 ms, a third)
  // plus the 50 ms margin before that: at sent + 145 ms, so the command is stopped before the
  // lease ends rather than after.
  EXPECT_GE(ms_since(started), 140ms) << "the lease was trusted while it had time left";
  EXPECT_LT(ms_since(ready_at), 300ms) << "SIGTERM before the lease ended";
  EXPECT_EQ(d->wait_exit(5s), std::optional<int>{exit_software}) << d->diagnostics();
  const auto err = d->read_stderr();
  EXPECT_EQ(dlock_lines(err), 1u) << err;
  EXPECT_NE(err.find("the --lease of 300 ms (a limit on the run time) ends in"), std::string::npos)
      << err;
  EXPECT_TRUE(dlock::test::wait_until([&] { return exists(srv, name) == ":0"; }, 2s));
}

TEST(cli, a_fixed_lease_sigkills_a_command_ignoring_sigterm_before_the_lease_ends) {
  redis_server srv;
  const auto name = dlock::test::unique_name("cli-lease-kill");
  dlock_process d{
      {"--url", srv.url(), "exec", "--lease", "3s", name, "--", sh, "-c", stubborn_command(15)}};
  pid_t sleep_pid = -1;
  const pid_t group = read_stubborn_pids(d, sleep_pid);
  ASSERT_GT(group, 0) << d->diagnostics();
  // Redis drops the lock at lease_end at the latest.
  const auto pttl = milliseconds{std::stoll(srv.command({"PTTL", name}).substr(1))};
  const auto lease_end = steady::now() + pttl;
  EXPECT_GT(pttl, 2500ms);
  EXPECT_EQ(process_group(group), group) << "the command leads a process group of its own";
  EXPECT_EQ(process_group(sleep_pid), group) << "and what it starts is in it";

  // dlock trusts the lease until about lease_end - 32 ms (drift); SIGTERM comes --kill-after
  // (default 1 s, a third of the lease) plus the 50 ms margin before that, SIGKILL 50 ms before.
  EXPECT_EQ(d->read_line(5s), std::optional<std::string>{"got-TERM"}) << d->diagnostics();
  const auto termed_at = steady::now();
  EXPECT_LT(termed_at, lease_end - 1000ms) << "SIGTERM at least --kill-after before the end, "
                                           << (lease_end - termed_at) / 1ms << " ms before";
  EXPECT_GT(termed_at, lease_end - 1400ms) << "not before the lease ran short";
  ASSERT_TRUE(dlock::test::wait_until([&] { return running_in_group(group).empty(); }, 5s))
      << d->diagnostics();
  const auto gone_at = steady::now();
  EXPECT_LT(gone_at, lease_end) << "the group was killed " << (gone_at - lease_end) / 1ms
                                << " ms after the lease ended";
  EXPECT_GE(gone_at - termed_at, 900ms) << "--kill-after between SIGTERM and SIGKILL";
  EXPECT_EQ(d->wait_exit(5s), std::optional<int>{exit_software}) << d->diagnostics();
  EXPECT_EQ(d->read_to_eof(1s), "") << "got one SIGTERM, and nothing after the SIGKILL";
  const auto err = d->read_stderr();
  EXPECT_EQ(dlock_lines(err), 1u) << err;
  EXPECT_NE(err.find("--lease of 3000 ms"), std::string::npos) << err;
  EXPECT_TRUE(dlock::test::wait_until([&] { return exists(srv, name) == ":0"; }, 2s));
}

// A lease with too little trust left when the command is about to start (here: every byte to
// and from Redis 200 ms late, so acquiring and describing the holder ate 800 ms of a 1 s lease)
// is given back and the command is not run.
TEST(cli, exec_does_not_start_the_command_on_a_lease_without_enough_trust_left) {
  redis_server srv;
  dlock::test::tcp_proxy proxy{srv.port()};
  proxy.delay(dlock::test::direction::both, 200ms);
  const auto url = "redis://127.0.0.1:" + std::to_string(proxy.port()) + "?connect_timeout=10s";
  const auto name = dlock::test::unique_name("cli-no-trust");
  auto r = run_dlock({"--url", url, "exec", "--lease", "1s", name, "--", sh, "-c", "echo ran"});
  EXPECT_EQ(r.code, std::optional<int>{exit_software}) << describe(r);
  EXPECT_EQ(r.out, "") << "the command did not run";
  EXPECT_EQ(count_lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("not starting the command"), std::string::npos) << r.err;
  EXPECT_TRUE(dlock::test::wait_until([&] { return exists(srv, name) == ":0"; }, 3s));
  // The same delays with a lease that has room: it runs.
  r = run_dlock({"--url", url, "exec", "--lease", "5s", name, "--", sh, "-c", "echo ran"});
  EXPECT_EQ(r.code, std::optional<int>{0}) << describe(r);
  EXPECT_EQ(r.out, "ran\n");
}

TEST(cli, a_lost_lease_sigterms_then_sigkills_the_process_group_before_the_deadline) {
  redis_server srv;
  const auto name = dlock::test::unique_name("cli-kill-after");
  // watchdog 1500 ms: renewed every 500 ms, trusted for 1483 ms after each renewal was sent.
  dlock_process d{{"--url", with_query(srv, "watchdog=1500ms"), "exec", "--kill-after", "400ms",
                   name, "--", sh, "-c", stubborn_command(15)}};
  pid_t sleep_pid = -1;
  const pid_t group = read_stubborn_pids(d, sleep_pid);
  ASSERT_GT(group, 0) << d->diagnostics();
  EXPECT_EQ(process_group(sleep_pid), group);
  // Taken away with `dlock unlock --force`; the lease was trusted until 1483 ms from now at most.
  const auto taken_at = steady::now();
  const auto u = run_dlock({"--url", srv.url(), "unlock", "--force", name});
  EXPECT_EQ(u.code, std::optional<int>{0}) << describe(u);
  // Lost at the next renewal (<= 500 ms): SIGTERM at once; ignored; SIGKILL 400 ms later.
  EXPECT_EQ(d->read_line(5s), std::optional<std::string>{"got-TERM"}) << d->diagnostics();
  const auto termed_at = steady::now();
  EXPECT_LT(termed_at - taken_at, 700ms) << "SIGTERM as soon as the loss was seen";
  ASSERT_TRUE(dlock::test::wait_until([&] { return running_in_group(group).empty(); }, 5s))
      << d->diagnostics();
  const auto gone_at = steady::now();
  EXPECT_GE(gone_at - termed_at, 350ms) << "SIGKILL only --kill-after the SIGTERM";
  EXPECT_LT(gone_at - taken_at, 1483ms - 50ms) << "dead before the old lease's trust deadline";
  EXPECT_EQ(d->wait_exit(5s), std::optional<int>{exit_software}) << d->diagnostics();
  const auto err = d->read_stderr();
  EXPECT_EQ(dlock_lines(err), 1u) << err;
  EXPECT_NE(err.find("lease lost"), std::string::npos) << err;
  EXPECT_EQ(exists(srv, name), ":0");
}

// -- mutual exclusion -----------------------------------------------------------------------------

TEST(cli, concurrent_execs_on_one_name_never_overlap) {
  constexpr int loops = 3, runs = 10;
  redis_server srv;
  dlock::test::temp_dir dir;
  const auto name = dlock::test::unique_name("cli-overlap");
  const auto file = dir.path() + "/sections";
  // Each section appends "start <token> <ns>" and "end <token> <ns>" (wall clock, one host).
  const auto section = "echo start $DLOCK_FENCING_TOKEN $(date +%s%N) >> " + file +
                       "; sleep 0.05; echo end $DLOCK_FENCING_TOKEN $(date +%s%N) >> " + file;
  std::string loop = "for i in";
  for (int i = 1; i <= runs; ++i) loop += " " + std::to_string(i);
  loop += R"(; do "$0" --url "$1" exec "$2" -- /bin/sh -c "$3" || exit $?; done)";
  const auto started = steady::now();
  std::vector<std::unique_ptr<child_process>> shells;
  for (int i = 0; i < loops; ++i) {
    shells.push_back(std::make_unique<child_process>(
        std::vector<std::string>{sh, "-c", loop, DLOCK_CLI, srv.url(), name, section}));
  }
  for (auto& s : shells) {
    EXPECT_EQ(s->wait_exit(std::max(0ms, 40s - ms_since(started))), std::optional<int>{0})
        << s->diagnostics();
  }

  struct interval {
    std::int64_t start = -1, end = -1;
  };
  std::map<std::uint64_t, interval> by_token;
  std::ifstream in{file};
  std::string what;
  std::uint64_t token = 0;
  std::int64_t ns = 0;
  while (in >> what >> token >> ns) {
    auto& iv = by_token[token];
    (what == "start" ? iv.start : iv.end) = ns;
  }
  ASSERT_EQ(by_token.size(), std::size_t{loops * runs}) << "one token per section";
  std::vector<std::pair<interval, std::uint64_t>> sections;
  for (const auto& [t, iv] : by_token) {
    ASSERT_GE(iv.start, 0) << "token " << t;
    ASSERT_GT(iv.end, iv.start) << "token " << t;
    sections.emplace_back(iv, t);
  }
  std::sort(sections.begin(), sections.end(),
            [](const auto& a, const auto& b) { return a.first.start < b.first.start; });
  for (std::size_t i = 1; i < sections.size(); ++i) {
    EXPECT_LE(sections[i - 1].first.end, sections[i].first.start)
        << "sections with tokens " << sections[i - 1].second << " and " << sections[i].second
        << " overlap";
    EXPECT_LT(sections[i - 1].second, sections[i].second) << "tokens increase in lock order";
  }
  EXPECT_EQ(srv.command({"GET", dlock::keys::slot_fencing_counter_of(name)}),
            std::to_string(sections.back().second))
      << "the last token issued";
  EXPECT_EQ(exists(srv, name), ":0");
}

// -- status ---------------------------------------------------------------------------------------

TEST(cli, status_json_and_text_while_held_and_while_free) {
  redis_server srv;
  const auto name = dlock::test::unique_name("cli-status");
  const std::vector<std::string> top_keys = {
      "name", "held", "holders", "remaining_lease_ms", "fencing_counter", "queued", "subscribers"};

  // Never used.
  auto r = run_dlock({"--url", srv.url(), "status", "--json", name});
  EXPECT_EQ(r.code, std::optional<int>{1}) << describe(r);
  EXPECT_EQ(count_lines(r.out), 1u) << "one line";
  {
    const auto j = parse_json(r.out);
    EXPECT_EQ(j.keys(), top_keys);
    EXPECT_EQ(j.at("name").text, name);
    EXPECT_EQ(j.at("held").type, json::kind::boolean);
    EXPECT_FALSE(j.at("held").boolean);
    EXPECT_EQ(j.at("holders").type, json::kind::array);
    EXPECT_TRUE(j.at("holders").items.empty());
    EXPECT_EQ(j.at("remaining_lease_ms").integer(), 0);
    EXPECT_EQ(j.at("fencing_counter").integer(), 0);
    EXPECT_EQ(j.at("queued").integer(), 0);
    EXPECT_EQ(j.at("subscribers").integer(), 0);
  }

  // Held by a dlock exec, with one more waiting (queued by its attempt, then subscribed).
  const std::string cmd = "echo ready $DLOCK_FENCING_TOKEN; exec sleep 30";
  const auto before_ms = unix_ms_now();
  // -v: its progress on stderr, in the diagnostics should it not become ready.
  dlock_process holder{{"--url", srv.url(), "-v", "exec", name, "--", sh, "-c", cmd}};
  const auto ready = holder->read_line(10s);
  ASSERT_TRUE(ready && ready->rfind("ready ", 0) == 0) << holder->diagnostics();
  const auto token = ready->substr(6);
  dlock_process waiter{{"--url", srv.url(), "exec", name, "--", sh, "-c", "echo waiter-ran"}};
  const auto channel = dlock::keys::lock_channel(name);
  ASSERT_TRUE(dlock::test::wait_until([&] { return dlock::test::numsub(srv, channel) == 1; }, 10s))
      << waiter->diagnostics();

  r = run_dlock({"--url", srv.url(), "status", "--json", name});
  const auto after_ms = unix_ms_now();
  EXPECT_EQ(r.code, std::optional<int>{0}) << describe(r);
  EXPECT_EQ(count_lines(r.out), 1u) << "one line";
  EXPECT_EQ(r.out.back(), '\n');
  const auto fields = srv.command({"HGETALL", name});  // "[<owner>, 1]"
  ASSERT_TRUE(fields.size() > 5 && fields.substr(fields.size() - 4) == ", 1]") << fields;
  const auto owner = fields.substr(1, fields.size() - 5);
  {
    const auto j = parse_json(r.out);
    EXPECT_EQ(j.keys(), top_keys);
    EXPECT_EQ(j.at("name").text, name);
    EXPECT_TRUE(j.at("held").boolean);
    ASSERT_EQ(j.at("holders").items.size(), 1u) << r.out;
    const auto& h = j.at("holders").items[0];
    EXPECT_EQ(h.keys(), (std::vector<std::string>{"owner", "count", "host", "pid", "command",
                                                  "acquired_at"}));
    EXPECT_EQ(h.at("owner").text, owner);
    EXPECT_EQ(h.at("count").integer(), 1);
    EXPECT_EQ(h.at("host").text, host_name());
    EXPECT_EQ(h.at("pid").integer(), holder->pid()) << "the dlock process";
    EXPECT_EQ(h.at("command").text, std::string{sh} + " -c " + cmd);
    const auto acquired = parse_iso_utc(h.at("acquired_at").text);
    ASSERT_TRUE(acquired) << "ISO-8601 UTC with milliseconds: " << h.at("acquired_at").text;
    EXPECT_GE(*acquired, before_ms - 1000);
    EXPECT_LE(*acquired, after_ms + 1000);
    EXPECT_GT(j.at("remaining_lease_ms").integer(), 0);
    EXPECT_LE(j.at("remaining_lease_ms").integer(), 30000) << "the 30 s watchdog lease";
    EXPECT_EQ(j.at("fencing_counter").text, token) << "the holder's token";
    EXPECT_EQ(j.at("queued").integer(), 1) << "the waiting dlock";
    EXPECT_EQ(j.at("subscribers").integer(), 1) << "the waiting dlock";
  }
  r = run_dlock({"--url", srv.url(), "status", name});
  EXPECT_EQ(r.code, std::optional<int>{0}) << describe(r);
  EXPECT_EQ(r.out.rfind(name + ": held\n", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("holder " + owner + " (count 1)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("host " + host_name() + ", pid " + std::to_string(holder->pid())),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("fencing counter: " + token + "\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("dlock waiters queued: 1\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("waiting subscribers: 1\n"), std::string::npos) << r.out;

  // Released: the waiter runs (taking the next token) and exits.
  ::kill(holder->pid(), SIGTERM);
  EXPECT_EQ(holder->wait_exit(5s), std::optional<int>{128 + SIGTERM}) << holder->diagnostics();
  EXPECT_EQ(waiter->read_line(5s), std::optional<std::string>{"waiter-ran"})
      << waiter->diagnostics();
  EXPECT_EQ(waiter->wait_exit(5s), std::optional<int>{0}) << waiter->diagnostics();

  r = run_dlock({"--url", srv.url(), "status", "--json", name});
  EXPECT_EQ(r.code, std::optional<int>{1}) << describe(r);
  {
    const auto j = parse_json(r.out);
    EXPECT_EQ(j.keys(), top_keys);
    EXPECT_FALSE(j.at("held").boolean);
    EXPECT_TRUE(j.at("holders").items.empty());
    EXPECT_EQ(j.at("remaining_lease_ms").integer(), 0);
    EXPECT_GT(std::stoull(j.at("fencing_counter").text), std::stoull(token))
        << "the last token issued (the waiter's) stays";
    EXPECT_EQ(j.at("queued").integer(), 0) << "the waiter left the queue with the hold";
    EXPECT_EQ(j.at("subscribers").integer(), 0);
  }
  r = run_dlock({"--url", srv.url(), "status", name});
  EXPECT_EQ(r.code, std::optional<int>{1}) << describe(r);
  EXPECT_EQ(r.out.rfind(name + ": free\n", 0), 0u) << r.out;
  EXPECT_EQ(r.out.find("dlock waiters queued"), std::string::npos) << "none: " << r.out;

  // Held twice by a dlock::mutex, which does not describe itself: owner and count only.
  dlock::client c{dlock::test::config_for(srv)};
  dlock::mutex m{c, name};
  m.lock();
  m.lock();
  r = run_dlock({"--url", srv.url(), "status", "--json", name});
  EXPECT_EQ(r.code, std::optional<int>{0}) << describe(r);
  {
    const auto j = parse_json(r.out);
    EXPECT_EQ(j.keys(), top_keys);
    ASSERT_EQ(j.at("holders").items.size(), 1u) << r.out;
    const auto& h = j.at("holders").items[0];
    EXPECT_EQ(h.keys(), (std::vector<std::string>{"owner", "count"}));
    EXPECT_EQ(srv.command({"HGETALL", name}), "[" + h.at("owner").text + ", 2]");
    EXPECT_EQ(h.at("count").integer(), 2) << "reentrant holds";
  }
  m.unlock();
  m.unlock();

  // Handed to a queued waiter whose attempt has not come yet (as mutex_release.lua leaves it:
  // the waiter's owner field at 1, its record `g <token>`), with two more dlock waiters queued:
  // held by that owner, and the two counted.
  const auto queue = dlock::keys::waiter_queue(name);
  const auto records = dlock::keys::waiter_records(name);
  srv.command({"HSET", name, "0b9f4a2c-5d1e-4f3a-9c7b-2e8d6f1a3b5c:7", "1"});
  srv.command({"PEXPIRE", name, "60000"});
  srv.command({"HSET", records, "4294967297", "g 12"});
  srv.command({"ZADD", queue, "1700000000000001", "4294967298", "1700000000000002", "4294967299"});
  r = run_dlock({"--url", srv.url(), "status", "--json", name});
  EXPECT_EQ(r.code, std::optional<int>{0}) << describe(r);
  {
    const auto j = parse_json(r.out);
    EXPECT_EQ(j.keys(), top_keys);
    EXPECT_TRUE(j.at("held").boolean);
    ASSERT_EQ(j.at("holders").items.size(), 1u) << r.out;
    EXPECT_EQ(j.at("holders").items[0].at("owner").text, "0b9f4a2c-5d1e-4f3a-9c7b-2e8d6f1a3b5c:7");
    EXPECT_EQ(j.at("holders").items[0].at("count").integer(), 1);
    EXPECT_GT(j.at("remaining_lease_ms").integer(), 50000);
    EXPECT_EQ(j.at("queued").integer(), 2);
  }
  r = run_dlock({"--url", srv.url(), "status", name});
  EXPECT_EQ(r.code, std::optional<int>{0}) << describe(r);
  EXPECT_EQ(r.out.rfind(name + ": held\n", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("holder 0b9f4a2c-5d1e-4f3a-9c7b-2e8d6f1a3b5c:7 (count 1)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("dlock waiters queued: 2\n"), std::string::npos) << r.out;
  srv.command({"DEL", queue, records});
  srv.command({"DEL", name});
}

// -- unlock --force -------------------------------------------------------------------------------

TEST(cli, unlock_force_wakes_a_waiting_exec_at_once) {
  redis_server srv;
  const auto name = dlock::test::unique_name("cli-force");
  dlock::client c{dlock::test::config_for(srv)};  // watchdog lease 30 s, waiter recheck 3 s
  dlock::mutex m{c, name};
  m.lock();
  dlock_process waiter{
      {"--url", srv.url(), "exec", name, "--", sh, "-c", "echo acquired $(date +%s%N)"}};
  const auto channel = dlock::keys::lock_channel(name);
  ASSERT_TRUE(dlock::test::wait_until([&] { return dlock::test::numsub(srv, channel) == 1; }, 10s))
      << "the waiter subscribed; " << waiter->diagnostics();

  const auto wall_before = std::chrono::system_clock::now();
  const auto r = run_dlock({"--url", srv.url(), "unlock", "--force", name});
  const auto unlocked_at = steady::now();
  const auto wall_after = std::chrono::system_clock::now();
  EXPECT_EQ(r.code, std::optional<int>{0}) << "it was held: " << describe(r);
  const auto line = waiter->read_line(5s);
  const auto lag = ms_since(unlocked_at);
  ASSERT_TRUE(line && line->rfind("acquired ", 0) == 0) << waiter->diagnostics();
  // Woken by the unlock message: the lease had ~30 s left and the re-check is 3 s. Slop 200 ms
  // (dlock acquires, describes itself and starts the shell).
  EXPECT_LT(lag, 200ms) << "acquired " << lag.count() << " ms after unlock --force returned";
  const auto printed = std::chrono::system_clock::time_point{
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::nanoseconds{std::stoll(line->substr(9))})};
  EXPECT_GT(printed, wall_before) << "only after the force unlock";
  EXPECT_LT(printed, wall_after + 200ms);
  EXPECT_EQ(waiter->wait_exit(5s), std::optional<int>{0}) << waiter->diagnostics();

  const auto again = run_dlock({"--url", srv.url(), "unlock", "--force", name});
  EXPECT_EQ(again.code, std::optional<int>{1}) << "it was free: " << describe(again);

  // The hold this process had was taken away: its unlock says so and touches nothing.
  std::error_code ec;
  m.unlock(ec);
  EXPECT_EQ(ec, dlock::errc::lease_lost) << ec.message();
  EXPECT_EQ(exists(srv, name), ":0");
}

// -- ping -----------------------------------------------------------------------------------------

TEST(cli, ping_prints_version_and_role) {
  redis_server srv;
  child_process p{dlock_argv({"--url", srv.url(), "ping"})};
  const auto out = p.read_to_eof(10s);
  EXPECT_EQ(p.wait_exit(10s), std::optional<int>{0}) << p.diagnostics();
  EXPECT_TRUE(std::regex_search(out, std::regex{R"((^|\n)redis_version: \d+\.\d+\.\d+\n)"})) << out;
  EXPECT_NE(out.find("\nrole: master\n"), std::string::npos) << out;
  EXPECT_NE(out.find("\nmaxmemory-policy: noeviction\n"), std::string::npos) << out;
  EXPECT_EQ(p.read_stderr(), "") << "no warning for noeviction";
}

TEST(cli, ping_warns_about_a_policy_that_evicts_lock_keys) {
  redis_server srv{{.extra_args = {"--maxmemory-policy", "allkeys-lru"}}};
  child_process p{dlock_argv({"--url", srv.url(), "ping"})};
  const auto out = p.read_to_eof(10s);
  EXPECT_EQ(p.wait_exit(10s), std::optional<int>{0})
      << "a warning, not an error; " << p.diagnostics();
  EXPECT_NE(out.find("redis_version: "), std::string::npos) << out;
  EXPECT_NE(out.find("\nmaxmemory-policy: allkeys-lru\n"), std::string::npos) << out;
  const auto err = p.read_stderr();
  EXPECT_NE(err.find("warning"), std::string::npos) << err;
  EXPECT_NE(err.find("maxmemory-policy allkeys-lru"), std::string::npos) << err;
  EXPECT_NE(err.find("evict"), std::string::npos) << err;
}

}  // namespace
