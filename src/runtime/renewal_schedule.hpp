// When each hold must be renewed and until when it is trusted, with no timers or sockets.
//
// A hold is trusted until `sent + lease - drift`, where `sent` is the steady-clock time at which
// the acquire (or the last confirmed renewal) was sent, never when its reply came: time spent in
// flight counts against the lease. drift = lease/100 + 2 ms (the Redlock margin). Every lease/3 a
// watchdog hold is renewed and a hold with an explicit lease is checked (its PTTL read, nothing
// changed), so a force-unlock or an eviction reaches it too; renewals and checks that come due
// close together are sent as one batch (up to `max_batch`, taking those due within `slack`), so
// N holds cost about N/100 scripts per period. A check, or any reading of the key's PTTL, caps
// the trusted time at `sent + pttl - drift`: a server restored from an older snapshot may keep
// the hold with an earlier expiry than the client believes. A hold that passes its trusted time
// without a confirmation is expired: its lease is lost.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

namespace dlock::detail {

class renewal_schedule {
 public:
  using clock = std::chrono::steady_clock;
  using id = std::uint64_t;

  static clock::duration drift(clock::duration lease) {
    return lease / 100 + std::chrono::milliseconds{2};
  }
  static clock::time_point trusted_until(clock::time_point sent, clock::duration lease) {
    return sent + lease - drift(lease);
  }

  // A hold acquired with a request sent at `sent`. `renew`: the watchdog keeps it alive (else it
  // is only checked).
  void add(id h, clock::time_point sent, clock::duration lease, bool renew);
  void remove(id h);
  bool contains(id h) const { return holds_.contains(h); }
  std::size_t size() const noexcept { return holds_.size(); }
  std::optional<clock::time_point> trusted_until(id h) const;
  // When this hold next needs attention (renewal or expiry); nullopt if unknown.
  std::optional<clock::time_point> due(id h) const;

  // Holds to renew or check now: those due within `slack` of `now` and not already in flight, at
  // most `max_batch`, earliest first; none unless one is due now (`top_up`: even so — to fill a
  // batch that is going out anyway). They are marked in flight until confirmed() or failed().
  // `renew`: watchdog holds (else holds with an explicit lease, to check).
  std::vector<id> take_renewals(clock::time_point now, clock::duration slack, std::size_t max_batch,
                                bool renew, bool top_up = false);
  // Of `candidates`, those take_renewals would give with `top_up` (due within `slack`, not in
  // flight, of the `renew` kind), at most `max_batch`, earliest first; marked in flight. For a
  // cluster's watchdog: the holds of a slot that a script renews anyway join it, so that one
  // slot's holds converge into one script per period as holds do into full batches.
  std::vector<id> take_renewals_of(const std::vector<id>& candidates, clock::time_point now,
                                   clock::duration slack, std::size_t max_batch, bool renew);
  // A request sent at `sent` set the hold's lease again (a renewal, a re-entry, a partial
  // release): trusted from `sent`.
  void confirmed(id h, clock::time_point sent);
  // A request sent at `sent` found the hold in place with `pttl` ms left (-1: no expiry): the
  // trusted time is capped there; the next check is a third of the lease later.
  void checked(id h, clock::time_point sent, std::int64_t pttl);
  bool renews(id h) const;
  // The renewal got no answer (timeout, connection lost): try again at `retry_at`.
  void failed(id h, clock::time_point retry_at);

  // Holds whose trusted time has passed; they are removed (their leases are lost).
  std::vector<id> take_expired(clock::time_point now);

  // When take_renewals or take_expired next has something to do.
  std::optional<clock::time_point> next_due() const;

 public:
  struct entry {
    clock::duration lease;
    clock::time_point trusted_until;
    clock::time_point renew_at;  // next renewal (watchdog holds) or check (explicit leases)
    bool renew = false;          // a watchdog hold; explicit leases are only checked
    bool in_flight = false;
    clock::time_point set_at{};  // send time of the latest request that set the lease
  };

 public:
  // What remove() forgot, so that a release that failed can put the hold back as it was.
  std::optional<entry> snapshot(id h) const;
  void restore(id h, const entry& e);

 private:
  std::vector<id> claim(std::vector<std::pair<clock::time_point, id>>& due, std::size_t max_batch);

  std::unordered_map<id, entry> holds_;
};

}  // namespace dlock::detail
