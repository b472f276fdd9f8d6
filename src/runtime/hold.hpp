// One hold of a lock by one owner (a thread or a lease): what the holder may read from any
// thread (fencing token, lost signal, hold count) and what the runtime keeps on the strand.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

#include "dlock/detail/lock_base.hpp"
#include "dlock/metrics.hpp"

namespace dlock::detail {

// The kind metrics and events count a hold of this lock kind under.
constexpr sync_kind sync_kind_of(lock_kind k) {
  switch (k) {
    case lock_kind::mutex:
      return sync_kind::mutex;
    case lock_kind::fair:
      return sync_kind::fair_mutex;
    case lock_kind::read:
      return sync_kind::shared_read;
    case lock_kind::write:
      return sync_kind::shared_write;
    case lock_kind::permits:
      return sync_kind::leased_semaphore;
    case lock_kind::counting:
      return sync_kind::counting_semaphore;
    case lock_kind::latch:
      return sync_kind::latch;
  }
  return sync_kind::mutex;
}

struct hold_state {
  // `f`: the field, when not derived from the owner (a leased_semaphore's permit ids);
  // `amount`: the permits a semaphore acquisition takes.
  hold_state(std::string n, std::string o, std::chrono::milliseconds l, bool wd, std::uint64_t i,
             lock_kind k = lock_kind::mutex, std::string f = {}, std::uint32_t amount = 1)
      : name{std::move(n)},
        owner{std::move(o)},
        field{!f.empty()              ? std::move(f)
              : k == lock_kind::write ? owner + ":write"
                                      : owner},
        kind{k},
        permits{amount},
        lease{l},
        watchdog{wd},
        id{i} {}

  const std::string name;
  const std::string owner;  // <client-uuid>:<thread-or-lease number>
  // The owner's field in the lock hash (`<owner>:write` for a writer); for leased_semaphore
  // permits their ids, 16 raw bytes each.
  const std::string field;
  const lock_kind kind;
  const std::uint32_t permits;            // semaphores: the permits taken
  const std::chrono::milliseconds lease;  // the lease set on Redis (watchdog lease if watchdog)
  const bool watchdog;                    // renewed by the watchdog
  const std::uint64_t id;                 // key in the renewal schedule

  std::atomic<std::uint64_t> token{0};  // fencing token of the first acquisition
  std::atomic<std::uint32_t> count{0};  // holds confirmed by Redis (reentrancy)
  std::atomic<bool> lost{false};        // the lease may be gone: never trust this hold again
  std::atomic<bool> releasing{false};   // a release is in flight (at most one at a time)
  // Released by a destructor, which waits for nobody: if that release fails, the hold is not
  // tracked again (nothing would ever release it), and its lease runs out on Redis.
  std::atomic<bool> abandoned{false};
  // False when config::wait_replicas replicas did not acknowledge the first acquisition in time
  // and config::on_shortfall is accept.
  std::atomic<bool> replicated{true};
  // Until when the lease is trusted (steady_clock ticks since its epoch; 0 = not tracked yet):
  // written by the watchdog on the strand, read by holders on any thread (time_left()).
  std::atomic<std::chrono::steady_clock::rep> trusted_until{0};
  std::stop_source lost_source;  // requested together with `lost`

  // Written before the hold is shared: multi_lock / red_lock members count as theirs.
  sync_kind metric = sync_kind_of(kind);

  // Strand only.
  std::vector<std::function<void()>> on_lost;
  // When the holder was handed the hold (steady_clock ticks; 0: never handed out, e.g. a group
  // member taken in a round that did not succeed): hold time, and whether a loss is counted.
  std::atomic<std::chrono::steady_clock::rep> acquired_at{0};
};

// Time left until the hold's local deadline, on the caller's thread and clock: zero once it is
// lost or past its trusted time (even if the strand has not run its timer yet, e.g. right after
// the process resumes from SIGSTOP).
inline std::chrono::milliseconds time_left(const hold_state& h) {
  using namespace std::chrono;
  if (h.lost || h.count == 0) return milliseconds{0};
  const auto until = steady_clock::time_point{steady_clock::duration{h.trusted_until.load()}};
  const auto left = until - steady_clock::now();
  return left > steady_clock::duration::zero() ? floor<milliseconds>(left) : milliseconds{0};
}

// Mark a hold lost (strand only): request its stop token and run its on_lost callbacks, once.
inline void mark_lost(hold_state& h) {
  if (h.lost.exchange(true)) return;
  h.lost_source.request_stop();
  auto callbacks = std::move(h.on_lost);
  h.on_lost.clear();
  for (auto& f : callbacks) {
    // One failing callback must neither stop the others nor the client's I/O thread.
    try {
      f();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "dlock: an on_lost callback of %s threw: %s\n", h.name.c_str(),
                   e.what());
    } catch (...) {
      std::fprintf(stderr, "dlock: an on_lost callback of %s threw\n", h.name.c_str());
    }
  }
}

// Names a hold among the client's: its kind, field and lock name (a thread may hold the read and
// the write side of one name).
inline std::string hold_key(lock_kind kind, const std::string& field, const std::string& name) {
  std::string out(1, static_cast<char>('0' + static_cast<int>(kind)));
  out += field;
  out += ' ';
  out += name;
  return out;
}
inline std::string hold_key(const hold_state& h) { return hold_key(h.kind, h.field, h.name); }

// The hold's argument to lock_renew.lua: a kind letter and its field.
inline std::string renew_arg(const hold_state& h) {
  const char letter = h.kind == lock_kind::read      ? 'r'
                      : h.kind == lock_kind::write   ? 'w'
                      : h.kind == lock_kind::permits ? 'p'
                                                     : 'h';
  return letter + h.field;
}

// The thread-owned holds of one client, by hold_key. Thread-safe; a thread looks up its own
// holds from its own calls, the runtime updates them on the strand.
class hold_table {
 public:
  std::shared_ptr<hold_state> find(const std::string& key) const {
    std::lock_guard lock{mu_};
    auto it = holds_.find(key);
    return it == holds_.end() ? nullptr : it->second;
  }
  void put(const std::shared_ptr<hold_state>& h) {
    std::lock_guard lock{mu_};
    holds_[hold_key(*h)] = h;
  }
  void erase(const hold_state& h) {
    std::lock_guard lock{mu_};
    auto it = holds_.find(hold_key(h));
    if (it != holds_.end() && it->second.get() == &h) holds_.erase(it);
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<hold_state>, std::less<>> holds_;
};

}  // namespace dlock::detail
