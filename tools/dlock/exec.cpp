// dlock exec: run a command while holding a lock, like flock(1) across hosts.
//
// The main thread waits for signals only: SIGCHLD (the command ended or stopped),
// SIGINT/SIGTERM/SIGHUP/SIGQUIT (forwarded to the command), SIGTSTP (stop, with the command),
// SIGUSR2 (the lock was acquired) and SIGUSR1 (the lease was lost), the last two raised by
// dlock's I/O thread. All of them (and SIGTTOU: see exec_process.hpp) are blocked in every thread
// before the client starts, so they stay pending until sigtimedwait takes them. It also wakes
// when the lease's trust deadline calls for a signal to the command's process group
// (exec_schedule.hpp): nothing the command started may run once the lease is not trusted.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "cli.hpp"
#include "exec_hold.hpp"
#include "exec_process.hpp"

namespace dlock_cli {

using namespace std::chrono_literals;
using std::chrono::milliseconds;
using steady = std::chrono::steady_clock;

sigset_t handled_signals() {
  sigset_t s;
  sigemptyset(&s);
  for (int sig : {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGTSTP, SIGTTOU, SIGUSR1, SIGUSR2}) {
    sigaddset(&s, sig);
  }
  return s;
}

namespace {

bool ends(int sig) { return sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT; }

// Waits for one of `set` up to `limit`; 0 on timeout. `from_tty`: the kernel sent it (a
// terminal's ^C, ^\ or hangup, which a terminal sends to its whole foreground process group).
int wait_signal(const sigset_t& set, milliseconds limit, bool* from_tty = nullptr) {
  timespec ts{static_cast<time_t>(limit.count() / 1000),
              static_cast<long>(limit.count() % 1000) * 1'000'000};
  for (;;) {
    siginfo_t info{};
    int sig = sigtimedwait(&set, &info, &ts);
    if (from_tty) *from_tty = sig > 0 && info.si_code == SI_KERNEL;
    if (sig >= 0 || errno != EINTR) return std::max(sig, 0);
  }
}

// How long to wait for `wake` (max: an hour, then look again).
milliseconds until(steady::time_point wake) {
  if (wake == steady::time_point::max()) return 1h;
  return std::clamp(std::chrono::ceil<milliseconds>(wake - steady::now()), 0ms, milliseconds{1h});
}

// Shared with the completion, which may come after the wait was abandoned (a group's, from a
// client not yet shut down).
struct acquisition {
  std::mutex mu;
  bool done = false;
  std::error_code ec;
  held got;
};

// Why a lock of another kind under the name refuses exec.
std::string wrong_kind(const std::string& name, lock_kind asked) {
  const auto see = " (`dlock status " + name + "` shows it)";
  if (asked == lock_kind::read || asked == lock_kind::write) {
    return "held as a mutex or fair lock, not a read-write lock: leave out --shared and --rw" + see;
  }
  return "held as a read-write lock: use --shared or --rw" + see;
}

// Starts the acquisition of the lock `m` as `a` says.
start_fn start_lock(const exec_args& a, dlock::detail::lock_base& m) {
  return [&a, &m](acquired_fn done) {
    auto on_acquired = [done = std::move(done)](std::error_code ec, dlock::lease l) {
      done(ec, held{std::move(l)});
    };
    if (a.wait && a.lease_time) {
      m.async_lock_for(*a.wait, *a.lease_time, on_acquired);
    } else if (a.wait) {
      m.async_lock_for(*a.wait, on_acquired);
    } else if (a.lease_time) {
      m.async_lock(*a.lease_time, on_acquired);
    } else {
      m.async_lock(on_acquired);
    }
  };
}

// Waits for the acquisition's completion (SIGUSR2), or a signal that ends the wait: nullopt,
// or the exit code.
std::optional<int> wait_acquired(const std::vector<dlock::client*>& clients, acquisition& got,
                                 const sigset_t& signals) {
  for (;;) {
    const int sig = wait_signal(signals, 1h);
    if (sig == SIGUSR2) {
      std::lock_guard lock{got.mu};
      if (got.done) return std::nullopt;
    } else if (sig == SIGTSTP) {
      kill(getpid(), SIGSTOP);  // nothing runs under the lock yet
    } else if (ends(sig)) {
      // Abandons the wait; what was acquired meanwhile is released first.
      for (auto* c : clients) c->shutdown();
      std::lock_guard lock{got.mu};
      if (got.got.owns()) got.got.release(got.ec);
      return 128 + sig;
    }
  }
}

// The one line on stderr saying why the command is being stopped.
void say_why_stopping(const exec_options& o, const exec_args& a, const kill_schedule& plan,
                      steady::time_point now) {
  const auto left = std::max(0ms, std::chrono::floor<milliseconds>(plan.deadline() - now));
  std::string why = a.permits > 0 ? "lease lost while the command ran (the permit was reclaimed or "
                                    "could not be renewed in time)"
                                  : "lease lost while the command ran (the lock was taken away or "
                                    "could not be renewed in time)";
  if (plan.why() == kill_schedule::reason::expiring && a.lease_time) {
    why = "the --lease of " + ms_text(a.lease) + " (a limit on the run time) ends in " +
          ms_text(left);
  } else if (plan.why() == kill_schedule::reason::expiring) {
    why =
        "the lease was not renewed in time (Redis slow or unreachable, or dlock was stopped): "
        "it ends in " +
        ms_text(left);
  }
  complain("exec: " + o.name, why + "; stopping the command (SIGTERM now, SIGKILL within " +
                                  ms_text(a.timing.kill_after) + ")");
}

// Runs the command's life: forwards signals, stops along with it on a terminal stop, and stops
// it as `plan` says. Its exit code.
int supervise(const exec_options& o, const exec_args& a, const held& lease, pid_t child, int tty,
              kill_schedule& plan, const sigset_t& signals) {
  bool continued = false;  // dlock stopped with the command: continue it, unless killed
  for (;;) {
    const auto now = steady::now();
    const auto left = lease.time_left();  // before lost(): a loss in between reads as lost
    const auto step = plan.next(now, now + left, lease.lost().stop_requested());
    if (step.term) {
      say_why_stopping(o, a, plan, now);
      signal_group(child, SIGTERM);
    }
    if (step.kill) signal_group(child, SIGKILL);
    if (std::exchange(continued, false) && !plan.killed()) signal_group(child, SIGCONT);
    bool from_tty = false;
    const int sig = wait_signal(signals, until(step.wake), &from_tty);
    if (ends(sig)) forward(child, sig, from_tty);
    if (sig == SIGTSTP) {  // a stopped dlock cannot renew: nothing may run under the lease
      stop_with(tty, child);
      continued = true;
    }
    siginfo_t info{};
    if (sig != SIGCHLD || !changed(child, info)) continue;
    if (info.si_code == CLD_STOPPED) {
      if (tty < 0 || !job_stop(info.si_status)) continue;  // SIGSTOP: the lease is kept
      stop_with(tty, child);
      continued = true;
      continue;
    }
    // Ended, not reaped: its group id cannot be taken by another yet. Being stopped, what it
    // left in its group had its SIGTERM, and must not outlive it.
    if (plan.stopping()) signal_group(child, SIGKILL);
    hand_over(tty, child, getpgrp());
    int status = 0;
    waitpid(child, &status, 0);
    return exit_status(status);
  }
}

// Says that the command is not started, and why; the exit code.
int not_trusted(const exec_options& o, const exec_args& a) {
  complain("exec: " + o.name,
           "not starting the command: the lease was lost or not trusted for "
           "more than --kill-after (" +
               ms_text(a.timing.kill_after) + ") plus " + ms_text(a.timing.margin));
  return exit_software;
}

// Waits, if need be, for the lease to be trusted long enough to start the command (a renewal
// may confirm it meanwhile), up to the end of its trust: 0, or the exit code.
int wait_for_trust(const exec_options& o, const exec_args& a, const held& lease,
                   const sigset_t& signals) {
  for (;;) {
    const auto left = lease.time_left();
    if (may_start(left, lease.lost().stop_requested(), a.timing)) return 0;
    if (left == 0ms || lease.lost().stop_requested()) break;
    const int sig = wait_signal(signals, std::min(left, 5ms));  // SIGUSR1: lost
    if (ends(sig)) return 128 + sig;
  }
  return not_trusted(o, a);
}

// The command's environment: the name (several: separated by spaces), and the fencing token
// or the permit id; for several names, each one's token too, in the same order.
std::vector<std::string> command_env(const exec_options& o, const held& lease) {
  std::vector<std::string> env{"DLOCK_NAME=" + o.name};
  if (lease.is_permit()) {
    env.push_back("DLOCK_PERMIT_ID=" + lease.holder_id());
    return env;
  }
  env.push_back("DLOCK_FENCING_TOKEN=" + std::to_string(lease.fencing_token()));
  if (o.names.size() > 1) {
    std::vector<std::string> tokens;
    for (const auto t : lease.fencing_tokens()) tokens.push_back(std::to_string(t));
    env.push_back("DLOCK_FENCING_TOKENS=" + join(tokens));
  }
  return env;
}

}  // namespace

std::optional<int> acquire_held(const global_options& g, const exec_options& o,
                                const std::vector<dlock::client*>& clients, const start_fn& start,
                                const std::function<std::string(std::error_code)>& why,
                                const sigset_t& signals, held& out) {
  const pid_t self = getpid();
  const auto shared = std::make_shared<acquisition>();
  auto& got = *shared;
  const auto wait_started = steady::now();
  start([shared, self](std::error_code ec, held h) {
    {
      std::lock_guard lock{shared->mu};
      shared->done = true;
      shared->ec = ec;
      shared->got = std::move(h);
    }
    kill(self, SIGUSR2);
  });
  if (const auto code = wait_acquired(clients, got, signals)) return code;
  if (got.ec == dlock::errc::timeout) {
    verbose(g, o.name + " not acquired within the wait");
    return exit_tempfail;
  }
  if (got.ec) {
    const auto text = why(got.ec);
    complain("exec: " + o.name, text.empty() ? got.ec.message() : text);
    return exit_code_for(got.ec);
  }
  const auto waited = std::chrono::duration_cast<milliseconds>(steady::now() - wait_started);
  verbose(g, "acquired " +
                 (got.got.is_permit()
                      ? "a permit of " + o.name + " (id " + got.got.holder_id() + ")"
                      : o.name + " with fencing token " + std::to_string(got.got.fencing_token())) +
                 " after " + ms_text(waited));
  out = std::move(got.got);
  return std::nullopt;
}

int run_held(const exec_options& o, const exec_args& a, dlock::client& client, held& lease,
             const sigset_t& signals) {
  const auto sites = lease.sites(client, o.name);
  const auto me = describe_at(o, a.lease, sites);
  // The lease must still be trusted, with room for a stop, when the command starts: acquiring
  // and describing took time, and the lease may have been lost meanwhile.
  if (const int failed = wait_for_trust(o, a, lease, signals)) {
    give_back(sites, lease);
    return failed;
  }
  milliseconds left{};
  steady::time_point checked_at;
  const int tty = open_terminal();  // closed on exec; left to the exit
  const auto child = start_command(o, command_env(o, lease), tty, [&] {
    checked_at = steady::now();
    left = lease.time_left();
    return may_start(left, lease.lost().stop_requested(), a.timing);
  });
  if (child.refused) {
    give_back(sites, lease);
    return not_trusted(o, a);
  }
  int code = 0;
  if (child.pid < 0) {
    complain("exec: " + o.command.front(), std::strerror(child.error));
    code = child.error == ENOENT ? exit_not_found : 126;
  } else {
    kill_schedule plan{a.timing, checked_at + left};
    holder_refresh refresh{sites, me, a.lease};
    code = supervise(o, a, lease, child.pid, tty, plan, signals);
    refresh.stop();
    if (plan.stopping()) {
      give_back(sites, lease);
      return exit_software;
    }
  }
  std::error_code ec;
  forget_and_release(sites, lease, ec);
  if (ec == dlock::errc::lease_lost) {
    complain("exec: " + o.name, std::string{"lease lost before the "} +
                                    (lease.is_permit() ? "permit" : "lock") + " was released");
    return exit_software;
  }
  if (ec) complain("exec: unlock " + o.name, ec);  // the lock expires with its lease
  return code;
}

int run_exec(const global_options& g, const exec_options& o) {
  if (g.urls.size() > 1 || o.names.size() > 1) return run_exec_group(g, o);
  const dlock::config cfg = make_config(g);
  exec_args a;
  if (!check_exec_args(o, cfg, a)) return exit_usage;
  const sigset_t signals = handled_signals();
  sigprocmask(SIG_BLOCK, &signals, nullptr);  // before the client's threads exist: they inherit it

  dlock::client client{cfg};
  if (a.permits > 0) return run_exec_permits(g, o, a, client, signals);
  chosen_lock lock{client, o.name, a.kind};
  verbose(g, "waiting for " + o.name +
                 (a.kind == lock_kind::mutex ? "" : " (" + kind_text(a.kind) + ")"));
  auto why = [&o, &a](std::error_code ec) {
    return ec == dlock::errc::wrong_kind ? wrong_kind(o.name, a.kind) : std::string{};
  };
  held lease;
  if (auto code = acquire_held(g, o, {&client}, start_lock(a, lock.get()), why, signals, lease)) {
    return *code;
  }
  lease.on_lost([self = getpid()] { kill(self, SIGUSR1); });
  return run_held(o, a, client, lease, signals);
}

}  // namespace dlock_cli
