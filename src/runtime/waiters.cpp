#include "runtime/waiters.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <random>
#include <vector>

#include "dlock/keys.hpp"

namespace dlock::detail {

std::uint32_t waiter_registry::random_tag() {
  std::random_device rd;
  std::uint32_t t = 0;
  while (t == 0) t = static_cast<std::uint32_t>(rd()) & 0x7fffffffu;  // a ticket fits a Java long
  return t;
}

std::uint64_t waiter_registry::make_ticket() {
  std::uint32_t n = 0;
  while (n == 0) n = ++next_;  // a ticket's low half is never 0 (so it is never a bare tag)
  return (std::uint64_t{tag_} << 32) | n;
}

std::uint64_t waiter_registry::parse_ticket(std::string_view payload) {
  std::uint64_t t = 0;
  const auto* end = payload.data() + payload.size();
  auto [p, ec] = std::from_chars(payload.data(), end, t);
  if (ec != std::errc{} || p != end || payload.size() > 19 || (t >> 32) == 0) return 0;
  return t;
}

std::uint64_t waiter_registry::parse_standby(std::string_view payload) {
  if (payload.size() < 2 || payload.front() != '-') return 0;
  return parse_ticket(payload.substr(1));
}

std::optional<grant> waiter_registry::parse_grant(std::string_view payload) {
  if (payload.size() < 2 || payload.front() != '=') return std::nullopt;
  std::uint64_t fields[5] = {};
  const char* p = payload.data() + 1;
  const char* const end = payload.data() + payload.size();
  for (int i = 0; i < 5; ++i) {
    if (i > 0 && (p == end || *p++ != ' ')) return std::nullopt;
    auto [q, ec] = std::from_chars(p, end, fields[i]);
    if (ec != std::errc{} || q == p) return std::nullopt;
    p = q;
  }
  if (p != end || (fields[0] >> 32) == 0 || fields[3] > static_cast<std::uint64_t>(INT64_MAX)) return std::nullopt;
  grant g;
  g.ticket = fields[0];
  g.token = fields[1];
  g.since = std::chrono::milliseconds{static_cast<std::int64_t>(std::min<std::uint64_t>(fields[2], INT32_MAX))};
  g.sent = clock::time_point{clock::duration{static_cast<clock::rep>(fields[3])}};
  g.window = std::chrono::milliseconds{static_cast<std::int64_t>(std::min<std::uint64_t>(fields[4], INT32_MAX))};
  return g;
}

void waiter_registry::add(const std::string& channel, waiter* w, clock::time_point sent) {
  if (!own_channel_.empty() && !own_subscribed_) {
    // Before the lock's channel, on the same connection: confirmed first.
    own_subscribed_ = true;
    subscribe_(own_channel_, [this](const transport::pubsub_event& ev) { on_own_event(ev); });
  }
  auto [it, fresh] = channels_.try_emplace(channel);
  auto& e = it->second;
  if (e.lingers) {
    lingering_.erase(*e.lingers);
    e.lingers.reset();
    --lingering_count_;
  }
  if (e.waiters.empty()) ++channel_count_;
  e.waiters.push_back(w);
  if (auto early = std::find(named_early_.begin(), named_early_.end(), w->ticket);
      w->ticket != 0 && early != named_early_.end()) {
    named_early_.erase(early);
    w->named = true;
    w->wake_pending = true;  // the caller (it registers after its attempt) re-checks at once
  }
  // A wake-up nobody took, after this waiter's attempt: maybe the unlock it waits for.
  if (e.unheard >= sent) w->wake_pending = true;
  if (fresh) {
    e.listener = subscribe_(channel, [this, channel](const transport::pubsub_event& ev) {
      on_event(channel, ev);
    });
  }
  // Last: the waiter may take the lock and leave at once.
  if (auto g = std::find_if(granted_early_.begin(), granted_early_.end(),
                            [w](const grant& x) { return x.ticket == w->ticket; });
      w->ticket != 0 && g != granted_early_.end()) {
    const auto given = *g;
    granted_early_.erase(g);
    w->granted(given);
  }
}

void waiter_registry::remove(const std::string& channel, waiter* w) {
  auto it = channels_.find(channel);
  if (it == channels_.end()) return;
  auto& e = it->second;
  const auto before = e.waiters.size();
  e.waiters.remove(w);
  if (!e.waiters.empty() || before == 0) return;
  --channel_count_;
  if (linger_ <= clock::duration::zero() || e.refused) return drop(it);
  e.idle_since = clock::now();
  e.lingers = lingering_.insert(lingering_.end(), channel);
  ++lingering_count_;
  if (lingering_.size() > max_lingering) {
    drop_oldest();
  } else if (lingering_.size() == 1 && arm_) {
    arm_(e.idle_since + linger_);
  }
}

void waiter_registry::drop(std::unordered_map<std::string, entry>::iterator it) {
  if (it->second.lingers) {
    lingering_.erase(*it->second.lingers);
    --lingering_count_;
  }
  const auto listener = it->second.listener;
  channels_.erase(it);
  unsubscribe_(listener);
}

void waiter_registry::drop_oldest() {
  auto it = channels_.find(lingering_.front());
  if (it == channels_.end()) {  // cannot be (an entry leaves the list when it leaves)
    lingering_.pop_front();
    --lingering_count_;
    return;
  }
  drop(it);
}

void waiter_registry::sweep(clock::time_point now) {
  while (!lingering_.empty()) {
    auto it = channels_.find(lingering_.front());
    if (it != channels_.end() && now - it->second.idle_since < linger_) {
      if (arm_) arm_(it->second.idle_since + linger_);
      return;
    }
    drop_oldest();
  }
}

void waiter_registry::drop_lingering() {
  while (!lingering_.empty()) drop_oldest();
}

std::size_t waiter_registry::waiters(const std::string& channel) const {
  auto it = channels_.find(channel);
  return it == channels_.end() ? 0 : it->second.waiters.size();
}

void waiter_registry::on_event(const std::string& channel, const transport::pubsub_event& ev) {
  using type = transport::pubsub_event::type;
  auto it = channels_.find(channel);
  if (it == channels_.end()) return;
  switch (ev.what) {
    case type::message: {
      auto& e = it->second;
      if (ev.payload == keys::read_unlock_message) {
        e.announced = false;
        wake_all(channel);
      } else if (ev.payload == keys::unlock_message) {
        if (e.announced) {
          e.announced = false;  // its ticket already woke the one waiter it was meant for
        } else {
          wake_one(e);
        }
      } else if (const auto sb = parse_standby(ev.payload)) {
        if (auto* w = ours(e, sb)) w->stand_by();
      } else if (const auto t = parse_ticket(ev.payload)) {
        e.announced = true;
        if ((t >> 32) != tag_) return;  // another client's waiter
        if (auto* w = ours(e, t)) {
          wake(w);
        } else {
          // Ours, but not registered: its waiter left (its leave passes a hand-off on; with
          // no hand-off the lock is free, so wake another), or has not registered yet (the
          // reply that queued it is still on its way): add() will wake it.
          named_early(t);
          wake_one(e);
        }
      } else {
        wake_one(e);  // an unknown message: behave as for an unlock
      }
      return;
    }
    case type::subscribed:
    case type::resubscribed:
      it->second.announced = false;
      wake_all(channel);
      return;
    case type::failed:
      it->second.refused = true;
      refuse(ev.ec, {channel});
      // Lingering, nobody is told (refuse() counted it): a new waiter subscribes again.
      if (auto again = channels_.find(channel); again != channels_.end() && again->second.lingers) {
        drop(again);
      }
      return;
  }
}

void waiter_registry::on_own_event(const transport::pubsub_event& ev) {
  using type = transport::pubsub_event::type;
  switch (ev.what) {
    case type::message:
      if (const auto sb = parse_standby(ev.payload)) {
        if (auto* w = ours(sb)) w->stand_by();
      } else if (const auto g = parse_grant(ev.payload)) {
        if (auto* w = ours(g->ticket)) {
          w->granted(*g);
        } else if ((g->ticket >> 32) == tag_) {
          granted_early_.push_back(*g);
          if (granted_early_.size() > 64) granted_early_.pop_front();
        }
      } else if (const auto t = parse_ticket(ev.payload)) {
        // No `0` follows (the lock is kept for the named waiter): nothing to skip. A waiter
        // that left passed the hand-off on with its leave; with no hand-off kept, the unlock
        // published `0` on the lock's channel as well.
        if (auto* w = ours(t)) {
          wake(w);
        } else {
          named_early(t);
        }
      }
      return;
    case type::subscribed:
      // The first confirmation wakes nobody: it was asked for before the channel of any lock
      // waited on now, on the same connection, and an unlock that finds nobody listening here
      // names the waiter on its lock's channel — whose confirmation sends the waiters to
      // re-check. (Waking them here too cost each client's first wait a second attempt.)
      return;
    case type::resubscribed:
      // A new connection (rare): wake everyone rather than reason about the order in which the
      // channels came back.
      for (const auto& channel : channel_names()) wake_all(channel);
      return;
    case type::failed:
      return refuse(ev.ec, channel_names());  // nobody of this client can be named
  }
}

void waiter_registry::refuse(std::error_code why, const std::vector<std::string>& channels) {
  ++refused_;  // the waiters' own re-check timers carry on
  if (on_refused_) on_refused_(why);
  // Out of the queue: an unlock must not name a waiter no message can reach.
  for (const auto& channel : channels) {
    auto it = channels_.find(channel);
    if (it == channels_.end()) continue;
    std::vector<waiter*> snapshot{it->second.waiters.begin(), it->second.waiters.end()};
    for (auto* w : snapshot) w->channel_refused();
  }
}

void waiter_registry::named_early(std::uint64_t ticket) {
  named_early_.push_back(ticket);
  if (named_early_.size() > 64) named_early_.pop_front();
}

std::vector<std::string> waiter_registry::channel_names() const {
  std::vector<std::string> names;
  names.reserve(channels_.size());
  for (const auto& [name, e] : channels_) names.push_back(name);
  return names;
}

waiter* waiter_registry::ours(std::uint64_t ticket) const {
  for (const auto& [name, e] : channels_) {
    if (auto* w = ours(e, ticket)) return w;
  }
  return nullptr;
}

waiter* waiter_registry::ours(const entry& e, std::uint64_t ticket) const {
  if ((ticket >> 32) != tag_) return nullptr;
  const auto w = std::find_if(e.waiters.begin(), e.waiters.end(),
                              [ticket](const waiter* x) { return x->ticket == ticket; });
  return w == e.waiters.end() ? nullptr : *w;
}

void waiter_registry::wake_one(const std::string& channel) {
  if (auto it = channels_.find(channel); it != channels_.end()) wake_one(it->second);
}

void waiter_registry::wake(waiter* w) {
  w->named = true;
  if (!w->attempting) return w->wake();
  w->wake_pending = true;  // it re-checks as soon as its attempt fails
}

void waiter_registry::wake_one(entry& e) {
  if (e.waiters.empty()) e.unheard = clock::now();  // nobody to take it (see add())
  for (auto* w : e.waiters) {
    if (!w->attempting) {
      w->wake();
      return;
    }
  }
  if (!e.waiters.empty()) e.waiters.front()->wake_pending = true;
}

void waiter_registry::wake_all(const std::string& channel) {
  // wake() may finish a waiter, which removes it (and maybe the channel): wake a snapshot, and
  // only those still registered.
  auto it = channels_.find(channel);
  if (it == channels_.end()) return;
  if (it->second.waiters.empty()) it->second.unheard = clock::now();  // nobody to take it (see add())
  std::vector<waiter*> snapshot{it->second.waiters.begin(), it->second.waiters.end()};
  for (auto* w : snapshot) {
    it = channels_.find(channel);
    if (it == channels_.end()) return;
    auto& ws = it->second.waiters;
    if (std::find(ws.begin(), ws.end(), w) != ws.end()) w->wake();
  }
}

}  // namespace dlock::detail
