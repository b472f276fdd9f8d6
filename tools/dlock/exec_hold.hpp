// dlock exec: what the command runs under — a lock's lease, or a permit of a leased semaphore
// (--permits) — and the parts of exec that both share. Only exec.cpp and exec_permits.cpp
// include this.
//
// A permit's lease behaves as a lock's: the watchdog renews it (or --lease fixes it), time_left()
// is its trust deadline and lost() is requested when it may be gone, so exec's schedule for
// stopping the command (exec_schedule.hpp) applies to both unchanged. What differs: a permit
// carries no fencing token (the command gets DLOCK_PERMIT_ID instead of DLOCK_FENCING_TOKEN),
// and its holder description is keyed by the permit id instead of the lease's owner.
#pragma once

#include <signal.h>

#include <asio/use_future.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <optional>
#include <stop_token>
#include <string>
#include <system_error>
#include <variant>

#include "cli.hpp"

namespace dlock_cli {

class held {
 public:
  held() = default;
  explicit held(dlock::lease l) : h_{std::move(l)} {}
  explicit held(dlock::permit p) : h_{std::move(p)} {}

  bool owns() const {
    return std::visit([](const auto& h) { return h.owns(); }, h_);
  }
  bool is_permit() const { return std::holds_alternative<dlock::permit>(h_); }
  std::chrono::milliseconds time_left() const {
    return std::visit([](const auto& h) { return h.time_left(); }, h_);
  }
  std::stop_token lost() const {
    return std::visit([](const auto& h) { return h.lost(); }, h_);
  }
  void on_lost(std::function<void()> fn) {
    std::visit([&fn](auto& h) { h.on_lost(std::move(fn)); }, h_);
  }
  // The lease's fencing token; 0 for a permit (permits carry none).
  std::uint64_t fencing_token() const {
    const auto* l = std::get_if<dlock::lease>(&h_);
    return l ? l->fencing_token() : 0;
  }
  // Whom the holder description (keys::holder_info) is about: the lease's owner field, or the
  // permit's id (32 hex characters).
  std::string holder_id() const {
    if (const auto* l = std::get_if<dlock::lease>(&h_)) return l->owner();
    const auto ids = std::get<dlock::permit>(h_).ids();
    return ids.empty() ? std::string{} : ids.front();
  }
  void release(std::error_code& ec) {
    if (auto* l = std::get_if<dlock::lease>(&h_)) return l->unlock(ec);
    std::get<dlock::permit>(h_).release(ec);
  }
  std::future<void> release_async() {
    if (auto* l = std::get_if<dlock::lease>(&h_)) return l->async_unlock(asio::use_future);
    return std::get<dlock::permit>(h_).async_release(asio::use_future);
  }

 private:
  std::variant<dlock::lease, dlock::permit> h_;
};

// Completes an acquisition started for exec.
using acquired_fn = std::function<void(std::error_code, held)>;
// Starts the acquisition (the lock's or the permit's), to complete on the client's thread.
using start_fn = std::function<void(acquired_fn)>;

// The signals exec's main thread waits for (exec.cpp says which and why).
sigset_t handled_signals();

// Starts the acquisition and waits for it, or for a signal that ends the wait (SIGTSTP stops
// dlock meanwhile). The exit code when nothing is held: 75 not acquired within --wait, 128+N
// for signal N, or that of the error (said on stderr, by `why` if it gives a text for it).
// nullopt when `out` holds.
std::optional<int> acquire_held(const global_options& g, const exec_options& o,
                                dlock::client& client, const start_fn& start,
                                const std::function<std::string(std::error_code)>& why,
                                const sigset_t& signals, held& out);

// With the lock or permit held: runs the command if its lease is trusted long enough, stopping
// it as exec_schedule.hpp says, and releases it. The exit code.
int run_held(const exec_options& o, const exec_args& a, dlock::client& client, held& h,
             const sigset_t& signals);

// exec --permits N: takes one permit of the leased semaphore NAME (exec_permits.cpp).
int run_exec_permits(const global_options& g, const exec_options& o, const exec_args& a,
                     dlock::client& client, const sigset_t& signals);

}  // namespace dlock_cli
