// dlock exec: run a command while holding a lock, like flock(1) across hosts.
//
// The main thread waits for signals only: SIGCHLD (the command ended), SIGINT/SIGTERM/SIGHUP
// (forwarded to the command), SIGUSR2 (the lock was acquired) and SIGUSR1 (the lease was lost),
// the last two raised by dlock's I/O thread. All of them are blocked in every thread before the
// client starts, so they stay pending until sigtimedwait takes them; nothing polls.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>
#include <stop_token>
#include <thread>
#include <vector>

#include <asio/use_future.hpp>

#include "cli.hpp"

namespace dlock_cli {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

sigset_t handled_signals() {
  sigset_t s;
  sigemptyset(&s);
  for (int sig : {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2}) sigaddset(&s, sig);
  return s;
}

// Waits for one of `set` up to `limit`; 0 on timeout.
int wait_signal(const sigset_t& set, std::chrono::milliseconds limit) {
  timespec ts{static_cast<time_t>(limit.count() / 1000), static_cast<long>(limit.count() % 1000) * 1'000'000};
  for (;;) {
    int sig = sigtimedwait(&set, nullptr, &ts);
    if (sig >= 0) return sig;
    if (errno == EAGAIN) return 0;
    if (errno != EINTR) return 0;
  }
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) {
    if (!out.empty()) out += ' ';
    out += s;
  }
  return out;
}

// The argv/envp shape of `v`: pointers to its strings (which must outlive it), then nullptr.
std::vector<char*> null_terminated(const std::vector<std::string>& v) {
  std::vector<char*> out;
  out.reserve(v.size() + 1);
  for (const auto& x : v) out.push_back(const_cast<char*>(x.c_str()));
  out.push_back(nullptr);
  return out;
}

// Starts the command with the default signal mask and the lock's details in its environment.
// Returns its pid, or -errno when it could not be executed.
// This process has the client's threads: a forked child may only call async-signal-safe
// functions until it execs. One that allocates (setenv, std::to_string, building argv, as this
// did) deadlocks for good if another thread held an allocator lock at the fork — seen under
// ASan: `dlock exec` hung before its command ran, with the lock held and renewed. So everything
// the child needs is built here, before the fork; the child sets its signal mask and calls
// execvpe (PATH search and the shell fallback for a script without #!, as execvp; glibc's
// builds its paths on the stack), and reports a failure through the pipe.
pid_t start_command(const exec_options& o, std::uint64_t token) {
  std::vector<std::string> env_text;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry{*e};
    if (entry.starts_with("DLOCK_NAME=") || entry.starts_with("DLOCK_FENCING_TOKEN=")) continue;
    env_text.emplace_back(entry);
  }
  env_text.push_back("DLOCK_NAME=" + o.name);
  env_text.push_back("DLOCK_FENCING_TOKEN=" + std::to_string(token));
  auto envp = null_terminated(env_text);
  auto argv = null_terminated(o.command);
  sigset_t none;
  sigemptyset(&none);

  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return -errno;
  const pid_t pid = fork();
  if (pid < 0) {
    const int e = errno;
    close(fds[0]);
    close(fds[1]);
    return -e;
  }
  if (pid == 0) {  // async-signal-safe calls only, up to the exec
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execvpe(argv[0], argv.data(), envp.data());
    const int e = errno;
    [[maybe_unused]] auto n = write(fds[1], &e, sizeof e);
    _exit(127);
  }
  close(fds[1]);
  int e = 0;
  ssize_t n;
  do {
    n = read(fds[0], &e, sizeof e);
  } while (n < 0 && errno == EINTR);
  close(fds[0]);
  if (n == static_cast<ssize_t>(sizeof e)) {
    waitpid(pid, nullptr, 0);
    return -e;
  }
  return pid;
}

int exit_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return exit_software;
}

struct acquisition {
  std::mutex mu;
  bool done = false;
  std::error_code ec;
  dlock::lease lease;
};

// Refreshes the holder description (for `dlock status`) every ttl/3 on a thread of its own: a
// refresh waits for Redis, up to the command timeout when Redis does not answer, and the main
// thread must not, since that is exactly when the lease-lost signal comes and the command has
// to be stopped at once. Created after the signals were blocked, so it inherits the mask.
class holder_refresh {
 public:
  holder_refresh(dlock::client& c, const std::string& name, const dlock::holder& h,
                 std::chrono::milliseconds ttl)
      : thread_{[&c, name, h, ttl](std::stop_token stopping) {
          std::mutex mu;
          std::condition_variable_any cv;
          std::unique_lock lock{mu};
          // True once stop is requested (which wakes it), false after each ttl/3.
          // At most every 100 ms, however short the lease.
          const auto period = std::max<std::chrono::milliseconds>(ttl / 3, 100ms);
          while (!cv.wait_for(lock, stopping, period,
                              [&stopping] { return stopping.stop_requested(); })) {
            std::error_code ec;
            dlock::describe_holder(c, name, h, ttl, ec);  // best effort
          }
        }} {}
  // Waits for a refresh in flight (bounded by the command timeout).
  void stop() {
    if (!thread_.joinable()) return;
    thread_.request_stop();
    thread_.join();
  }

 private:
  std::jthread thread_;
};

}  // namespace

