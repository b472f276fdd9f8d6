// Releasing dlock::mutex holds, and force_unlock.
#include "dlock/error.hpp"
#include "dlock/keys.hpp"
#include "runtime/client_impl.hpp"
#include "runtime/observer.hpp"
#include "runtime/renewal_schedule.hpp"
#include "scripts/script.hpp"
#include "sync/kinds.hpp"
#include "sync/mutex_ops.hpp"

namespace dlock::detail {
namespace {

constexpr int max_resends = 3;

// What a release's reply means for the hold it released (`have` holds when it was sent,
// `resends` earlier sends of it whose replies were lost).
struct release_outcome {
  enum { failed, lost, released } what = failed;
  std::error_code ec;  // failed: the error (calling again is safe)
  bool freed = false;  // released: it was the last hold
};

release_outcome read_release_reply(std::error_code ec, const reply& r, std::uint32_t have,
                                   int resends) {
  // WRONGTYPE: the key was replaced by another type, so the hold is gone as surely as when the
  // field is missing.
  const bool replaced = ec == errc::wrong_type;
  if (ec && !replaced) return {release_outcome::failed, ec};
  const bool gone = r.is_nil() || replaced;
  const bool applied_before = r.is_integer() && r.integer() == -1;
  // The field is not there: the lease ran out or someone force-unlocked. (After a resend of the
  // last hold, "gone" is our own earlier send having released it.)
  if (gone && (resends == 0 || have > 1)) return {release_outcome::lost, errc::lease_lost, true};
  const bool freed = gone || (r.is_integer() && r.integer() == 1) || (applied_before && have == 1);
  if (!freed && !applied_before && !(r.is_integer() && r.integer() == 0)) {
    return {release_outcome::failed, errc::protocol_error};
  }
  return {release_outcome::released, {}, freed};
}

struct release_op : std::enable_shared_from_this<release_op> {
  client_impl& c;
  std::shared_ptr<hold_state> hold;
  completion<bool> done;
  lock_keys keys;
  bool was_lost = false;
  std::optional<renewal_schedule::entry> tracked;  // set when the last hold left the watchdog
  int resends = 0;

  release_op(client_impl& cl, std::shared_ptr<hold_state> h, completion<bool> d)
      : c{cl},
        hold{std::move(h)},
        done{std::move(d)},
        keys{cl.cfg(), hold->name, hold->kind, hold->owner} {}

  void finish(std::error_code ec, bool freed) {
    hold->releasing = false;
    if (ec && tracked && !hold->abandoned) c.watchdog().restore(hold, *tracked);
    auto d = std::move(done);
    d(ec, freed);
  }

  // The script is idempotent for a given expected count, so a release whose reply was lost is
  // simply sent again.
  void send() {
    const auto have = hold->count.load();
    const auto sent = clock::now();
    send_release(c, keys, *hold, have, {},
                 [self = shared_from_this(), have, sent](std::error_code ec, reply r) {
                   self->on_reply(ec, r, have, sent);
                 });
  }

  // A release's WAIT only reports (replication::shortfalls): the lock is given up either way.
  // A partial release rewrote the count and the lease of a hold that stays: a shortfall there
  // makes the hold unreplicated. In the release's reply handler.
  void report_replication(bool freed) {
    if (!c.replication().wanted()) return;
    c.replication().confirm(c.router().replying(), [h = hold, freed](std::error_code, bool enough) {
      if (!enough && !freed) h->replicated = false;
    });
  }

  void on_reply(std::error_code ec, const reply& r, std::uint32_t have, clock::time_point sent) {
    if ((ec == errc::timeout || ec == errc::connection_lost) && ++resends <= max_resends) {
      return send();
    }
    const auto out = read_release_reply(ec, r, have, resends);
    if (out.what == release_outcome::failed) return finish(out.ec, false);
    tracked.reset();
    if (out.what == release_outcome::lost) {
      hold->count = 0;
      c.watchdog().remove(*hold);
      report_lost(c.observer(), *hold, loss_cause::not_held);
      return finish(errc::lease_lost, true);
    }
    report_replication(out.freed);
    hold->count = out.freed ? 0 : have - 1;
    if (out.freed) {
      report_released(c.observer(), *hold);
      c.watchdog().remove(*hold);
    } else {
      c.watchdog().refreshed(*hold, sent, hold->lease);  // a partial release resets the lease
    }
    finish(was_lost ? make_error_code(errc::lease_lost) : std::error_code{}, out.freed);
  }
};

}  // namespace

void start_release(client_impl& c, std::shared_ptr<hold_state> h, completion<bool> done) {
  c.post_or_shutdown(std::move(done), [&c, h](completion<bool> complete) {
    if (h->count == 0) return complete(errc::not_owner, false);
    if (h->releasing.exchange(true)) return complete(errc::not_owner, false);  // one at a time
    // A lease is lost once its trusted time has passed, even if the watchdog's timer has not
    // fired yet.
    const auto trusted = c.watchdog().trusted_until(*h);
    if (!h->lost && (!trusted || *trusted <= clock::now())) {
      report_lost(c.observer(), *h, loss_cause::unconfirmed);
    }
    auto op = std::make_shared<release_op>(c, h, std::move(complete));
    op->was_lost = h->lost;
    // The last hold stops being renewed before its release is sent, so no renewal can race
    // with (and outlive) the release; if the release fails it is put back.
    if (h->count == 1) op->tracked = c.watchdog().remove(*h);
    op->send();
  });
}

void start_force_unlock(client_impl& c, const std::string& name, lock_kind kind,
                        completion<bool> done) {
  const lock_keys k{c.cfg(), name, kind};
  const bool fair = kind == lock_kind::fair;
  const std::string_view keys[] = {name, k.queue, k.records};
  const std::string_view args[] = {k.channel, c.cfg().cluster() ? "1" : "0",
                                   kind == lock_kind::read || kind == lock_kind::write ? "1" : "0"};
  c.scripts().eval(
      scripts::mutex_force_unlock, std::span<const std::string_view>{keys, fair ? 3u : 1u}, args,
      c.cfg().command_timeout, [done = std::move(done)](std::error_code ec, reply r) mutable {
        done(ec, !ec && r.integer() == 1);
      });
}

}  // namespace dlock::detail
