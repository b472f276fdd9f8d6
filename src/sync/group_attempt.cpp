#include "sync/group_attempt.hpp"

#include "dlock/keys.hpp"
#include "runtime/client_impl.hpp"
#include "scripts/script.hpp"
#include "sync/acquire_machine.hpp"
#include "sync/mutex_ops.hpp"

namespace dlock::detail {
namespace {

// Acquired: each hold takes its token and goes to the watchdog, trusted from `sent`.
void track(client_impl& c, const std::vector<std::shared_ptr<hold_state>>& holds,
           const std::vector<reply>& e, clock::time_point sent) {
  for (std::size_t i = 0; i < holds.size(); ++i) {
    auto& h = *holds[i];
    h.token = static_cast<std::uint64_t>(e[i + 1].integer());
    h.count = 1;
    c.watchdog().add(holds[i], sent);
  }
}

bool well_formed(const reply& r, std::size_t n) {
  if (!r.is_array()) return false;
  const auto& e = r.elements();
  if (e.empty() || !e[0].is_integer()) return false;
  for (const auto& x : e) {
    if (!x.is_integer()) return false;
  }
  switch (e[0].integer()) {
    case 0:
      return e.size() == n + 1;
    case 1:
      return e.size() == 3;
    case 5:
      return e.size() == 2;
    default:
      return false;
  }
}

void on_reply(client_impl& c, std::vector<std::shared_ptr<hold_state>> holds,
              clock::time_point sent, std::error_code ec, const reply& r,
              unique_function<void(group_result)> done) {
  group_result out;
  out.sent = sent;
  if (!ec && !well_formed(r, holds.size())) ec = errc::protocol_error;
  if (ec) {
    if (is_lost_reply(ec) || ec == errc::protocol_error) {
      for (auto& h : holds) give_back(c, h, 1, {}, sent + h->lease);
    }
    out.ec = ec;
    return done(std::move(out));
  }
  const auto& e = r.elements();
  if (e[0].integer() == 1) {
    out.pttl = std::chrono::milliseconds{e[1].integer()};
    return done(std::move(out));
  }
  if (e[0].integer() == 5) {
    out.ec = errc::wrong_kind;
    return done(std::move(out));
  }
  track(c, holds, e, sent);
  out.held = true;
  if (c.cfg().wait_replicas == 0) return done(std::move(out));
  const bool accept = c.cfg().on_shortfall == config::shortfall_policy::accept;
  // confirm() takes a copyable callback.
  auto shared = std::make_shared<unique_function<void(group_result)>>(std::move(done));
  c.replication().confirm(c.router().replying(), [holds = std::move(holds), out, accept, shared](
                                                     std::error_code wec, bool enough) mutable {
    if (wec || !enough) {
      if (accept) {
        for (auto& h : holds) h->replicated = false;
      } else {
        out.ec = wec ? wec : make_error_code(errc::no_replicas);
      }
    }
    (*shared)(std::move(out));
  });
}

}  // namespace

void send_group_attempt(client_impl& c, std::vector<std::shared_ptr<hold_state>> holds,
                        clock::duration budget, unique_function<void(group_result)> done) {
  const auto n = holds.size();
  const bool fenced = c.cfg().fencing == config::fencing_mode::on;
  std::vector<std::string> keys, argv;
  keys.reserve(fenced ? 3 * n : n);
  for (const auto& h : holds) keys.push_back(h->name);
  if (fenced) {
    for (const auto& h : holds) keys.push_back(keys::slot_fencing_counter_of(h->name));
    for (const auto& h : holds) keys.push_back(keys::fencing_counter(h->name));
  }
  argv.push_back(std::to_string(holds.front()->lease.count()));
  argv.push_back(std::to_string(n));
  for (const auto& h : holds) argv.push_back(h->owner);
  const std::vector<std::string_view> key_views(keys.begin(), keys.end());
  const std::vector<std::string_view> arg_views(argv.begin(), argv.end());
  const auto sent = clock::now();
  c.scripts().eval(scripts::multi_acquire, key_views, arg_views, budget,
                   [&c, holds = std::move(holds), sent, done = std::move(done)](std::error_code ec,
                                                                                reply r) mutable {
                     on_reply(c, std::move(holds), sent, ec, r, std::move(done));
                   });
}

void send_fencing_floor(client_impl& c, const std::string& name, std::uint64_t token,
                        unique_function<void(bool)> done) {
  const auto slot_counter = keys::slot_fencing_counter_of(name);
  const auto lock_counter = keys::fencing_counter(name);
  const auto text = std::to_string(token);
  const std::string_view keys[] = {slot_counter, lock_counter};
  const std::string_view argv[] = {text};
  c.scripts().eval(scripts::fencing_floor, keys, argv, c.cfg().command_timeout,
                   [done = std::move(done)](std::error_code ec, reply r) mutable {
                     done(!ec && r.is_integer() && r.integer() == 1);
                   });
}

}  // namespace dlock::detail
