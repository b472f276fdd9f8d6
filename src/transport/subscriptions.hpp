// The pub/sub state of one subscriber connection, with no sockets: which channels and patterns
// have listeners, which SUBSCRIBE/UNSUBSCRIBE/PING commands await confirmation, and what each
// pushed reply means for the listeners.
//
// A channel is subscribed on its first listener and unsubscribed after its last. After a
// reconnect every channel is subscribed again, and each listener is told (event::resubscribed)
// once its channel is confirmed: messages published while the link was down are lost, so the
// listener must re-check whatever it waits for.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "dlock/reply.hpp"

namespace dlock::transport {

struct pubsub_event {
  enum class type {
    subscribed,    // the channel (or pattern) is confirmed: messages from now on arrive
    message,       // a message on the channel (pattern: `pattern` is set)
    resubscribed,  // confirmed again after a reconnect: messages may have been missed
    failed,        // the server refused the subscription (ec, e.g. errc::no_permission;
                   // errc::moved for a shard channel of a slot the node does not serve)
    moved,         // a shard channel's node stopped serving its slot (an unsolicited
                   // sunsubscribe): the listener was dropped here; listen where the slot lives
  };
  type what;
  std::string_view channel;  // for pattern listeners, the channel that matched
  std::string_view pattern;
  std::string_view payload;
  std::error_code ec;
};

using pubsub_listener = std::function<void(const pubsub_event&)>;
using listener_id = std::uint64_t;

class subscriptions {
 public:
  using clock = std::chrono::steady_clock;
  // SUBSCRIBE, PSUBSCRIBE, or SSUBSCRIBE (a Redis Cluster shard channel, Redis >= 7.0).
  enum class kind : std::uint8_t { channel, pattern, shard };

  // Adds a listener. Returns true when its channel needs a SUBSCRIBE now (first listener;
  // call `subscribe_command`). If the channel is already confirmed, the listener gets
  // `subscribed` at once.
  bool add(listener_id id, kind k, const std::string& name, pubsub_listener fn);
  // Removes a listener. Returns its channel's name and kind if that was the last listener
  // (the caller sends an UNSUBSCRIBE), else nullopt.
  std::optional<std::pair<kind, std::string>> remove(listener_id id);

  // Appends the command for `names` to `out` and records that it awaits confirmation.
  void subscribe_command(std::string& out, kind k, const std::vector<std::string>& names,
                         clock::time_point deadline);
  void unsubscribe_command(std::string& out, kind k, const std::vector<std::string>& names,
                           clock::time_point deadline);
  void ping_command(std::string& out, clock::time_point deadline);

  // The connection is up (again): appends SUBSCRIBE/PSUBSCRIBE of everything with listeners.
  void resubscribe_all(std::string& out, clock::time_point deadline);
  // The connection broke: pending commands are void, nothing is confirmed, and every listener
  // present now gets `resubscribed` (instead of `subscribed`) on its next confirmation.
  void on_disconnect();

  // Interprets a reply. Returns false if it makes no sense here (protocol violation).
  bool on_reply(const reply& r);
  // A SUBSCRIBE of several channels that the server refused (NOPERM refuses the whole command
  // for one channel) is sent again as one command per channel, so that the channels allowed
  // are heard: appends those commands (call after on_reply). Returns whether it appended any.
  bool split_refused(std::string& out, clock::time_point deadline);

  // True if a command waits for confirmation past its deadline (the link is stuck).
  bool overdue(clock::time_point now) const;
  // True while any command awaits confirmation.
  bool awaiting() const noexcept { return !pending_.empty(); }

  bool confirmed(kind k, const std::string& name) const;
  std::size_t channels() const noexcept { return topics_.size(); }
  std::size_t listeners() const noexcept { return owner_.size(); }

 private:
  using key = std::pair<kind, std::string>;
  struct topic {
    std::map<listener_id, pubsub_listener> listeners;
    bool confirmed = false;
    bool resubscribing = false;  // the next confirmation is a resubscription
  };
  struct command {
    enum class op : std::uint8_t { subscribe, unsubscribe, ping } what;
    kind k;
    std::vector<std::string> names;
    std::size_t left;  // confirmations still owed
    clock::time_point deadline;
  };
  void notify(key k, const pubsub_event& ev);  // by value: a callback may erase the topic
  bool on_confirmation(std::string_view type, std::string_view name);
  bool on_dropped(std::string_view name);
  bool on_pong();
  void on_error(const reply& r);
  void on_message(kind k, std::string_view pattern, std::string_view channel,
                  std::string_view payload);

  std::map<key, topic> topics_;
  std::map<listener_id, key> owner_;
  std::deque<command> pending_;
  std::vector<command> refused_;  // multi-channel SUBSCRIBEs to send again one by one
};

}  // namespace dlock::transport
