// What dlock_fault_worker's lock kinds share (worker_lock.cpp, worker_group_lock.cpp): waiting for
// an asynchronous acquisition with a bound, and reading a lease's loss the way a careful holder
// does. Works on anything with lost() and time_left(): dlock::lease, dlock::permit,
// dlock::multi_lease.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <future>
#include <iostream>
#include <memory>
#include <mutex>
#include <stop_token>
#include <system_error>
#include <utility>

namespace dlock::faults::worker_lease {

using namespace std::chrono_literals;
using std::chrono::milliseconds;

// Exit code 6: an acquisition hung past its wait + 30 s (dlock_fault_worker's usage).
[[noreturn]] inline void acquire_hung() {
  std::cerr << "dlock_fault_worker: acquire hung\n" << std::flush;
  std::_Exit(6);
}

// Lost once the signal fired or no time is left. time_left() reads the local deadline on this
// thread: a holder resuming from SIGSTOP sees zero at once, before the client's I/O thread has
// run and requested lost().
template <class Lease>
bool lease_gone(const Lease& l) {
  return l.lost().stop_requested() || l.time_left().count() <= 0;
}

// Sleeps `d`, or less if `l` is lost first. Wakes at the local deadline too; the watchdog may
// have moved it on by then.
template <class Lease>
void hold_lease_for(const Lease& l, milliseconds d) {
  using clock = std::chrono::steady_clock;
  const auto until = clock::now() + d;
  std::mutex mu;
  std::condition_variable_any cv;
  std::unique_lock lock{mu};
  while (!lease_gone(l) && clock::now() < until) {
    const auto deadline = clock::now() + l.time_left() + 1ms;
    cv.wait_until(lock, l.lost(), std::min(until, deadline), [] { return false; });
  }
}

// Runs an async acquisition `start(done)` whose completion is void(error_code, T); exits the
// process (acquire_hung) if it has not completed within `wait` + 30 s.
template <class T, class Start>
std::pair<std::error_code, T> await_acquisition(milliseconds wait, Start start) {
  auto p = std::make_shared<std::promise<std::pair<std::error_code, T>>>();
  auto f = p->get_future();
  start([p](std::error_code ec, T held) { p->set_value({ec, std::move(held)}); });
  if (f.wait_for(wait + 30s) != std::future_status::ready) acquire_hung();
  return f.get();
}

}  // namespace dlock::faults::worker_lease
