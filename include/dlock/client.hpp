// dlock/client.hpp — a connection to Redis that every dlock synchronizer shares.
//
// A client owns an asio::io_context and the one I/O thread running it, one pipelined command
// connection and one pub/sub subscriber connection. It connects in the
// background and reconnects on its own; a call made while it is disconnected waits up to the
// connect timeout and then fails with the connect error.
//
//   dlock::client client{dlock::config::from_uri("redis://127.0.0.1:6379")};
//   auto rtt = client.ping();                         // throws dlock::lock_error on failure
//   std::error_code ec;
//   dlock::reply r = client.execute({"GET", "k"}, ec); // or the error_code form
//   co_await client.async_execute({"INCR", "n"}, asio::use_awaitable);
//   client.eval(script, {"{sale}:stock"}, {"1"});   // a user's Lua script (script.hpp)
//   for (auto& node : client.ping_nodes()) ...       // every node of a cluster, and its rtt
//   auto m = client.metrics();                       // counters and histograms (metrics.hpp)
//
// Thread safety: every member may be called from any thread. Sync calls (ping, ping_nodes, execute)
// block the calling thread; made on the client's own I/O thread they fail with errc::would_deadlock
// instead. Async completions run on the handler's associated executor; a handler without one
// runs on the client's I/O thread (or, once the client is shut down, on a system thread).
// Destruction (or shutdown()) completes every pending call with errc::shutdown and joins the I/O
// threads; it must not happen on an I/O thread.
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/async_result.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "dlock/config.hpp"
#include "dlock/detail/completion.hpp"
#include "dlock/error.hpp"
#include "dlock/metrics.hpp"
#include "dlock/node_status.hpp"
#include "dlock/reply.hpp"
#include "dlock/script.hpp"

namespace dlock {

namespace detail {
class client_impl;
struct client_access;  // dlock's own synchronizers and tests reach the client through it
}  // namespace detail

class client {
 public:
  using executor_type = asio::any_io_executor;

  // Starts the I/O thread and begins connecting. Throws lock_error(errc::invalid_uri) for an
  // invalid config and lock_error(errc::tls_config_invalid) for unusable TLS files.
  explicit client(config cfg);
  client(config cfg, std::error_code& ec);  // on error the client is unusable (calls fail)
  ~client();
  client(const client&) = delete;
  client& operator=(const client&) = delete;

  // Completes pending calls with errc::shutdown, closes the connections and joins the I/O
  // threads. Idempotent. On an I/O thread: errc::would_deadlock and nothing happens.
  void shutdown();
  void shutdown(std::error_code& ec);

  // This client's id: the `<uuid>` prefix of every owner field it writes.
  const std::string& id() const noexcept;
  const config& cfg() const noexcept;
  executor_type get_executor() const noexcept;
  // True on one of this client's I/O threads (where sync calls would deadlock).
  bool on_io_thread() const noexcept;

  // One Redis command. Error replies complete with their errc (and the reply holds the text).
  // In a Redis Cluster it goes to the master of its first argument's slot (the key of most
  // commands), following redirections.
  template <asio::completion_token_for<void(std::error_code, reply)> Token>
  auto async_execute(std::vector<std::string> args, Token&& token) {
    return asio::async_initiate<Token, void(std::error_code, reply)>(
        [this](auto handler, std::vector<std::string> a) {
          start_execute(std::move(a), detail::erase_handler<reply>(std::move(handler)));
        },
        token, std::move(args));
  }
  reply execute(std::vector<std::string> args);
  reply execute(std::vector<std::string> args, std::error_code& ec);

  // Runs a user's Lua script atomically (script.hpp): EVALSHA, and EVAL once on NOSCRIPT. In a
  // Redis Cluster, keys of different slots fail with errc::cross_slot before anything is sent.
  template <asio::completion_token_for<void(std::error_code, reply)> Token>
  auto async_eval(const script& s, std::vector<std::string> keys, std::vector<std::string> args,
                  Token&& token) {
    return asio::async_initiate<Token, void(std::error_code, reply)>(
        [this, s](auto handler, std::vector<std::string> k, std::vector<std::string> a) {
          start_eval(s, std::move(k), std::move(a),
                     detail::erase_handler<reply>(std::move(handler)));
        },
        token, std::move(keys), std::move(args));
  }
  reply eval(const script& s, std::vector<std::string> keys, std::vector<std::string> args);
  reply eval(const script& s, std::vector<std::string> keys, std::vector<std::string> args,
             std::error_code& ec);

  // What this client has done so far (metrics.hpp): acquisitions by kind and outcome, wait, hold
  // and hand-off times, renewals, leases lost, connections, redirects, failovers, errors.
  // Relaxed atomic loads only: cheap enough to call every second, from any thread.
  dlock::metrics metrics() const noexcept;

  // A PING round trip; returns its duration. In a Redis Cluster, to the master of slot 0.
  std::chrono::microseconds ping();
  std::chrono::microseconds ping(std::error_code& ec);

  // A PING to every node of the deployment, for diagnostics (`dlock ping`): in a Redis Cluster
  // to every node of the slot map, masters and replicas, listed shard by shard in slot order
  // (node_status.hpp; the first map read is awaited if the client has made none yet); on a
  // single server to that one. Masters the client uses are pinged on its own connections, the
  // other nodes in parallel on connections opened for this call and closed after it. A node
  // that does not answer is an entry with its `error`, not a failure of the call; rtt is PING's
  // round trip on an established connection. Takes up to about the connect timeout plus the
  // command timeout (and, waiting for the first map read, what it takes).
  // Errors: no slot map could be read (the seeds' connection error, errc::unsupported_server);
  // errc::shutdown, errc::would_deadlock.
  std::vector<node_status> ping_nodes();
  std::vector<node_status> ping_nodes(std::error_code& ec);

 private:
  friend struct detail::client_access;

  void start_execute(std::vector<std::string> args, detail::completion<reply> done);
  void start_eval(const script& s, std::vector<std::string> keys, std::vector<std::string> args,
                  detail::completion<reply> done);

  std::shared_ptr<detail::client_impl> impl_;
};

}  // namespace dlock
