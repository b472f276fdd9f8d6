// dlock exec: the command's process — starting it, signalling its process group, and job control
// on a terminal. Only exec.cpp includes this.
//
// The command runs in a process group of its own, so that dlock can signal all of it; the shell
// knows nothing of that group (its job is dlock's). So dlock does for it what a shell does for a
// job: while dlock has the terminal (it is the foreground job), the command's group has it
// instead, so that the command may read from the terminal and ^C, ^\ and ^Z reach it as they
// would without dlock. When a terminal stop (^Z; reading, or writing with `tostop`, from the
// background) stops the command, or dlock gets SIGTSTP, dlock stops as well (the command's group
// first), so that the shell sees its job stopped; once continued (fg, bg) it gives the command
// the terminal back if it has it (fg) and continues it — unless the lease ran out meanwhile.
// SIGTTOU must be blocked: a background process that sets the foreground group gets it.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "cli.hpp"

namespace dlock_cli {

// dlock's controlling terminal, or -1 (none: cron, a service, a test).
inline int open_terminal() { return open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC); }

// Gives `tty` to process group `to` if group `from` has it. Async-signal-safe.
inline void hand_over(int tty, pid_t from, pid_t to) {
  if (tty >= 0 && tcgetpgrp(tty) == from) tcsetpgrp(tty, to);
}

// Whether `sig`, which stopped the command, is a terminal's stop.
inline bool job_stop(int sig) { return sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU; }

// Stops the command's process group `group`, then dlock until it is continued; then hands the
// group the terminal if dlock has it (fg). The caller continues the group (SIGCONT).
inline void stop_with(int tty, pid_t group) {
  kill(-group, SIGSTOP);
  hand_over(tty, group, getpgrp());  // as the shell expects to find it: its job, dlock, has it
  kill(getpid(), SIGSTOP);
  hand_over(tty, getpgrp(), group);
}

// The command's process group (its pid: it leads the group) gets `sig`.
inline void signal_group(pid_t group, int sig) { kill(-group, sig); }

// A signal sent to dlock goes to the command as it would have without dlock in between: to its
// group from a terminal (`from_tty`: the kernel sent it), else to the command alone.
inline void forward(pid_t child, int sig, bool from_tty) { kill(from_tty ? -child : child, sig); }

// Whether the command stopped or ended, as `info` tells; an end is left to reap (WNOWAIT), so
// that its process group id stays reserved, a stop is taken (reported once).
inline bool changed(pid_t child, siginfo_t& info) {
  const auto id = static_cast<id_t>(child);
  info = {};
  if (waitid(P_PID, id, &info, WEXITED | WSTOPPED | WNOHANG | WNOWAIT) != 0) return false;
  if (info.si_pid != child) return false;
  if (info.si_code == CLD_STOPPED) {
    siginfo_t taken{};
    waitid(P_PID, id, &taken, WSTOPPED | WNOHANG);
  }
  return true;
}

inline int exit_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return exit_software;
}

// The argv/envp shape of `v`: pointers to its strings (which must outlive it), then nullptr.
inline std::vector<char*> null_terminated(const std::vector<std::string>& v) {
  std::vector<char*> out;
  out.reserve(v.size() + 1);
  for (const auto& x : v) out.push_back(const_cast<char*>(x.c_str()));
  out.push_back(nullptr);
  return out;
}

struct started {
  pid_t pid = -1;        // the command, leader of its own process group
  int error = 0;         // errno when it could not be executed
  bool refused = false;  // `go` said no: nothing was started
};

// Starts the command with the default signal mask, in a process group of its own (given `tty`
// if dlock has it), with the lock's details (`dlock_env`: DLOCK_NAME, DLOCK_FENCING_TOKEN(S) or
// DLOCK_PERMIT_ID, replacing any inherited) in its environment; `go` is asked right before the
// fork, whether to.
// This process has the client's threads: a forked child may only call async-signal-safe
// functions until it execs. One that allocates (setenv, std::to_string, building argv, as this
// did) deadlocks for good if another thread held an allocator lock at the fork — seen under
// ASan: `dlock exec` hung before its command ran, with the lock held and renewed. So everything
// the child needs is built here, before the fork; the child sets its process group, terminal
// and signal mask, calls execvpe (PATH search and the shell fallback for a script without #!,
// as execvp; glibc's builds its paths on the stack) and reports a failure through the pipe.
inline started start_command(const exec_options& o, const std::vector<std::string>& dlock_env,
                             int tty, const std::function<bool()>& go) {
  std::vector<std::string> env_text;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry{*e};
    if (entry.starts_with("DLOCK_NAME=") || entry.starts_with("DLOCK_FENCING_TOKEN=") ||
        entry.starts_with("DLOCK_FENCING_TOKENS=") || entry.starts_with("DLOCK_PERMIT_ID=")) {
      continue;
    }
    env_text.emplace_back(entry);
  }
  env_text.insert(env_text.end(), dlock_env.begin(), dlock_env.end());
  auto envp = null_terminated(env_text);
  auto argv = null_terminated(o.command);
  sigset_t none;
  sigemptyset(&none);
  const pid_t dlock_group = getpgrp();

  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return {.error = errno};
  if (!go()) {
    close(fds[0]);
    close(fds[1]);
    return {.refused = true};
  }
  const pid_t pid = fork();
  if (pid < 0) {
    const int e = errno;
    close(fds[0]);
    close(fds[1]);
    return {.error = e};
  }
  if (pid == 0) {  // async-signal-safe calls only, up to the exec
    setpgid(0, 0);
    hand_over(tty, dlock_group, getpid());
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execvpe(argv[0], argv.data(), envp.data());
    const int e = errno;
    [[maybe_unused]] auto n = write(fds[1], &e, sizeof e);
    _exit(127);
  }
  setpgid(pid, pid);  // as the child does: whichever runs first (EACCES once it has exec'd)
  hand_over(tty, dlock_group, pid);
  close(fds[1]);
  int e = 0;
  ssize_t n;
  do {
    n = read(fds[0], &e, sizeof e);
  } while (n < 0 && errno == EINTR);
  close(fds[0]);
  if (n == static_cast<ssize_t>(sizeof e)) {
    hand_over(tty, pid, dlock_group);
    waitpid(pid, nullptr, 0);
    return {.error = e};
  }
  return {.pid = pid};
}

}  // namespace dlock_cli