int run_exec(const global_options& g, const exec_options& o) {
  std::optional<std::chrono::milliseconds> wait, lease_time;
  std::chrono::milliseconds kill_after{};
  try {
    if (o.wait) wait = duration_arg(*o.wait, "--wait");
    if (o.lease) lease_time = duration_arg(*o.lease, "--lease");
    kill_after = duration_arg(o.kill_after, "--kill-after");
  } catch (const std::invalid_argument& e) {
    complain("exec", e.what());
    return exit_usage;
  }
  if (o.name.empty()) {
    complain("exec", "the lock name must not be empty");
    return exit_usage;
  }
  if (lease_time && lease_time->count() == 0) {
    complain("exec", "--lease must be positive");
    return exit_usage;
  }
  const sigset_t signals = handled_signals();
  sigprocmask(SIG_BLOCK, &signals, nullptr);  // before the client's threads exist: they inherit it

  dlock::client client{make_config(g)};
  dlock::mutex m{client, o.name};
  const pid_t self = getpid();
  acquisition got;
  auto on_acquired = [&got, self](std::error_code ec, dlock::lease l) {
    {
      std::lock_guard lock{got.mu};
      got.done = true;
      got.ec = ec;
      got.lease = std::move(l);
    }
    kill(self, SIGUSR2);
  };
  const auto wait_started = steady::now();
  if (!wait) {
    if (lease_time) {
      m.async_lock(*lease_time, on_acquired);
    } else {
      m.async_lock(on_acquired);
    }
  } else if (lease_time) {
    m.async_lock_for(*wait, *lease_time, on_acquired);
  } else {
    m.async_lock_for(*wait, on_acquired);
  }
  verbose(g, "waiting for " + o.name);

  for (;;) {
    const int sig = wait_signal(signals, 1h);
    if (sig == SIGUSR2) {
      std::lock_guard lock{got.mu};
      if (got.done) break;
    } else if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
      client.shutdown();  // abandons the wait; a lease acquired meanwhile is released first
      std::lock_guard lock{got.mu};
      if (got.lease.owns()) got.lease.unlock(got.ec);
      return 128 + sig;
    }
  }
  if (got.ec == dlock::errc::timeout) {
    verbose(g, o.name + " not acquired within the wait");
    return exit_tempfail;
  }
  if (got.ec) {
    complain("exec: " + o.name, got.ec);
    return exit_code_for(got.ec);
  }
  dlock::lease lease = std::move(got.lease);
  verbose(g, "acquired " + o.name + " with fencing token " + std::to_string(lease.fencing_token()) +
                 " after " +
                 std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                    steady::now() - wait_started).count()) + " ms");
  lease.on_lost([self] { kill(self, SIGUSR1); });

  const auto info_ttl = lease_time.value_or(client.cfg().watchdog_lease);
  dlock::holder me{lease.owner(), 1, host_name(), static_cast<std::int64_t>(self), join(o.command),
                   std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::system_clock::now().time_since_epoch()).count()};
  std::error_code ec;
  dlock::describe_holder(client, o.name, me, info_ttl, ec);  // best effort: only for `status`

  const pid_t child = start_command(o, lease.fencing_token());
  int code = 0;
  bool lost = false;
  if (child < 0) {
    complain("exec: " + o.command.front(), std::strerror(-child));
    code = -child == ENOENT ? exit_not_found : 126;
  } else {
    holder_refresh refresh{client, o.name, me, info_ttl};
    auto kill_at = steady::time_point::max();  // max: no SIGKILL pending
    for (;;) {
      using std::chrono::milliseconds;
      const auto limit = kill_at == steady::time_point::max()
                             ? milliseconds{1h}
                             : std::chrono::ceil<milliseconds>(kill_at - steady::now());
      const int sig = wait_signal(signals, std::max(0ms, limit));
      int status = 0;
      if (sig == SIGCHLD && waitpid(child, &status, WNOHANG) == child) {
        code = exit_status(status);
        break;
      }
      if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) kill(child, sig);
      if (sig == SIGUSR1 && !lost) {
        lost = true;
        complain("exec: " + o.name,
                 "lease lost while the command ran (the lock was taken away or could not be "
                 "renewed in time); stopping the command");
        kill(child, SIGTERM);
        kill_at = steady::now() + kill_after;
      }
      if (steady::now() >= kill_at) {
        kill(child, SIGKILL);
        kill_at = steady::time_point::max();
      }
    }
    refresh.stop();
  }
  if (lost) {
    // The command is stopped; do not keep the caller waiting on a Redis that may not answer
    // (that is often why the lease was lost). Clean up if it does, within a second; the
    // release is owner-checked, so it cannot touch a new holder's lock either way.
    std::vector<std::string> forget{"HDEL", dlock::keys::holder_info(o.name)};
    for (auto& f : dlock::holder_fields(me.owner)) forget.push_back(std::move(f));
    auto forgotten = client.async_execute(std::move(forget), asio::use_future);
    auto released = lease.async_unlock(asio::use_future);
    const auto limit = steady::now() + 1s;
    forgotten.wait_until(limit);
    released.wait_until(limit);
    return exit_software;
  }
  dlock::forget_holder(client, o.name, me.owner, ec);
  lease.unlock(ec);
  if (ec == dlock::errc::lease_lost) {
    complain("exec: " + o.name, "lease lost before the lock was released");
    return exit_software;
  }
  if (ec) complain("exec: unlock " + o.name, ec);  // the lock expires with its lease
  return code;
}

}  // namespace dlock_cli
