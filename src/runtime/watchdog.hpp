// The watchdog: keeps watchdog leases alive and notices lost leases. Runs on the client strand.
//
// Every hold it tracks has a trusted time (renewal_schedule). Watchdog holds are renewed every
// lease/3 in batches (one mutex_renew script for up to 100 holds). A renewal that finds the hold
// gone, or no confirmation before the trusted time passes, marks the hold lost (mark_lost):
// its stop token is requested, its on_lost callbacks run, and renewal stops. Holds with an
// explicit lease are not renewed; they are marked lost when the lease runs out.
#pragma once

#include <asio/steady_timer.hpp>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "runtime/hold.hpp"
#include "runtime/renewal_schedule.hpp"
#include "transport/link.hpp"

namespace dlock::scripts {
class runner;
}

namespace dlock::detail {

class watchdog {
 public:
  using clock = std::chrono::steady_clock;

  watchdog(transport::link::executor_type strand, const scripts::runner& scripts,
           std::chrono::milliseconds command_timeout, std::chrono::milliseconds watchdog_lease);

  // Thread-safe: what a blocking call learned about its hold on its own thread (config::
  // caller_io) — acquired (first time), its lease reset, released. Applied
  // on the strand, in order per hold, before the watchdog next looks at its holds (every
  // strand-only member below applies them first). The I/O thread is woken only when a new
  // hold is due before the watchdog's timer fires (or too much is waiting), so a lock+unlock
  // on the caller's channel usually costs the I/O thread nothing.
  void note_added(const std::shared_ptr<hold_state>& h, clock::time_point sent);
  void note_refreshed(const std::shared_ptr<hold_state>& h, clock::time_point sent);
  void note_released(const std::shared_ptr<hold_state>& h);

  // Strand only. Tracks `h`, trusted from `sent` (when its acquire was sent).
  void add(const std::shared_ptr<hold_state>& h, clock::time_point sent);
  // Strand only. Tracks `h`, granted by an unlock (config::grants): trusted from `start` for
  // the grant's `window` until refreshed() by its confirmation.
  void add_granted(const std::shared_ptr<hold_state>& h, clock::time_point start, clock::duration window);
  // Strand only. `h` is found not held (a grant's confirmation): lost.
  void lose(const hold_state& h);
  // Strand only. The lease was reset on Redis by a request sent at `sent`.
  void refreshed(hold_state& h, clock::time_point sent);
  // Strand only. Stops tracking `h` (before its final release is sent), returning what is needed
  // to put it back with restore() if that release fails.
  std::optional<renewal_schedule::entry> remove(const hold_state& h);
  void restore(const std::shared_ptr<hold_state>& h, const renewal_schedule::entry& e);
  // Strand only. Until when `h` is trusted; nullopt if not tracked.
  std::optional<clock::time_point> trusted_until(const hold_state& h);
  // Strand only. Asks Redis now whether every tracked hold (watchdog or explicit lease) is
  // still held, leases untouched, and marks the missing ones lost: after a reconnect, the
  // server may have restarted or failed over and forgotten them, which renewals would only
  // find out up to a third of the lease later (explicit leases: at their end).
  void check_all();
  void stop();

  // Renewal scripts sent so far (thread-safe; for tests and metrics).
  std::uint64_t renewals_sent() const noexcept { return renewals_sent_.load(); }
  std::uint64_t leases_lost() const noexcept { return leases_lost_.load(); }

 private:
  struct hold_note {
    std::shared_ptr<hold_state> hold;
    enum { added, refreshed, released } what;
    clock::time_point sent{};
  };
  void apply_notes();                  // strand: the notes so far, into the schedule
  void take_note(hold_note n, std::optional<clock::time_point> due);
  void publish_armed(clock::time_point at);  // strand: the timer's time, for take_note()
  void post_drain();                         // apply_notes() and rearm() on the strand
  void rearm();                        // full scan: the timer for the next due time
  void arm_by(clock::time_point t);    // make sure the timer fires no later than t
  void arm(clock::time_point at);
  void on_timer();
  // One mutex_renew script for `batch`; lease "0" only checks (see check_all).
  void renew(const std::vector<renewal_schedule::id>& batch, bool check_only = false);
  void lose(renewal_schedule::id h);
  void publish(hold_state& h) const;  // copies h's trusted time into h, for time_left()

  transport::link::executor_type strand_;
  const scripts::runner& scripts_;
  std::chrono::milliseconds command_timeout_;
  std::chrono::milliseconds watchdog_lease_;
  renewal_schedule schedule_;
  std::unordered_map<renewal_schedule::id, std::shared_ptr<hold_state>> holds_;
  // Holds out of the schedule while their release is on its way (remove()), and the latest send
  // of a request that reset the lease meanwhile (refreshed(): a grant's confirmation that ran
  // before the release): restore() applies it, or the hold would be trusted only as long as
  // before that confirmation.
  std::unordered_map<renewal_schedule::id, clock::time_point> refreshed_while_out_;
  asio::steady_timer timer_;
  clock::time_point armed_for_ = clock::time_point::max();
  bool stopped_ = false;
  std::atomic<std::uint64_t> renewals_sent_{0}, leases_lost_{0};
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  std::mutex notes_mu_;
  std::unordered_map<renewal_schedule::id, hold_note> notes_;  // guarded by notes_mu_
  clock::time_point notes_armed_ = clock::time_point::max();  // guarded: when the timer fires
  bool drain_posted_ = false;                               // guarded
};

}  // namespace dlock::detail
