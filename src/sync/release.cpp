// Releasing dlock::mutex holds, and force_unlock.
#include <asio/post.hpp>

#include "dlock/error.hpp"
#include "runtime/client_impl.hpp"
#include "runtime/keys.hpp"
#include "scripts/script.hpp"
#include "sync/mutex_ops.hpp"

namespace dlock::detail {
namespace {

constexpr int max_resends = 3;

// Runs on the strand. `resends`: how many times this same release was sent before without an
// answer (the script is idempotent for a given expected count, so resending is safe).
void send_release(client_impl& c, std::shared_ptr<hold_state> h, bool was_lost, int resends,
                  completion<bool> done) {
  const auto have_n = h->count.load();
  const auto have = std::to_string(have_n);
  const auto lease = std::to_string(h->lease.count());
  const auto channel = keys::lock_channel(h->name);
  std::string_view keys[] = {h->name, channel};
  std::string_view args[] = {keys::unlock_message, lease, h->owner, have};
  const auto sent = clock::now();
  c.scripts().eval(
      scripts::mutex_release, keys, args, c.cfg().command_timeout,
      [&c, h, was_lost, resends, sent, done = std::move(done)](std::error_code ec, reply r) mutable {
        if (ec == errc::timeout || ec == errc::connection_lost) {
          if (resends < max_resends) return send_release(c, h, was_lost, resends + 1, std::move(done));
          return done(ec, false);  // count unchanged: calling unlock again is safe
        }
        if (ec) return done(ec, false);
        // nil: our field is gone. On a resend that means our earlier send released it.
        const bool applied_before = r.is_integer() && r.integer() == -1;
        const bool gone = r.is_nil();
        if (gone && resends == 0) {
          // The lease ran out or someone force-unlocked: nothing was ours to release.
          h->count = 0;
          c.watchdog().remove(*h);
          mark_lost(*h);
          return done(errc::lease_lost, true);
        }
        const bool freed = gone || (r.is_integer() && r.integer() == 1) ||
                           (applied_before && h->count == 1);
        if (!freed && !applied_before && !(r.is_integer() && r.integer() == 0)) {
          return done(errc::protocol_error, false);
        }
        h->count = freed ? 0 : h->count - 1;
        if (freed) {
          c.watchdog().remove(*h);
        } else {
          c.watchdog().refreshed(*h, sent);  // a partial release resets the lease
        }
        done(was_lost ? make_error_code(errc::lease_lost) : std::error_code{}, freed);
      });
}

}  // namespace

void start_release(client_impl& c, std::shared_ptr<hold_state> h, completion<bool> done) {
  asio::post(c.strand(), [&c, h = std::move(h), done = std::move(done)]() mutable {
    if (h->count == 0) return done(errc::not_owner, false);
    // A lease is lost once its trusted time has passed, even if the watchdog's timer has not
    // fired yet.
    auto trusted = c.watchdog().trusted_until(*h);
    if (!h->lost && h->count > 0 && (!trusted || *trusted <= clock::now())) mark_lost(*h);
    const bool was_lost = h->lost;
    // The last hold stops being renewed before its release is sent, so no renewal can race
    // with (and outlive) the release.
    if (h->count == 1) c.watchdog().remove(*h);
    send_release(c, std::move(h), was_lost, 0, std::move(done));
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

std::error_code validate_name(const config& cfg, const std::string& name) {
  if (name.empty() || name.size() > cfg.max_name_length) return errc::invalid_argument;
  return {};
}

std::error_code validate_lease(std::chrono::milliseconds lease) {
  if (lease.count() <= 0) return errc::invalid_argument;
  return {};
}

}  // namespace dlock::detail
