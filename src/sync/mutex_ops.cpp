// Argument checks, deadlines and script calls shared by dlock::mutex's forms (mutex_ops.hpp).
#include "sync/mutex_ops.hpp"

#include "dlock/error.hpp"
#include "dlock/keys.hpp"
#include "runtime/client_impl.hpp"
#include "scripts/script.hpp"

namespace dlock::detail {

std::error_code validate_name(const config& cfg, const std::string& name) {
  if (name.empty() || name.size() > cfg.max_name_length) return errc::invalid_argument;
  return {};
}

std::error_code validate_lease(std::chrono::milliseconds lease) {
  if (lease.count() <= 0 || lease > max_lease) return errc::invalid_argument;
  return {};
}

std::optional<clock::time_point> deadline_after(std::optional<std::chrono::milliseconds> wait) {
  if (!wait) return std::nullopt;
  if (*wait >= forever) return std::nullopt;  // now + wait would overflow: wait as lock() does
  return clock::now() + std::max(*wait, std::chrono::milliseconds{0});
}

lock_keys::lock_keys(const std::string& lock_name)
    : name{lock_name},
      channel{keys::lock_channel(lock_name)},
      queue{keys::waiter_queue(lock_name)},
      expiry{keys::waiter_expiry(lock_name)} {}

fencing_counters::fencing_counters(const config& cfg, std::string_view name) {
  if (cfg.fencing == config::fencing_mode::off) {
    advanced = name;
    return;
  }
  advanced = keys::shared_fencing_counter;
  other = keys::fencing_counter(name);
  if (cfg.fencing == config::fencing_mode::per_lock) advanced.swap(other);
}

std::string_view grant_mode(const config& cfg) {
  if (!cfg.grants || cfg.handoff_window.count() <= 0) return {};
  switch (cfg.fencing) {
    case config::fencing_mode::off: return "n";
    case config::fencing_mode::per_lock: return "l";
    default: return "s";
  }
}

std::string encode_mutex_release(const config& cfg, const lock_keys& k, std::string_view lease,
                                 std::string_view owner, std::uint32_t have,
                                 std::string_view leaving_ticket) {
  const auto have_text = std::to_string(have);
  const auto window = std::to_string(cfg.handoff_window.count());
  const auto mode = grant_mode(cfg);
  std::string_view args[] = {keys::unlock_message, lease, owner, have_text, window, leaving_ticket, mode};
  if (mode.empty()) {
    // ARGV[6] present only for a leave: the script tells the two forms apart by it.
    std::string_view keys[] = {k.name, k.channel, k.queue, k.expiry};
    return scripts::encode_evalsha(scripts::mutex_release, keys,
                                   std::span<const std::string_view>{args, leaving_ticket.empty() ? 5u : 6u});
  }
  // A grant issues the waiter's token from this client's counters (its mode must be the same).
  const fencing_counters counters{cfg, k.name};
  std::string_view keys[] = {k.name, k.channel, k.queue, k.expiry, counters.advanced, counters.other};
  return scripts::encode_evalsha(scripts::mutex_release,
                                 std::span<const std::string_view>{keys, counters.other.empty() ? 5u : 6u},
                                 args);
}

void send_mutex_release(client_impl& c, const lock_keys& k, std::string_view lease,
                        std::string_view owner, std::uint32_t have,
                        std::string_view leaving_ticket, transport::reply_handler done) {
  c.scripts().eval_encoded(scripts::mutex_release,
                           encode_mutex_release(c.cfg(), k, lease, owner, have, leaving_ticket),
                           c.cfg().command_timeout, std::move(done));
}

}  // namespace dlock::detail
