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
        // WRONGTYPE: the key was replaced by another type, so our hold is gone as surely as
        // when the field is missing.
        const bool replaced = ec == errc::wrong_type;
        if (ec && !replaced) return finish_release(c, *st, ec, false, done);  // retry is safe
        const bool gone = r.is_nil() || replaced;
        const bool applied_before = r.is_integer() && r.integer() == -1;
        if (gone && (st->resends == 0 || have_n > 1)) {
          // Our field is not there: the lease ran out or someone force-unlocked. (After a
          // resend of the last hold, "gone" is our own earlier send having released it.)
          hold.count = 0;
          c.watchdog().remove(hold);
          mark_lost(hold);
          st->tracked.reset();
          return finish_release(c, *st, errc::lease_lost, true, done);
        }
        const bool freed = gone || (r.is_integer() && r.integer() == 1) || (applied_before && have_n == 1);
        if (!freed && !applied_before && !(r.is_integer() && r.integer() == 0)) {
          return finish_release(c, *st, errc::protocol_error, false, done);
        }
        hold.count = freed ? 0 : have_n - 1;
        st->tracked.reset();
        if (freed) {
          c.watchdog().remove(hold);
        } else {
          c.watchdog().refreshed(hold, sent);  // a partial release resets the lease
        }
        finish_release(c, *st, st->was_lost ? make_error_code(errc::lease_lost) : std::error_code{},
                       freed, done);
      });
}

}  // namespace

void start_release(client_impl& c, std::shared_ptr<hold_state> h, completion<bool> done) {
  c.post_or_shutdown(std::move(done), [&c, h](completion<bool> complete) {
        if (h->count == 0) return complete(errc::not_owner, false);
        if (h->releasing.exchange(true)) return complete(errc::not_owner, false);  // one at a time
        // A lease is lost once its trusted time has passed, even if the watchdog's timer has
        // not fired yet.
        auto trusted = c.watchdog().trusted_until(*h);
        if (!h->lost && (!trusted || *trusted <= clock::now())) mark_lost(*h);
        auto st = std::make_shared<release_state>();
        st->hold = h;
        st->was_lost = h->lost;
        // The last hold stops being renewed before its release is sent, so no renewal can race
        // with (and outlive) the release; if the release fails it is put back.
        if (h->count == 1) st->tracked = c.watchdog().remove(*h);
        send_release(c, std::move(st), std::move(complete));
  });
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
