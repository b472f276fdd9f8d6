#include "support/child_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "support/redis_server.hpp"

namespace dlock::test {

namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

[[noreturn]] void throw_errno(const std::string& what) {
  throw std::runtime_error(what + ": " + std::strerror(errno));
}

}  // namespace

child_process::child_process(std::vector<std::string> argv) : argv_{std::move(argv)} {
  int in[2], out[2], err[2];
  if (::pipe2(in, O_CLOEXEC) != 0) throw_errno("pipe2");
  if (::pipe2(out, O_CLOEXEC) != 0) throw_errno("pipe2");
  if (::pipe2(err, O_CLOEXEC | O_NONBLOCK) != 0) throw_errno("pipe2");
  std::vector<char*> cargv;
  for (auto& a : argv_) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ < 0) {
    const int e = errno;
    for (int fd : {in[0], in[1], out[0], out[1], err[0], err[1]}) ::close(fd);
    errno = e;
    throw_errno("fork");
  }
  if (pid_ == 0) {
    // Only async-signal-safe calls from here to exec.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(126);
    sigset_t none;
    ::sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    ::fcntl(err[1], F_SETFL, 0);  // blocking for the child
    if (::dup2(in[0], 0) < 0 || ::dup2(out[1], 1) < 0 || ::dup2(err[1], 2) < 0) ::_exit(126);
    ::syscall(SYS_close_range, 3U, ~0U, 0U);
    ::execv(cargv[0], cargv.data());
    static constexpr char msg[] = "exec failed\n";
    [[maybe_unused]] auto n = ::write(2, msg, sizeof msg - 1);
    ::_exit(127);
  }
  ::close(in[0]);
  ::close(out[1]);
  ::close(err[1]);
  stdin_ = in[1];
  stdout_ = out[0];
  stderr_ = err[0];
}

child_process::~child_process() {
  kill9();
  close_fd(stdin_);
  close_fd(stdout_);
  close_fd(stderr_);
}

// Appends what stdout has by `deadline` to out_. False once stdout is closed (EOF) or the
// deadline has passed; true when it read something or may still.
bool child_process::read_some(steady::time_point deadline) {
  if (stdout_ < 0) return false;
  const auto left = std::chrono::duration_cast<milliseconds>(deadline - steady::now());
  if (left <= 0ms) return false;
  pollfd p{stdout_, POLLIN, 0};
  const int r = ::poll(&p, 1, static_cast<int>(left.count()));
  if (r < 0 && errno == EINTR) return true;
  if (r < 0) throw_errno("poll");
  if (r == 0) return true;
  char buf[4096];
  const auto n = ::read(stdout_, buf, sizeof buf);
  if (n < 0 && errno == EINTR) return true;
  if (n <= 0) {
    close_fd(stdout_);
    return false;
  }
  out_.append(buf, static_cast<std::size_t>(n));
  return true;
}

std::optional<std::string> child_process::read_line(milliseconds limit) {
  const auto deadline = steady::now() + limit;
  for (;;) {
    if (auto nl = out_.find('\n'); nl != std::string::npos) {
      std::string line = out_.substr(0, nl);
      out_.erase(0, nl + 1);
      return line;
    }
    if (!read_some(deadline)) return std::nullopt;
  }
}

std::string child_process::read_to_eof(milliseconds limit) {
  const auto deadline = steady::now() + limit;
  while (read_some(deadline)) {
  }
  return std::exchange(out_, {});
}

std::string child_process::read_stderr() {
  for (;;) {
    char buf[4096];
    const auto n = stderr_ >= 0 ? ::read(stderr_, buf, sizeof buf) : 0;
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    err_.append(buf, static_cast<std::size_t>(n));
  }
  return err_;
}

void child_process::close_stdin() { close_fd(stdin_); }

void child_process::pause() {
  ::kill(pid_, SIGSTOP);
  wait_state(
      WUNTRACED, [](int st) { return WIFSTOPPED(st); }, "stop");
}

void child_process::resume() {
  ::kill(pid_, SIGCONT);
  wait_state(
      WCONTINUED, [](int st) { return WIFCONTINUED(st); }, "continue");
}

void child_process::kill9() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int st = 0;
  while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
}

std::optional<int> child_process::wait_exit(milliseconds limit) {
  if (pid_ <= 0) return exit_status_;
  wait_until(
      [&] {
        int st = 0;
        const pid_t r = ::waitpid(pid_, &st, WNOHANG);
        if (r != pid_) return false;
        pid_ = -1;
        exit_status_ = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        return true;
      },
      limit);
  if (pid_ > 0) return std::nullopt;
  return exit_status_;
}

std::string child_process::diagnostics() {
  read_stderr();
  std::string cmd;
  for (const auto& a : argv_) cmd += (cmd.empty() ? "" : " ") + a;
  return "[" + cmd + "] stderr: '" + err_ + "' unread stdout: '" + out_ + "'";
}

void child_process::wait_state(int flags, bool (*pred)(int), const char* what) {
  const bool ok = wait_until(
      [&] {
        int st = 0;
        if (::waitpid(pid_, &st, flags | WNOHANG) != pid_) return false;
        if (WIFEXITED(st) || WIFSIGNALED(st)) {
          // It already ran on and ended (e.g. resumed, finished its work and exited before we
          // looked): that waitpid reaped it, so keep its status for wait_exit().
          pid_ = -1;
          exit_status_ = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
          return true;
        }
        return pred(st);
      },
      5s);
  if (!ok) throw std::runtime_error(std::string{"child did not "} + what + ": " + diagnostics());
}

void child_process::close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

}  // namespace dlock::test
