#include "worker_lock.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <future>
#include <iostream>
#include <mutex>
#include <optional>
#include <stop_token>
#include <thread>
#include <utility>

#include "broken_lock.hpp"
#include "dlock/detail/lock_base.hpp"
#include "dlock/error.hpp"
#include "dlock/lease.hpp"

namespace dlock::faults {

namespace worker_lock_detail {

using namespace std::chrono_literals;
using std::chrono::milliseconds;

// Exit code 6: an acquisition hung past its wait + 30 s (dlock_fault_worker's usage).
[[noreturn]] void acquire_hung() {
  std::cerr << "dlock_fault_worker: acquire hung\n" << std::flush;
  std::_Exit(6);
}

class dlock_held final : public held_lock {
 public:
  dlock_held(dlock::client& c, const std::string& name, dlock::detail::lock_kind kind,
             milliseconds lease, std::string mode, bool writes)
      : lock_{c, name, kind}, lease_time_{lease}, mode_{std::move(mode)}, writes_{writes} {}

  std::error_code acquire(milliseconds wait, std::uint64_t& token) override {
    auto p = std::make_shared<std::promise<std::pair<std::error_code, dlock::lease>>>();
    auto f = p->get_future();
    auto done = [p](std::error_code ec, dlock::lease l) { p->set_value({ec, std::move(l)}); };
    if (lease_time_.count() > 0) {
      lock_.async_lock_for(wait, lease_time_, std::move(done));
    } else {
      lock_.async_lock_for(wait, std::move(done));
    }
    if (f.wait_for(wait + 30s) != std::future_status::ready) acquire_hung();
    auto [ec, l] = f.get();
    lease_ = std::move(l);
    token = lease_.fencing_token();
    return ec;
  }
  // time_left() reads the local deadline on this thread: a holder resuming from SIGSTOP sees
  // zero at once, before the client's I/O thread has run and requested lost().
  bool lost() const override {
    return lease_.lost().stop_requested() || lease_.time_left().count() <= 0;
  }
  std::int64_t left_ms() const override { return lease_.time_left().count(); }
  void hold_for(milliseconds d) override {
    using clock = std::chrono::steady_clock;
    const auto until = clock::now() + d;
    std::mutex mu;
    std::condition_variable_any cv;
    std::unique_lock lock{mu};
    // Wakes at the local deadline too; the watchdog may have moved it on by then.
    while (!lost() && clock::now() < until) {
      const auto deadline = clock::now() + lease_.time_left() + 1ms;
      cv.wait_until(lock, lease_.lost(), std::min(until, deadline), [] { return false; });
    }
  }
  void on_lost(std::function<void()> fn) override { lease_.on_lost(std::move(fn)); }
  std::error_code release() override {
    std::error_code ec;
    lease_.unlock(ec);
    lease_ = dlock::lease{};
    return ec;
  }
  std::string mode() const override { return mode_; }
  bool writes() const override { return writes_; }

 private:
  dlock::detail::lock_base lock_;
  milliseconds lease_time_;
  std::string mode_;
  bool writes_;
  dlock::lease lease_;
};

class broken_held final : public held_lock {
 public:
  broken_held(dlock::client& c, const std::string& name, broken_lock::flaw f, milliseconds lease)
      : lock_{c, name, f, lease} {}
  std::error_code acquire(milliseconds wait, std::uint64_t& token) override {
    return lock_.acquire(wait, token);
  }
  bool lost() const override { return lock_.expired(); }
  std::int64_t left_ms() const override { return lock_.time_left_ms(); }
  void hold_for(milliseconds d) override {
    const auto left = lock_.time_left_ms();
    std::this_thread::sleep_for(left >= 0 ? std::min(d, milliseconds{left + 1}) : d);
  }
  void on_lost(std::function<void()>) override {}
  std::error_code release() override { return lock_.release(); }

 private:
  broken_lock lock_;
};

// What --kind names: the lock_base kind, the history's mode, whether the holder writes.
struct kind_spec {
  dlock::detail::lock_kind kind;
  const char* mode;
  bool writes;
};

std::optional<kind_spec> kind_named(const std::string& kind) {
  using dlock::detail::lock_kind;
  if (kind == "mutex") return kind_spec{lock_kind::mutex, "", true};
  if (kind == "fair") return kind_spec{lock_kind::fair, "", true};
  if (kind == "read") return kind_spec{lock_kind::read, "read", false};
  if (kind == "write") return kind_spec{lock_kind::write, "write", true};
  if (kind == "broken-read-as-write") return kind_spec{lock_kind::read, "write", true};
  return std::nullopt;
}

}  // namespace worker_lock_detail

std::unique_ptr<held_lock> make_held_lock(dlock::client& c, const std::string& name,
                                          const std::string& lock, const std::string& kind,
                                          std::chrono::milliseconds lease, std::string& error) {
  using namespace worker_lock_detail;
  if (lock == "dlock") {
    const auto k = kind_named(kind);
    if (!k) {
      error = "unknown --kind " + kind;
      return nullptr;
    }
    return std::make_unique<dlock_held>(c, name, k->kind, lease, k->mode, k->writes);
  }
  const auto f = broken_lock::flaw_named(lock);
  if (!f) {
    error = "unknown --lock " + lock;
    return nullptr;
  }
  if (kind != "mutex") {
    error = "a broken lock is a mutex: no --kind " + kind;
    return nullptr;
  }
  if (lease.count() <= 0) {
    error = "a broken lock needs --lease";
    return nullptr;
  }
  return std::make_unique<broken_held>(c, name, *f, lease);
}

}  // namespace dlock::faults
