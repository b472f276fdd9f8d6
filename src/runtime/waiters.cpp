#include "runtime/waiters.hpp"

#include <algorithm>
#include <vector>

#include "dlock/keys.hpp"

namespace dlock::detail {

void waiter_registry::add(const std::string& channel, waiter* w) {
  auto [it, fresh] = channels_.try_emplace(channel);
  it->second.waiters.push_back(w);
  if (fresh) {
    ++channel_count_;
    it->second.listener = subscribe_(channel, [this, channel](const transport::pubsub_event& ev) {
      on_event(channel, ev);
    });
  }
}

void waiter_registry::remove(const std::string& channel, waiter* w) {
  auto it = channels_.find(channel);
  if (it == channels_.end()) return;
  it->second.waiters.remove(w);
  if (!it->second.waiters.empty()) return;
  unsubscribe_(it->second.listener);
  channels_.erase(it);
  --channel_count_;
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
    case type::message:
      if (ev.payload == keys::read_unlock_message) {
        wake_all(channel);
      } else {
        wake_one(it->second);
      }
      return;
    case type::subscribed:
    case type::resubscribed:
      wake_all(channel);
      return;
    case type::failed:
      ++refused_;  // the waiters' own re-check timers carry on
      if (on_refused_) on_refused_(ev.ec);
      return;
  }
}

void waiter_registry::wake_one(const std::string& channel) {
  if (auto it = channels_.find(channel); it != channels_.end()) wake_one(it->second);
}

void waiter_registry::wake_one(entry& e) {
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
  std::vector<waiter*> snapshot{it->second.waiters.begin(), it->second.waiters.end()};
  for (auto* w : snapshot) {
    it = channels_.find(channel);
    if (it == channels_.end()) return;
    auto& ws = it->second.waiters;
    if (std::find(ws.begin(), ws.end(), w) != ws.end()) w->wake();
  }
}

}  // namespace dlock::detail
