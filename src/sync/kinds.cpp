#include "sync/kinds.hpp"

#include "dlock/fair_mutex.hpp"
#include "runtime/client_impl.hpp"
#include "runtime/waiters.hpp"
#include "scripts/script.hpp"

namespace dlock::detail {
namespace {

using views = std::span<const std::string_view>;

// Keys with the fencing counters last: left out with fencing off.
std::size_t fenced(const lock_keys& k, std::size_t n) { return k.slot_counter.empty() ? n : n + 2; }

// How long a fair waiter's queue entry, or a waiting writer's, lasts past its next re-check.
std::string entry_validity(const client_impl& c) {
  return std::to_string((c.cfg().wait_recheck + fair_mutex::purge_bound).count());
}

const char* cluster_flag(const client_impl& c) { return c.cfg().cluster() ? "1" : "0"; }

void send_mutex_attempt(client_impl& c, const lock_keys& k, const hold_state& h,
                        const attempt_request& a, std::string_view have, std::string_view lease,
                        transport::reply_handler done) {
  // The queue record outlives the longest sleep before this waiter's next attempt, with a
  // second to spare.
  const auto valid = std::to_string(c.cfg().wait_recheck.count() + 1000);
  const std::string_view keys[] = {k.name,  k.queue,        k.records,
                                   k.yield, k.slot_counter, k.lock_counter};
  const std::string_view argv[] = {lease,
                                   h.owner,
                                   have,
                                   a.waits ? a.ticket : std::string_view{},
                                   valid,
                                   c.id(),
                                   a.foreign ? "1" : "0"};
  c.scripts().eval(scripts::mutex_acquire, views{keys, fenced(k, 4)}, argv, a.budget,
                   std::move(done));
}

// mutex_release.lua: `ticket` (if not empty) leaves dlock's waiter queue.
void send_mutex_release(client_impl& c, const lock_keys& k, const hold_state& h,
                        std::string_view have, std::string_view lease, std::string_view ticket,
                        transport::reply_handler done) {
  const auto window = std::to_string(waiter_registry::yield_window.count());
  const std::string_view keys[] = {k.name,  k.queue,        k.records,
                                   k.yield, k.slot_counter, k.lock_counter};
  const std::string_view args[] = {k.channel, k.dlock_channel, h.owner, have,
                                   lease,     ticket,          window,  cluster_flag(c)};
  c.scripts().eval(scripts::mutex_release, views{keys, fenced(k, 4)}, args, c.cfg().command_timeout,
                   std::move(done));
}

}  // namespace

void send_attempt(client_impl& c, const lock_keys& k, const hold_state& h, const attempt_request& a,
                  transport::reply_handler done) {
  const auto have = std::to_string(a.have);
  const auto lease = std::to_string(h.lease.count());
  const std::string_view waits = a.waits ? "1" : "0";
  switch (h.kind) {
    case lock_kind::mutex:
      return send_mutex_attempt(c, k, h, a, have, lease, std::move(done));
    case lock_kind::fair: {
      const auto valid = entry_validity(c);
      const std::string_view keys[] = {k.name, k.queue, k.records, k.slot_counter, k.lock_counter};
      const std::string_view argv[] = {lease, h.owner,   have,           waits,
                                       valid, k.channel, cluster_flag(c)};
      return c.scripts().eval(scripts::fair_acquire, views{keys, fenced(k, 3)}, argv, a.budget,
                              std::move(done));
    }
    case lock_kind::read: {
      const std::string_view keys[] = {k.name, k.queue, k.slot_counter, k.lock_counter};
      const std::string_view argv[] = {lease, h.owner, have, k.hold_prefix};
      return c.scripts().eval(scripts::read_acquire, views{keys, fenced(k, 2)}, argv, a.budget,
                              std::move(done));
    }
    case lock_kind::write: {
      const auto valid = entry_validity(c);
      const std::string_view keys[] = {k.name, k.queue, k.slot_counter, k.lock_counter};
      const std::string_view argv[] = {lease, h.field, have, h.owner, waits, valid};
      return c.scripts().eval(scripts::write_acquire, views{keys, fenced(k, 2)}, argv, a.budget,
                              std::move(done));
    }
    case lock_kind::permits: {
      const std::string_view keys[] = {k.name, k.queue};
      const std::string_view argv[] = {lease, h.field, k.channel, cluster_flag(c)};
      return c.scripts().eval(scripts::permit_acquire, keys, argv, a.budget, std::move(done));
    }
    case lock_kind::counting: {
      const auto n = std::to_string(h.permits);
      const std::string_view keys[] = {k.name, k.records};
      const std::string_view argv[] = {n, lease};  // the marker lasts the hold's "lease"
      return c.scripts().eval(scripts::counting_acquire, keys, argv, a.budget, std::move(done));
    }
    case lock_kind::latch: {
      const std::string_view keys[] = {k.name};
      return c.scripts().eval(scripts::latch_check, keys, {}, a.budget, std::move(done));
    }
  }
}

void send_release(client_impl& c, const lock_keys& k, const hold_state& h, std::uint32_t have,
                  std::string_view ticket, transport::reply_handler done) {
  const auto have_text = std::to_string(have);
  const auto lease = std::to_string(h.lease.count());
  const std::string_view leaving = ticket.empty() ? "0" : "1";
  const auto timeout = c.cfg().command_timeout;
  switch (h.kind) {
    case lock_kind::mutex:
      return send_mutex_release(c, k, h, have_text, lease, ticket, std::move(done));
    case lock_kind::fair: {
      const std::string_view keys[] = {k.name, k.queue, k.records};
      const std::string_view argv[] = {k.channel, h.owner, have_text,
                                       lease,     leaving, cluster_flag(c)};
      return c.scripts().eval(scripts::fair_release, keys, argv, timeout, std::move(done));
    }
    case lock_kind::read: {
      const std::string_view keys[] = {k.name};
      const std::string_view argv[] = {k.channel, h.owner,         have_text, k.hold_prefix,
                                       k.tag,     cluster_flag(c), lease};
      return c.scripts().eval(scripts::read_release, keys, argv, timeout, std::move(done));
    }
    case lock_kind::write: {
      const std::string_view keys[] = {k.name, k.queue};
      const std::string_view argv[] = {k.channel, h.field, have_text,      lease,
                                       h.owner,   leaving, cluster_flag(c)};
      return c.scripts().eval(scripts::write_release, keys, argv, timeout, std::move(done));
    }
    case lock_kind::permits: {
      const std::string_view keys[] = {k.name, k.queue};
      const std::string_view argv[] = {h.field, k.channel, cluster_flag(c)};
      return c.scripts().eval(scripts::permit_release, keys, argv, timeout, std::move(done));
    }
    case lock_kind::counting: {  // only a give-back: the marker says what the attempt took
      const std::string_view keys[] = {k.name, k.records};
      const std::string_view argv[] = {"undo", "0", k.channel, cluster_flag(c)};
      return c.scripts().eval(scripts::semaphore_update, keys, argv, timeout, std::move(done));
    }
    case lock_kind::latch:  // holds nothing
      return done({}, reply{});
  }
}

}  // namespace dlock::detail
