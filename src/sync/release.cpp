// Releasing dlock::mutex holds, and force_unlock.
#include <asio/post.hpp>

#include "dlock/error.hpp"
#include "runtime/client_impl.hpp"
#include "dlock/keys.hpp"
#include "scripts/script.hpp"
#include "runtime/renewal_schedule.hpp"
#include "sync/mutex_ops.hpp"

namespace dlock::detail {
namespace {

constexpr int max_resends = 3;

// What a release leaves behind when it fails: the hold goes back to the watchdog as it was.
struct release_state {
  std::shared_ptr<hold_state> hold;
  bool was_lost = false;
  std::optional<renewal_schedule::entry> tracked;  // set when the last hold left the watchdog
  int resends = 0;
};

void finish_release(client_impl& c, release_state& st, std::error_code ec, bool freed,
                    completion<bool>& done) {
  st.hold->releasing = false;
  if (ec && st.tracked) c.watchdog().restore(st.hold, *st.tracked);
  done(ec, freed);
}

// What a release's reply means for the hold it released (`have` holds when it was sent,
// `resends` earlier sends of it whose replies were lost).
struct release_outcome {
  enum { failed, lost, released } what = failed;
  std::error_code ec;  // failed: the error (calling again is safe)
  bool freed = false;  // released: it was the last hold, the lock is free
};

release_outcome read_release_reply(std::error_code ec, const reply& r, std::uint32_t have,
                                   int resends) {
  // WRONGTYPE: the key was replaced by another type, so our hold is gone as surely as when the
  // field is missing.
  const bool replaced = ec == errc::wrong_type;
  if (ec && !replaced) return {release_outcome::failed, ec};
  const bool gone = r.is_nil() || replaced;
  const bool applied_before = r.is_integer() && r.integer() == -1;
  // Our field is not there: the lease ran out or someone force-unlocked. (After a resend of
  // the last hold, "gone" is our own earlier send having released it.)
  if (gone && (resends == 0 || have > 1)) return {release_outcome::lost, errc::lease_lost, true};
  const bool freed = gone || (r.is_integer() && r.integer() == 1) || (applied_before && have == 1);
  if (!freed && !applied_before && !(r.is_integer() && r.integer() == 0)) {
    return {release_outcome::failed, errc::protocol_error};
  }
  return {release_outcome::released, {}, freed};
}

// Runs on the strand. The script is idempotent for a given expected count, so a release whose
// reply was lost is simply sent again.
void send_release(client_impl& c, std::shared_ptr<release_state> st, completion<bool> done) {
  auto& h = *st->hold;
  const auto have_n = h.count.load();
  const auto sent = clock::now();
  send_mutex_release(
      c, lock_keys{h.name}, std::to_string(h.lease.count()), h.owner, have_n, {},
      [&c, st, have_n, sent, done = std::move(done)](std::error_code ec, reply r) mutable {
        auto& hold = *st->hold;
        if (ec == errc::timeout || ec == errc::connection_lost) {
          if (++st->resends <= max_resends) return send_release(c, st, std::move(done));
        }
        const auto out = read_release_reply(ec, r, have_n, st->resends);
        if (out.what == release_outcome::failed) return finish_release(c, *st, out.ec, false, done);
        st->tracked.reset();
        if (out.what == release_outcome::lost) {
          hold.count = 0;
          c.watchdog().remove(hold);
          mark_lost(hold);
          return finish_release(c, *st, errc::lease_lost, true, done);
        }
        hold.count = out.freed ? 0 : have_n - 1;
        if (out.freed) {
          c.watchdog().remove(hold);
        } else {
          c.watchdog().refreshed(hold, sent);  // a partial release resets the lease
        }
        finish_release(c, *st, st->was_lost ? make_error_code(errc::lease_lost) : std::error_code{},
                       out.freed, done);
      });
}

}  // namespace

void start_release(client_impl& c, std::shared_ptr<hold_state> h, completion<bool> done,
                   int resends, bool releasing) {
  c.post_or_shutdown(std::move(done), [&c, h, resends, releasing](completion<bool> complete) {
        if (h->count == 0) return complete(errc::not_owner, false);
        // One at a time (`releasing`: the caller's channel hands over the one it started).
        if (!releasing && h->releasing.exchange(true)) return complete(errc::not_owner, false);
        // A lease is lost once its trusted time has passed, even if the watchdog's timer has
        // not fired yet.
        auto trusted = c.watchdog().trusted_until(*h);
        if (!h->lost && (!trusted || *trusted <= clock::now())) mark_lost(*h);
        auto st = std::make_shared<release_state>();
        st->hold = h;
        st->was_lost = h->lost;
        st->resends = resends;
        // The last hold stops being renewed before its release is sent, so no renewal can race
        // with (and outlive) the release; if the release fails it is put back.
        if (h->count == 1) st->tracked = c.watchdog().remove(*h);
        send_release(c, std::move(st), std::move(complete));
  });
}

// The release on the caller's channel (config::caller_io). Only for a hold that is trusted,
// not being released, and that no renewal is on its way for (see watchdog::renew): its release
// then cannot overtake a renewal. The watchdog learns the outcome by a note, which it applies
// before it next looks at its holds. No reply (timeout, connection lost): the
// strand's release sends it again, as a resend.
void start_release_from_caller(client_impl& c, std::shared_ptr<hold_state> h, completion<bool> done) {
  const auto now = clock::now();
  const clock::time_point trusted{clock::duration{h->trusted_until.load()}};
  if (h->count == 0 || h->lost || trusted <= now) return start_release(c, std::move(h), std::move(done));
  auto turn = c.caller_turn(now + c.cfg().command_timeout);
  if (!turn) return start_release(c, std::move(h), std::move(done));
  if (h->releasing.exchange(true)) {  // another release of it is in flight: it reports that
    turn.release();
    return start_release(c, std::move(h), std::move(done));
  }
  if (h->renewing.load() != 0) {
    h->releasing = false;
    turn.release();
    return start_release(c, std::move(h), std::move(done));
  }
  const auto have_n = h->count.load();
  const auto sent = clock::now();
  reply r;
  const auto ec = turn.eval(
      scripts::mutex_release,
      encode_mutex_release(c.cfg(), lock_keys{h->name}, std::to_string(h->lease.count()), h->owner, have_n, {}),
      sent + c.cfg().command_timeout, r);
  if (ec == errc::timeout || ec == errc::connection_lost) {
    // No reply: fence the request (client_impl::fence_caller_channel), then the strand sends
    // it again as a resend, taking over `releasing` so that no renewal slips in between.
    if (const auto doubtful = turn.take_doubtful()) c.fence_caller_channel(doubtful);
    turn.release();
    return start_release(c, std::move(h), std::move(done), 1, true);
  }
  turn.release();
  const auto out = read_release_reply(ec, r, have_n, 0);
  if (out.what == release_outcome::failed) {
    h->releasing = false;
    return done(out.ec, false);
  }
  // A hold released for the last time stays `releasing`: nothing renews it again.
  h->count = out.what == release_outcome::released && !out.freed ? have_n - 1 : 0;
  const bool lost = out.what == release_outcome::lost;
  const bool freed = out.freed;
  if (lost) mark_lost(*h);  // on this thread: a thread's hold has no on_lost callbacks
  if (freed) {
    c.watchdog().note_released(h);
  } else {
    c.watchdog().note_refreshed(h, sent);  // a partial release resets the lease
  }
  if (!freed) h->releasing = false;
  done(out.ec, freed);
}

void start_force_unlock(client_impl& c, const std::string& name, completion<bool> done) {
  const auto channel = keys::lock_channel(name);
  std::string_view keys[] = {name, channel};
  std::string_view args[] = {keys::unlock_message};
  c.scripts().eval(scripts::mutex_force_unlock, keys, args, c.cfg().command_timeout,
                   [done = std::move(done)](std::error_code ec, reply r) mutable {
                     done(ec, !ec && r.integer() == 1);
                   });
}

}  // namespace dlock::detail
