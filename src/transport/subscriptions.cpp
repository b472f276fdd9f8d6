#include "transport/subscriptions.hpp"

#include <map>

#include "dlock/error.hpp"
#include "resp/encoder.hpp"

namespace dlock::transport {
namespace {

using kind = subscriptions::kind;

std::string_view command_of(kind k, bool sub) {
  switch (k) {
    case kind::pattern:
      return sub ? "PSUBSCRIBE" : "PUNSUBSCRIBE";
    case kind::shard:
      return sub ? "SSUBSCRIBE" : "SUNSUBSCRIBE";
    case kind::channel:
      break;
  }
  return sub ? "SUBSCRIBE" : "UNSUBSCRIBE";
}

// The kind a push's type names ("psubscribe", "smessage", ...) by its first letter.
kind kind_of(std::string_view type) {
  if (type.front() == 'p') return kind::pattern;
  if (type.front() == 's' && type != "subscribe") return kind::shard;
  return kind::channel;
}

}  // namespace

bool subscriptions::add(listener_id id, kind k, const std::string& name, pubsub_listener fn) {
  auto [it, fresh] = topics_.try_emplace({k, name});
  auto& t = it->second;
  auto& stored = t.listeners.emplace(id, std::move(fn)).first->second;
  owner_.emplace(id, key{k, name});
  if (t.confirmed) {
    auto call = stored;  // the listener may remove itself (destroying `stored`) while running
    call(pubsub_event{pubsub_event::type::subscribed,
                      k != kind::pattern ? name : "",
                      k == kind::pattern ? name : "",
                      {},
                      {}});
  }
  return fresh;
}

std::optional<std::pair<subscriptions::kind, std::string>> subscriptions::remove(listener_id id) {
  auto o = owner_.find(id);
  if (o == owner_.end()) return std::nullopt;
  auto k = o->second;
  owner_.erase(o);
  auto t = topics_.find(k);
  if (t == topics_.end()) return std::nullopt;
  t->second.listeners.erase(id);
  if (!t->second.listeners.empty()) return std::nullopt;
  topics_.erase(t);
  return k;
}

void subscriptions::subscribe_command(std::string& out, kind k,
                                      const std::vector<std::string>& names,
                                      clock::time_point deadline) {
  std::vector<std::string_view> args{command_of(k, true)};
  args.insert(args.end(), names.begin(), names.end());
  resp::append_command(out, args);
  pending_.push_back({command::op::subscribe, k, names, names.size(), deadline});
}

void subscriptions::unsubscribe_command(std::string& out, kind k,
                                        const std::vector<std::string>& names,
                                        clock::time_point deadline) {
  std::vector<std::string_view> args{command_of(k, false)};
  args.insert(args.end(), names.begin(), names.end());
  resp::append_command(out, args);
  pending_.push_back({command::op::unsubscribe, k, names, names.size(), deadline});
}

void subscriptions::ping_command(std::string& out, clock::time_point deadline) {
  resp::append_command(out, {"PING"});
  pending_.push_back({command::op::ping, kind::channel, {}, 1, deadline});
}

void subscriptions::resubscribe_all(std::string& out, clock::time_point deadline) {
  // One command per kind; one the server refuses as a whole (NOPERM for one channel) is sent
  // again channel by channel (split_refused), so a refused channel fails alone.
  std::map<kind, std::vector<std::string>> names;
  for (auto& [k, t] : topics_) names[k.first].push_back(k.second);
  for (auto& [k, list] : names) subscribe_command(out, k, list, deadline);
}

bool subscriptions::split_refused(std::string& out, clock::time_point deadline) {
  bool any = false;
  for (auto& c : refused_) {
    for (auto& name : c.names) {
      if (!topics_.contains({c.k, name})) continue;  // nobody listens any more
      subscribe_command(out, c.k, {name}, deadline);
      any = true;
    }
  }
  refused_.clear();
  return any;
}

void subscriptions::on_disconnect() {
  pending_.clear();
  refused_.clear();  // resubscribe_all sends each topic on its own
  // Whoever listens now may miss messages until the next confirmation says otherwise. Topics
  // added later, while the link is down, are told `subscribed` like on a first connect.
  for (auto& [k, t] : topics_) {
    t.confirmed = false;
    t.resubscribing = true;
  }
}

bool subscriptions::overdue(clock::time_point now) const {
  return !pending_.empty() && pending_.front().deadline <= now;
}

bool subscriptions::confirmed(kind k, const std::string& name) const {
  auto it = topics_.find({k, name});
  return it != topics_.end() && it->second.confirmed;
}

void subscriptions::notify(key k, const pubsub_event& ev) {
  // A listener may add or remove listeners (itself included) from its callback, which may even
  // erase the topic: take the ids first and look the topic up again for each.
  std::vector<listener_id> ids;
  if (auto it = topics_.find(k); it != topics_.end()) {
    for (auto& [id, fn] : it->second.listeners) ids.push_back(id);
  }
  for (auto id : ids) {
    auto it = topics_.find(k);
    if (it == topics_.end()) return;
    auto fn = it->second.listeners.find(id);
    if (fn == it->second.listeners.end()) continue;
    auto call = fn->second;  // the callback may remove itself while running
    call(ev);
  }
}

bool subscriptions::on_reply(const reply& r) {
  if (r.is_error()) {
    if (pending_.empty()) return false;
    on_error(r);
    return true;
  }
  // Outside subscribed mode (no channel or pattern subscribed) the server answers PING with a
  // plain +PONG rather than ["pong", ""].
  if (r.type() == reply::kind::simple_string && r.str() == "PONG") return on_pong();
  if (!r.is_array() || r.elements().empty() || !r.elements()[0].is_string()) return false;
  const auto& e = r.elements();
  const std::string_view type = e[0].str();
  if ((type == "message" || type == "smessage") && e.size() == 3) {
    on_message(kind_of(type), {}, e[1].str(), e[2].str());
    return true;
  }
  if (type == "pmessage" && e.size() == 4) {
    on_message(kind::pattern, e[1].str(), e[2].str(), e[3].str());
    return true;
  }
  if (type == "pong") return on_pong();
  if (e.size() != 3) return false;
  return on_confirmation(type, e[1].str());
}

bool subscriptions::on_pong() {
  if (pending_.empty() || pending_.front().what != command::op::ping) return false;
  pending_.pop_front();
  return true;
}

bool subscriptions::on_confirmation(std::string_view type, std::string_view name) {
  const bool sub = type == "subscribe" || type == "psubscribe" || type == "ssubscribe";
  const bool unsub = type == "unsubscribe" || type == "punsubscribe" || type == "sunsubscribe";
  if (!sub && !unsub) return false;
  const kind k = kind_of(type);
  const auto op = sub ? command::op::subscribe : command::op::unsubscribe;
  if (pending_.empty() || pending_.front().what != op || pending_.front().k != k) {
    return k == kind::shard && unsub && on_dropped(name);
  }
  auto& head = pending_.front();
  if (--head.left == 0) pending_.pop_front();
  auto it = topics_.find({k, std::string(name)});
  if (it == topics_.end()) return true;  // nobody listens any more; its UNSUBSCRIBE is queued
  auto& t = it->second;
  if (unsub) {
    // An UNSUBSCRIBE sent after the last listener left, confirmed after a new one arrived
    // (whose SUBSCRIBE follows in the pipeline): not subscribed until that confirmation.
    t.confirmed = false;
    return true;
  }
  t.confirmed = true;
  const auto what =
      t.resubscribing ? pubsub_event::type::resubscribed : pubsub_event::type::subscribed;
  t.resubscribing = false;
  notify(it->first, {what, k != kind::pattern ? name : "", k == kind::pattern ? name : "", {}, {}});
  return true;
}

// An sunsubscribe nobody asked for: the node no longer serves the channel's slot (resharded or
// demoted). Its listeners are told and dropped; they listen again where the slot now lives.
bool subscriptions::on_dropped(std::string_view name) {
  auto it = topics_.find({kind::shard, std::string(name)});
  if (it == topics_.end()) return true;
  std::vector<listener_id> ids;
  for (auto& [id, fn] : it->second.listeners) ids.push_back(id);
  notify(it->first, {pubsub_event::type::moved, name, "", {}, {}});
  for (auto id : ids) remove(id);  // what a callback left
  return true;
}

void subscriptions::on_error(const reply& r) {
  auto head = std::move(pending_.front());
  pending_.pop_front();
  if (head.what != command::op::subscribe) return;
  if (head.names.size() > 1) return refused_.push_back(std::move(head));
  const std::error_code ec = classify_error_reply(r.str());
  for (const auto& name : head.names) {
    auto it = topics_.find({head.k, name});
    if (it == topics_.end()) continue;
    it->second.resubscribing = false;
    notify(it->first, {pubsub_event::type::failed,
                       head.k != kind::pattern ? std::string_view{name} : "",
                       head.k == kind::pattern ? std::string_view{name} : "",
                       {},
                       ec});
  }
}

void subscriptions::on_message(kind k, std::string_view pattern, std::string_view channel,
                               std::string_view payload) {
  auto it = topics_.find({k, std::string(k == kind::pattern ? pattern : channel)});
  if (it == topics_.end()) return;
  notify(it->first, {pubsub_event::type::message, channel, pattern, payload, {}});
}

}  // namespace dlock::transport
