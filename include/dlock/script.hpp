// dlock/script.hpp — a user's Lua script, run atomically on Redis through a dlock::client.
//
// Some problems want one atomic script rather than a lock: a flash sale's "check the window,
// check the user, check the stock, decrement, record" is one round trip and cannot interleave
// (examples/flash_sale.cpp). dlock::script carries the text and its SHA1; client::eval sends
// EVALSHA, and on NOSCRIPT (after a restart, SCRIPT FLUSH or a failover to a server that never
// saw it) sends the same call once as EVAL, which also caches it there.
//
//   static const dlock::script buy{R"(
//     if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1 then return -1 end
//     if tonumber(redis.call('GET', KEYS[1]) or '0') <= 0 then return 0 end
//     redis.call('DECR', KEYS[1]); redis.call('SADD', KEYS[2], ARGV[1]); return 1)"};
//   dlock::reply r = client.eval(buy, {"{sale}:stock", "{sale}:buyers"}, {user_id});
//
// Routing: in a Redis Cluster the call goes to the master of its keys' slot, following
// redirections; keys of different slots fail with errc::cross_slot before anything is sent
// (use a {tag}). A script without keys goes to the master of slot 0. On a single server any keys
// may be used. Scripts must be deterministic in what they write (Redis 7 replicates effects, so
// TIME may be read), and must declare every key they touch in KEYS.
//
// Errors: the script's error reply completes with its errc (errc::server_error for a Lua error,
// the reply holding the text), transport errors as client::execute's. Copies share the text.
#pragma once

#include <memory>
#include <string>

namespace dlock {

class script {
 public:
  // Computes the SHA1 Redis will know the text by. An empty text is allowed (Redis refuses
  // nothing but runs nothing).
  explicit script(std::string text);
  // Copies share the text; there is no moved-from state (a move copies).
  script(const script&) = default;
  script& operator=(const script&) = default;

  const std::string& text() const noexcept;
  const std::string& sha1() const noexcept;  // 40 lower-case hex digits, as SCRIPT LOAD returns

 private:
  struct state {
    std::string text, sha1;
  };
  std::shared_ptr<const state> s_;
};

}  // namespace dlock
