// A child process for the integration tests, with its stdin, stdout and stderr on pipes.
//
//   dlock::test::child_process p{{"/path/to/program", "arg"}};   // execv: an absolute path
//   auto line = p.read_line(5s);           // nullopt: nothing within 5 s, or stdout closed
//   p.close_stdin();                       // EOF on its stdin
//   auto code = p.wait_exit(5s);           // exit status; -1: a signal ended it; nullopt: running
//
// Destruction kills it (SIGKILL) and reaps it, so no test leaves a process behind; the child
// also gets SIGKILL if the thread that spawned it dies, and its stdin reaches EOF if the test
// process dies. (Its own children are not tracked: tests give them bounded lifetimes.)
// Every wait is bounded. One thread at a time.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace dlock::test {

class child_process {
 public:
  // Forks and execs argv[0] (not searched in PATH). Throws std::runtime_error if the pipes or
  // the fork fail; a failed exec shows as exit status 127 with "exec failed" on its stderr.
  explicit child_process(std::vector<std::string> argv);
  ~child_process();
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  // Its PID; -1 once it was reaped.
  pid_t pid() const noexcept { return pid_; }

  // The next line of its stdout (without the newline), or nullopt if none came within `limit`
  // or stdout closed first.
  std::optional<std::string> read_line(std::chrono::milliseconds limit);
  // Everything it (and whatever inherited its stdout) writes to stdout from here until the pipe
  // closes, or until `limit` passes: what was read so far, lines not yet returned included.
  std::string read_to_eof(std::chrono::milliseconds limit);
  // Everything it wrote to stderr so far (the whole of it, not only what is new).
  std::string read_stderr();

  // Closes its stdin: the workers take EOF as "release and exit".
  void close_stdin();

  // SIGSTOP / SIGCONT, each waited for until the kernel reports the state change.
  void pause();
  void resume();

  // SIGKILL and reap (no-op once reaped).
  void kill9();

  // Waits up to `limit` for it to exit: its exit status, -1 if a signal ended it, nullopt if
  // it is still running.
  std::optional<int> wait_exit(std::chrono::milliseconds limit);

  // What it wrote to stderr so far, and its stdout not yet read: for failure messages.
  std::string diagnostics();

 private:
  bool read_some(std::chrono::steady_clock::time_point deadline);
  void wait_state(int flags, bool (*pred)(int), const char* what);
  static void close_fd(int& fd);

  std::vector<std::string> argv_;
  pid_t pid_ = -1;
  int stdin_ = -1, stdout_ = -1, stderr_ = -1;
  std::string out_, err_;
  std::optional<int> exit_status_;
};

}  // namespace dlock::test
