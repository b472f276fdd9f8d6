// The watchdog: keeps watchdog leases alive, checks explicit ones, and notices lost leases.
// Runs on the client's I/O thread.
//
// Every hold it tracks has a trusted time (renewal_schedule). Every third of its lease a hold is
// renewed (watchdog holds) or checked (explicit leases), in batches: one lock_renew script for
// up to 100 holds (in a Redis Cluster, for the holds of one slot among them). A reply that finds
// the hold gone, or no confirmation before the trusted time passes, marks the hold lost
// (mark_lost): its stop token is requested, its on_lost callbacks run, and it is no longer tracked.
// Every reply caps the trusted time by the key's PTTL.
//
// With a replica policy (replicate_with), a renewal extends a hold's trust only once WAIT
// confirms it reached the replicas: a shortfall marks the hold unreplicated, and under `fail`
// leaves its trust where it was (what was replicated) and renews again sooner, so that the hold
// is reported lost when its trust runs out unless a renewal gets through meanwhile.
#pragma once

#include <asio/steady_timer.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "runtime/hold.hpp"
#include "runtime/renewal_schedule.hpp"
#include "transport/link.hpp"

namespace dlock::scripts {
class runner;
}

namespace dlock::detail {

class observer;

class watchdog {
 public:
  using clock = std::chrono::steady_clock;

  // `per_slot`: a script may only cover one slot (Redis Cluster).
  watchdog(transport::link::executor_type strand, const scripts::runner& scripts,
           std::chrono::milliseconds command_timeout, std::chrono::milliseconds watchdog_lease,
           bool per_slot = false);

  // Tracks `h`, trusted from `sent` (when its acquire was sent).
  void add(const std::shared_ptr<hold_state>& h, clock::time_point sent);
  // The lease was set again on Redis by a request sent at `sent` (a re-entry, a partial release).
  void refreshed(hold_state& h, clock::time_point sent, std::chrono::milliseconds lease);
  // Stops tracking `h` (before its final release is sent), returning what is needed to put it
  // back with restore() if that release fails.
  std::optional<renewal_schedule::entry> remove(const hold_state& h);
  void restore(const std::shared_ptr<hold_state>& h, const renewal_schedule::entry& e);
  // Until when `h` is trusted; nullopt if not tracked.
  std::optional<clock::time_point> trusted_until(const hold_state& h) const;
  // The replica policy: `confirm` is replication::confirm on the connection that replied (called
  // in a renewal's reply handler); `accept`: a shortfall still extends the trust.
  using confirmer = std::function<void(std::function<void(std::error_code, bool)>)>;
  void replicate_with(confirmer confirm, bool accept, std::chrono::milliseconds wait_timeout);
  // Asks Redis now whether every tracked hold is still held, and caps its trust by the key's
  // PTTL: after a reconnect the server may have restarted, or failed over, and forgotten a hold
  // or kept it with an earlier expiry.
  void check_all();
  void stop();

  // Renewal scripts sent so far (thread-safe; for tests and metrics).
  std::uint64_t renewals_sent() const noexcept { return renewals_sent_.load(); }
  std::uint64_t leases_lost() const noexcept { return leases_lost_.load(); }

 private:
  void rearm();                      // full scan: the timer for the next due time
  void arm_by(clock::time_point t);  // make sure the timer fires no later than t
  void arm(clock::time_point at);
  void on_timer();
  void send_due(clock::time_point now, bool renew);
  // One lock_renew script for `batch`: renewing (watchdog holds) or checking.
  void send(const std::vector<renewal_schedule::id>& batch, bool renew,
            std::optional<clock::time_point> top_up_at = std::nullopt);
  void index(const hold_state& h);
  void unindex(const hold_state& h);
  void send_group(const std::vector<renewal_schedule::id>& batch, bool renew);
  void on_answer(const std::vector<renewal_schedule::id>& batch, bool renew, clock::time_point sent,
                 std::error_code ec, const reply& r);
  using renewed = std::vector<std::pair<renewal_schedule::id, std::int64_t>>;  // id, PTTL
  void on_replicated(const renewed& holds, clock::time_point sent, bool enough);
  void lose(renewal_schedule::id h, loss_cause cause);
  void at_risk(renewal_schedule::id h, std::error_code why);
  void publish(hold_state& h) const;  // copies h's trusted time into h, for time_left()

  transport::link::executor_type strand_;
  const scripts::runner& scripts_;
  std::chrono::milliseconds command_timeout_;
  std::chrono::milliseconds watchdog_lease_;
  bool per_slot_;
  observer& obs_;      // the client's metrics and events
  confirmer confirm_;  // empty: no replica policy
  bool accept_shortfall_ = false;
  std::chrono::milliseconds shortfall_retry_{0};
  renewal_schedule schedule_;
  std::unordered_map<renewal_schedule::id, std::shared_ptr<hold_state>> holds_;
  std::unordered_map<std::uint16_t, std::vector<renewal_schedule::id>> by_slot_;  // cluster only
  std::unordered_set<renewal_schedule::id> at_risk_;  // told lease_at_risk since last confirmed
  asio::steady_timer timer_;
  clock::time_point armed_for_ = clock::time_point::max();
  bool stopped_ = false;
  std::atomic<std::uint64_t> renewals_sent_{0}, leases_lost_{0};
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace dlock::detail
