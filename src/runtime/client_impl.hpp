// What a dlock::client is made of: the io_context and its one I/O thread, the command connection,
// the subscriber connection, the script runner and the client's id.
#pragma once

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <asio/system_executor.hpp>
#include <atomic>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "dlock/config.hpp"
#include "dlock/detail/completion.hpp"
#include "dlock/error.hpp"
#include "runtime/hold.hpp"
#include "runtime/replication.hpp"
#include "runtime/waiters.hpp"
#include "runtime/watchdog.hpp"
#include "scripts/runner.hpp"
#include "topology/router.hpp"

namespace dlock::detail {

class observer;

// An operation that may wait indefinitely (an acquire); shutdown completes it with an error.
class abortable {
 public:
  virtual ~abortable() = default;
  virtual void abort(std::error_code ec) = 0;
};

class client_impl {
 public:
  // On error (invalid config or TLS files) `ec` is set, nothing connects and every call
  // completes with that error.
  client_impl(config cfg, std::error_code& ec, std::string& reason);
  ~client_impl();

  void shutdown(std::error_code& ec);
  void run();  // the I/O thread
  bool on_io_thread() const noexcept;

  // Sends one command about `slot` (where it goes in a cluster); `done` runs on the strand.
  // Thread-safe.
  void submit(std::uint16_t slot, std::string payload, transport::reply_handler done);

  const config& cfg() const noexcept { return cfg_; }
  const std::string& id() const noexcept { return id_; }
  asio::io_context& io() noexcept { return ioc_; }
  // The strand on which the connections, the subscriber and the runtime do all their work.
  const transport::link::executor_type& strand() const noexcept { return strand_; }
  topology::router& router() noexcept { return *router_; }
  // A single server's links (tests and tools that look at one server's connections).
  transport::connection& connection() noexcept { return router_->connection(); }
  transport::subscriber& subscriber() noexcept { return router_->subscriber(); }
  const scripts::runner& scripts() const noexcept { return *runner_; }
  std::error_code init_error() const noexcept { return init_error_; }
  // Strand only (watchdog, waiters); thread-safe (holds).
  detail::watchdog& watchdog() noexcept { return *watchdog_; }
  // The replica policy (strand only): confirm(conn...) in a write's reply handler.
  detail::replication& replication() noexcept { return replication_; }
  waiter_registry& waiters() noexcept { return *waiters_; }
  hold_table& holds() noexcept { return holds_; }
  // The client's metrics and events (runtime/observer.hpp). Thread-safe.
  detail::observer& observer() const noexcept { return *observer_; }
  bool stopped() const noexcept { return stopped_.load(); }
  // Runs fn(std::move(done)) on the strand; once the client is shut down, completes `done`
  // with errc::shutdown (from asio::system_executor) instead, and for a client that could not
  // start (init_error()), with that error. Thread-safe. Everything posted through here before
  // shutdown runs before shutdown's sweep of tracked operations.
  template <class... T, class Fn>
  void post_or_shutdown(completion<T...> done, Fn fn) {
    std::unique_lock lock{gate_};
    if (!stopped_.load() && init_error_) {
      lock.unlock();
      asio::post(asio::system_executor{},
                 [done = std::move(done), ec = init_error_]() mutable { done(ec, T{}...); });
      return;
    }
    if (!stopped_.load()) {
      post_start([fn = std::move(fn), done = std::move(done)]() mutable { fn(std::move(done)); });
      return;
    }
    lock.unlock();
    asio::post(asio::system_executor{},
               [done = std::move(done)]() mutable { done(errc::shutdown, T{}...); });
  }
  // Posts fn to the strand unless the client is shut down (then drops it and returns false).
  // Thread-safe; like post_or_shutdown, what it posts runs before shutdown's sweep.
  template <class Fn>
  bool post_if_running(Fn fn) {
    std::lock_guard lock{gate_};
    if (stopped_.load()) return false;
    post_start(std::move(fn));
    return true;
  }
  // Strand only: operations to abort with errc::shutdown at shutdown.
  void track(abortable* op) { ops_.insert(op); }
  void untrack(abortable* op) { ops_.erase(op); }
  // Strand only: acquisitions being given back in the background, by "<owner> <name>", with the
  // id of the give-back; a new acquire by the same owner erases the entry (sync/mutex_ops.cpp).
  std::unordered_map<std::string, std::uint64_t>& undoing() noexcept { return undoing_; }
  // Strand only: gives `w` to config::on_warning (or stderr), once per kind per client.
  void warn(warning w, const std::string& message);

 private:
  // Asks the server's maxmemory-policy once, in the background (warnings.cpp).
  void check_eviction_policy();
  // Shutdown: PINGs behind what was sent until a PING's reply finds nothing submitted after it
  // unanswered, or `until`; then sets `drained` (strand only).
  void drain(std::chrono::steady_clock::time_point until, std::promise<void>& drained);
  void drain_one(std::shared_ptr<transport::connection> conn,
                 std::chrono::steady_clock::time_point until, std::function<void()> done);
  template <class Fn>
  void post_start(Fn fn) {
    asio::post(strand_, std::move(fn));
  }

 private:
  config cfg_;
  std::string id_;
  std::error_code init_error_;
  mutable asio::io_context ioc_;  // mutable: get_executor() is non-const in Asio
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  transport::link::executor_type strand_;  // all of this client's state lives on it
  detail::observer* observer_;             // a service of ioc_: lives as long as it
  std::shared_ptr<topology::router> router_;
  std::unique_ptr<scripts::runner> runner_;
  std::unique_ptr<detail::watchdog> watchdog_;
  detail::replication replication_{cfg_};
  std::unique_ptr<waiter_registry> waiters_;
  hold_table holds_;
  std::unordered_set<abortable*> ops_;  // strand only
  std::thread thread_;
  std::atomic<bool> stopped_{false};
  unsigned warned_ = 0;  // strand only: bit per warning already given
  std::unordered_map<std::string, std::uint64_t> undoing_;  // strand only
  std::mutex gate_;  // orders post_or_shutdown against shutdown
};

// A random RFC 4122 version-4 UUID, lower-case with dashes (as Redisson's client ids).
std::string make_uuid();

}  // namespace dlock::detail
