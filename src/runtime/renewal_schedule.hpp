// When each hold must be renewed and until when it is trusted, with no timers or sockets.
//
// A hold is trusted until `sent + lease - drift`, where `sent` is the steady-clock time at which
// the acquire (or the last confirmed renewal) was sent, never when its reply came: time spent in
// flight counts against the lease. drift = lease/100 + 2 ms (the Redlock margin). Watchdog holds
// are renewed every lease/3; renewals that come due close together are sent as one batch (up to
// `max_batch`, taking those due within `slack`), so N holds cost about N/100 scripts per period.
// A hold that passes its trusted time without a confirmation is expired: its lease is lost.
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

  // When a hold added as add(sent, lease, renew) first needs attention (see due()).
  static clock::time_point first_due(clock::time_point sent, clock::duration lease, bool renew) {
    return renew ? std::min(trusted_until(sent, lease), sent + lease / 3) : trusted_until(sent, lease);
  }

  // A hold acquired with a request sent at `sent`. `renew`: the watchdog keeps it alive.
  void add(id h, clock::time_point sent, clock::duration lease, bool renew);
  // A hold granted by an unlock (config::grants): trusted from `start` for `window` (the grant's
  // lease) until a confirmation moves it to its own lease, `lease`; a watchdog hold is renewed
  // at half the window if no confirmation came by then.
  void add_granted(id h, clock::time_point start, clock::duration window, clock::duration lease, bool renew);
  void remove(id h);
  bool contains(id h) const { return holds_.contains(h); }
  std::size_t size() const noexcept { return holds_.size(); }
  std::optional<clock::time_point> trusted_until(id h) const;
  // When this hold next needs attention (renewal or expiry); nullopt if unknown.
  std::optional<clock::time_point> due(id h) const;

  // Holds to renew now: those due within `slack` of `now` and not already being renewed, at
  // most `max_batch`, earliest first; none unless one is due now (`top_up`: even so — to fill a
  // batch that is going out anyway). They are marked in flight until confirmed() or failed().
  std::vector<id> take_renewals(clock::time_point now, clock::duration slack, std::size_t max_batch,
                                bool top_up = false);
  // The renewal sent at `sent` found the hold in place: trusted again from `sent`.
  void confirmed(id h, clock::time_point sent);
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
    clock::time_point renew_at;  // max() when not renewed
    bool renew = false;          // a watchdog hold; explicit leases are never renewed
    bool in_flight = false;
  };

 public:
  // What remove() forgot, so that a release that failed can put the hold back as it was.
  std::optional<entry> snapshot(id h) const;
  void restore(id h, const entry& e);

 private:
  std::unordered_map<id, entry> holds_;
};

}  // namespace dlock::detail
