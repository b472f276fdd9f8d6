#include "runtime/waiters.hpp"

#include <algorithm>
#include <charconv>
#include <random>
#include <utility>

#include "dlock/keys.hpp"

namespace dlock::detail {
namespace {

std::uint32_t random_tag() {
  std::random_device rd;
  std::uint32_t t = 0;
  while (t == 0) t = static_cast<std::uint32_t>(rd()) & 0x7fffffffu;
  return t;
}

constexpr std::size_t max_named_early = 64;

}  // namespace

waiter_registry::waiter_registry(subscribe_fn subscribe, unsubscribe_fn unsubscribe,
                                 refused_fn refused, std::string client_id)
    : subscribe_{std::move(subscribe)},
      unsubscribe_{std::move(unsubscribe)},
      on_refused_{std::move(refused)},
      client_id_{std::move(client_id)},
      tag_{random_tag()},
      next_{random_tag()} {}

std::uint64_t waiter_registry::make_ticket() {
  std::uint32_t n = 0;
  while (n == 0) n = ++next_;
  return (std::uint64_t{tag_} << 32) | n;
}

std::uint64_t waiter_registry::parse_ticket(std::string_view payload) {
  std::uint64_t t = 0;
  const auto* end = payload.data() + payload.size();
  auto [p, ec] = std::from_chars(payload.data(), end, t);
  if (ec != std::errc{} || p != end || payload.size() > 19 || (t >> 32) == 0) return 0;
  return t;
}

std::string wait_topic::key() const {
  switch (kind) {
    case lock_kind::fair:
      return "\x01" + name + '\x01' + owner;
    case lock_kind::read:
    case lock_kind::write:
      return "\x02" + name;
    case lock_kind::permits:
    case lock_kind::counting:
      return "\x03" + name;
    case lock_kind::latch:
      return "\x04" + name;
    case lock_kind::mutex:
      break;
  }
  return name;
}

waiter_registry::channel_listeners waiter_registry::channels_of(const wait_topic& topic,
                                                                const std::string& key) {
  channel_listeners channels;
  const auto& name = topic.name;
  switch (topic.kind) {
    case lock_kind::fair:
      channels.emplace_back(keys::fair_waiter_channel(name, topic.owner),
                            [this, key](const auto& ev) { on_redisson(key, ev); });
      return channels;
    case lock_kind::read:
    case lock_kind::write:
      channels.emplace_back(keys::rwlock_channel(name),
                            [this, key](const auto& ev) { on_redisson(key, ev); });
      return channels;
    case lock_kind::permits:
    case lock_kind::counting:
      channels.emplace_back(keys::semaphore_channel(name),
                            [this, key](const auto& ev) { on_permits(key, ev); });
      return channels;
    case lock_kind::latch:  // `0`: open (wakes all); `1`: a new count (harmless re-check)
      channels.emplace_back(keys::latch_channel(name),
                            [this, key](const auto& ev) { on_redisson(key, ev); });
      return channels;
    case lock_kind::mutex:
      break;
  }
  // Redisson's channel last: its confirmation (which wakes the waiters for one more check)
  // comes after the other two are confirmed.
  channels.emplace_back(keys::waiter_channel(name, client_id_),
                        [this, name](const auto& ev) { on_handoff(name, ev); });
  channels.emplace_back(keys::dlock_channel(name),
                        [this, name](const auto& ev) { on_dlock(name, ev); });
  channels.emplace_back(keys::lock_channel(name),
                        [this, name](const auto& ev) { on_redisson(name, ev); });
  return channels;
}

bool waiter_registry::add(const wait_topic& topic, waiter* w, std::uint64_t since) {
  const auto key = topic.key();
  auto [it, fresh] = names_.try_emplace(key);
  auto& e = it->second;
  if (fresh) {
    ++name_count_;
    e.zero_wakes_all = topic.kind == lock_kind::read || topic.kind == lock_kind::write ||
                       topic.kind == lock_kind::latch;
    e.ids = subscribe_(channels_of(topic, key));
  }
  e.waiters.push_back(w);
  if (!fresh && e.last_heard > since) return true;
  const auto early = std::find(named_early_.begin(), named_early_.end(), w->ticket);
  if (w->ticket == 0 || early == named_early_.end()) return false;
  named_early_.erase(early);
  return true;
}

void waiter_registry::remove(const wait_topic& topic, waiter* w) {
  auto it = names_.find(topic.key());
  if (it == names_.end()) return;
  it->second.waiters.remove(w);
  if (!it->second.waiters.empty()) return;
  unsubscribe_(std::move(it->second.ids));
  names_.erase(it);
  --name_count_;
}

void waiter_registry::pass_on(const std::string& name) {
  auto* e = find(name);
  if (e == nullptr || e->waiters.empty()) return;
  auto* w = e->waiters.front();
  e->waiters.splice(e->waiters.end(), e->waiters, e->waiters.begin());
  w->released_at = clock::now();
  w->wake(true);
}

std::size_t waiter_registry::waiters(const std::string& key) const {
  auto it = names_.find(key);
  return it == names_.end() ? 0 : it->second.waiters.size();
}

waiter_registry::entry* waiter_registry::find(const std::string& name) {
  auto it = names_.find(name);
  return it == names_.end() ? nullptr : &it->second;
}

void waiter_registry::wake_all(entry& e, bool foreign) {
  auto copy = e.waiters;  // a waiter may leave while woken
  const auto now = clock::now();
  for (auto* w : copy) {
    if (foreign) w->released_at = now;  // an unlock message (not a subscription's news)
    w->wake(foreign);
  }
}

bool waiter_registry::common(entry& e, const transport::pubsub_event& ev) {
  using type = transport::pubsub_event::type;
  e.last_heard = ++heard_;
  if (ev.what == type::resubscribed) {
    wake_all(e, false);
    return true;
  }
  if (ev.what == type::failed) {
    if (refused_.fetch_add(1) == 0 && on_refused_) on_refused_(ev.ec);
    return true;
  }
  return ev.what != type::message;
}

void waiter_registry::on_handoff(const std::string& name, const transport::pubsub_event& ev) {
  auto* e = find(name);
  if (!e || common(*e, ev)) return;
  const auto ticket = parse_ticket(ev.payload);
  if (ticket == 0) return;
  for (auto* w : e->waiters) {
    if (w->ticket == ticket) {
      w->released_at = clock::now();
      return w->wake(false);
    }
  }
  named_early_.push_back(ticket);
  if (named_early_.size() > max_named_early) named_early_.pop_front();
}

void waiter_registry::on_dlock(const std::string& name, const transport::pubsub_event& ev) {
  auto* e = find(name);
  if (!e || common(*e, ev) || ev.payload != "y") return;
  e->skip_zero = true;
  const auto at = clock::now() + yield_window + std::chrono::milliseconds{1};
  auto copy = e->waiters;
  const auto now = clock::now();
  for (auto* w : copy) {
    w->released_at = now;
    w->wake_by(at);
  }
}

void waiter_registry::on_redisson(const std::string& name, const transport::pubsub_event& ev) {
  auto* e = find(name);
  if (!e) return;
  if (ev.what == transport::pubsub_event::type::subscribed) {
    e->last_heard = ++heard_;
    return wake_all(*e, false);
  }
  if (common(*e, ev)) return;
  if (ev.payload == keys::read_unlock_message ||
      (e->zero_wakes_all && ev.payload == keys::unlock_message)) {
    return wake_all(*e, true);
  }
  if (ev.payload != keys::unlock_message) return;
  if (std::exchange(e->skip_zero, false) || e->waiters.empty()) return;
  // In turn: the woken waiter goes to the back, so a waiter whose attempt keeps losing (to a
  // Redisson process) does not take every wake-up of this process.
  pass_on(name);
}

void waiter_registry::on_permits(const std::string& key, const transport::pubsub_event& ev) {
  auto* e = find(key);
  if (!e) return;
  if (ev.what == transport::pubsub_event::type::subscribed) {
    e->last_heard = ++heard_;
    return wake_all(*e, false);
  }
  if (common(*e, ev)) return;
  // The message is the count now available: that many waiters, in turn (as Redisson wakes
  // that many of its own). A waiter that finds too few sleeps again; one that ends without an
  // attempt passes its wake-up on.
  std::int64_t count = 0;
  const auto* end = ev.payload.data() + ev.payload.size();
  if (std::from_chars(ev.payload.data(), end, count).ptr != end || count <= 0) return;
  const auto n = std::min<std::size_t>(static_cast<std::size_t>(count), e->waiters.size());
  for (std::size_t i = 0; i < n; ++i) pass_on(key);
}

}  // namespace dlock::detail
