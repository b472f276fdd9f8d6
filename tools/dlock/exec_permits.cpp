// dlock exec --permits N NAME -- CMD: runs CMD while holding one permit of the leased semaphore
// NAME (dlock::leased_semaphore, Redisson's RPermitExpirableSemaphore layout), so that at most N
// commands run at once across hosts. Everything after the acquisition is exec's own (exec.cpp):
// the permit's lease is renewed, trusted and lost exactly as a lock's.
#include <unistd.h>

#include <string>
#include <system_error>

#include "cli.hpp"
#include "exec_hold.hpp"

namespace dlock_cli {
namespace {

std::string why_not(const std::string& name, std::error_code ec) {
  if (ec == dlock::errc::wrong_type) {
    return "a key of another type, not a semaphore (`dlock status " + name + "` shows it)";
  }
  return {};
}

// Gives the semaphore N permits if it has no counter yet, else checks that it has N in all
// (available + leased): 0, or the exit code (said why on stderr).
int ensure_permits(const global_options& g, const exec_options& o, std::int64_t n,
                   dlock::client& client, dlock::leased_semaphore& sem) {
  std::error_code ec;
  if (sem.try_set_permits(n, ec)) {
    verbose(g, o.name + ": set to " + std::to_string(n) + " permits");
    return 0;
  }
  if (ec) {
    const auto why = why_not(o.name, ec);
    complain("exec: " + o.name, why.empty() ? ec.message() : why);
    return exit_code_for(ec);
  }
  // One snapshot of the counter and the leases: a permit taken or returned between two reads
  // would be counted twice or not at all. Expired leases not yet reclaimed still count (their
  // reclaim moves them to the counter).
  const auto s = dlock::inspect(client, o.name, ec);
  if (ec) {
    complain("exec: " + o.name, ec);
    return exit_code_for(ec);
  }
  if (s.layout != dlock::lock_layout::semaphore && s.layout != dlock::lock_layout::counter) {
    complain("exec: " + o.name, "not a semaphore (`dlock status " + o.name + "` shows what it is)");
    return exit_usage;
  }
  const auto total = s.counter + s.permits_leased;
  if (total != n) {
    complain("exec: " + o.name, "the semaphore has " + std::to_string(total) + " permits in all (" +
                                    std::to_string(s.counter) + " available, " +
                                    std::to_string(s.permits_leased) + " in use), not --permits " +
                                    std::to_string(n) + ": give --permits " +
                                    std::to_string(total) + ", or change it on purpose");
    return exit_usage;
  }
  return 0;
}

// Starts the acquisition of one permit as `a` says (--wait, --lease).
start_fn start_permit(const exec_args& a, dlock::leased_semaphore& sem) {
  return [&a, &sem](acquired_fn done) {
    auto on_acquired = [done = std::move(done)](std::error_code ec, dlock::permit p) {
      done(ec, held{std::move(p)});
    };
    if (a.wait && a.lease_time) {
      sem.async_acquire_for(*a.wait, 1, *a.lease_time, on_acquired);
    } else if (a.wait) {
      sem.async_acquire_for(*a.wait, 1, on_acquired);
    } else if (a.lease_time) {
      sem.async_acquire(1, *a.lease_time, on_acquired);
    } else {
      sem.async_acquire(1, on_acquired);
    }
  };
}

}  // namespace

int run_exec_permits(const global_options& g, const exec_options& o, const exec_args& a,
                     dlock::client& client, const sigset_t& signals) {
  dlock::leased_semaphore sem{client, o.name};
  if (const int code = ensure_permits(g, o, a.permits, client, sem)) return code;
  verbose(g, "waiting for a permit of " + o.name + " (" + std::to_string(a.permits) + ")");
  held permit;
  auto why = [&o](std::error_code ec) { return why_not(o.name, ec); };
  if (auto code = acquire_held(g, o, {&client}, start_permit(a, sem), why, signals, permit)) {
    return *code;
  }
  permit.on_lost([self = getpid()] { kill(self, SIGUSR1); });
  return run_held(o, a, client, permit, signals);
}

}  // namespace dlock_cli
