#include "worker_lock.hpp"

#include <algorithm>
#include <optional>
#include <thread>
#include <utility>

#include "broken_lock.hpp"
#include "dlock/detail/lock_base.hpp"
#include "dlock/error.hpp"
#include "dlock/lease.hpp"
#include "dlock/leased_semaphore.hpp"
#include "worker_lease.hpp"

namespace dlock::faults {

namespace worker_lock_detail {

using namespace std::chrono_literals;
using std::chrono::milliseconds;
using namespace worker_lease;

class dlock_held final : public held_lock {
 public:
  dlock_held(dlock::client& c, const std::string& name, dlock::detail::lock_kind kind,
             milliseconds lease, std::string mode, bool writes)
      : lock_{c, name, kind}, lease_time_{lease}, mode_{std::move(mode)}, writes_{writes} {}

  std::error_code acquire(milliseconds wait, std::uint64_t& token) override {
    auto [ec, l] = await_acquisition<dlock::lease>(wait, [&](auto done) {
      if (lease_time_.count() > 0) {
        lock_.async_lock_for(wait, lease_time_, std::move(done));
      } else {
        lock_.async_lock_for(wait, std::move(done));
      }
    });
    lease_ = std::move(l);
    token = lease_.fencing_token();
    return ec;
  }
  bool lost() const override { return lease_gone(lease_); }
  std::int64_t left_ms() const override { return lease_.time_left().count(); }
  void hold_for(milliseconds d) override { hold_lease_for(lease_, d); }
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

// One permit of a leased_semaphore of `permits` (set by the first acquisition if the semaphore
// has no counter yet). Its sections record "mode":"permit" and the limit, token 0, and only read
// the resource: N holders share it, so its counters' read-modify-write is not theirs to make.
// With `adds_one` (--kind broken-permits-adds-one, for the checker's self-check) it behaves as if
// N were N + 1: it adds a permit before each acquisition and takes it away after the release.
class permit_held final : public held_lock {
 public:
  permit_held(dlock::client& c, const std::string& name, milliseconds lease, std::int64_t permits,
              bool adds_one)
      : sem_{c, name}, lease_time_{lease}, permits_{permits}, adds_one_{adds_one} {}

  std::error_code acquire(milliseconds wait, std::uint64_t& token) override {
    token = 0;  // permits carry no fencing token
    std::error_code ec;
    if (!initialised_) sem_.try_set_permits(permits_, ec);
    if (ec) return ec;
    initialised_ = true;
    if (adds_one_) sem_.add_permits(1, ec);
    if (ec) return ec;
    auto [got, p] = await_acquisition<dlock::permit>(wait, [&](auto done) {
      if (lease_time_.count() > 0) {
        sem_.async_acquire_for(wait, 1, lease_time_, std::move(done));
      } else {
        sem_.async_acquire_for(wait, 1, std::move(done));
      }
    });
    permit_ = std::move(p);
    if (got && adds_one_) sem_.add_permits(-1, ec);
    return got;
  }
  bool lost() const override { return lease_gone(permit_); }
  std::int64_t left_ms() const override { return permit_.time_left().count(); }
  void hold_for(milliseconds d) override { hold_lease_for(permit_, d); }
  void on_lost(std::function<void()> fn) override { permit_.on_lost(std::move(fn)); }
  std::error_code release() override {
    std::error_code ec, ignored;
    permit_.release(ec);
    permit_ = dlock::permit{};
    if (adds_one_) sem_.add_permits(-1, ignored);
    return ec;
  }
  std::string mode() const override { return "permit"; }
  bool writes() const override { return false; }
  std::int64_t limit() const override { return permits_; }

 private:
  dlock::leased_semaphore sem_;
  milliseconds lease_time_;
  std::int64_t permits_;
  bool adds_one_;
  bool initialised_ = false;
  dlock::permit permit_;
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
                                          std::chrono::milliseconds lease, std::int64_t permits,
                                          std::string& error) {
  using namespace worker_lock_detail;
  const bool permit_kind = kind == "permits" || kind == "broken-permits-adds-one";
  if (lock == "dlock" && permit_kind) {
    if (permits <= 0) {
      error = "--kind " + kind + " needs --permits N";
      return nullptr;
    }
    return std::make_unique<permit_held>(c, name, lease, permits, kind != "permits");
  }
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
