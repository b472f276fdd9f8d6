// What a dlock::client is made of: the io_context and its threads, the command connection, the
// subscriber connection, the script runner and the client's id.
#pragma once

#include <asio/executor_work_guard.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <asio/system_executor.hpp>
#include <mutex>

#include "dlock/detail/completion.hpp"
#include "dlock/error.hpp"
#include <asio/io_context.hpp>
#include <atomic>
#include <future>
#include <memory>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "dlock/config.hpp"
#include "runtime/caller_wake.hpp"
#include "runtime/hold.hpp"
#include "runtime/waiters.hpp"
#include "runtime/watchdog.hpp"
#include "scripts/runner.hpp"
#include "transport/caller_channel.hpp"
#include "transport/connection.hpp"
#include "transport/subscriber.hpp"

namespace dlock::detail {

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
  void run();  // one I/O thread
  bool on_io_thread() const noexcept;

  // Sends one command; `done` runs on the connection's strand.
  void submit(std::string payload, transport::reply_handler done);

  const config& cfg() const noexcept { return cfg_; }
  const std::string& id() const noexcept { return id_; }
  asio::io_context& io() noexcept { return ioc_; }
  // The strand on which the connections, the subscriber and the runtime do all their work.
  const transport::link::executor_type& strand() const noexcept { return strand_; }
  transport::connection& connection() noexcept { return *conn_; }
  transport::subscriber& subscriber() noexcept { return *sub_; }
  const scripts::runner& scripts() const noexcept { return *runner_; }
  std::error_code init_error() const noexcept { return init_error_; }
  // Strand only (watchdog, waiters); thread-safe (holds).
  detail::watchdog& watchdog() noexcept { return *watchdog_; }
  waiter_registry& waiters() noexcept { return *waiters_; }
  hold_table& holds() noexcept { return holds_; }
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
      asio::post(asio::system_executor{}, [done = std::move(done), ec = init_error_]() mutable {
        done(ec, T{}...);
      });
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
  // id of the operation doing it; a new acquire by the same owner erases the entry (sync/acquire).
  std::unordered_map<std::string, std::uintptr_t>& undoing() noexcept { return undoing_; }
  // The caller's channel for a blocking call on the calling thread (transport/caller_channel.hpp),
  // or an empty turn: none configured, busy, shut down, not connected, or an acquisition of this
  // client is being given back in the background (that give-back must reach the server before
  // any new acquire: one connection keeps the order). Thread-safe.
  transport::caller_channel::turn caller_turn(transport::clock::time_point deadline) {
    if (!caller_ || stopping_.load() || undos_.load() != 0) return {};
    return caller_->take(deadline);
  }
  // A request on the caller's channel got no reply: it may still be on its way (in a socket
  // buffer, a proxy, a retransmission). CLIENT KILL ID of that channel connection goes out on
  // the command connection ahead of anything the caller sends there next, so Redis has run
  // the request before, or never will (with an ACL user refused CLIENT KILL, the channel's
  // reset socket is all that stops it). Thread-safe.
  void fence_caller_channel(std::uint64_t redis_client_id);
  // shutdown() has begun (the caller's channel closes first, then the strand stops).
  bool stopping() const noexcept { return stopping_.load(); }
  // Calls made on the caller's channel (for tests and metrics).
  std::uint64_t caller_calls() const noexcept { return caller_ ? caller_->calls() : 0; }
  // Strand only: after changing undoing().
  void undos_changed() { undos_.store(undoing_.size()); }
  // Acquisitions being given back in the background (thread-safe; for tests and metrics).
  std::size_t undos() const noexcept { return undos_.load(); }
  // Grants taken: acquisitions an unlock handed over (config::grants). Incremented on the
  // strand, readable from any thread (for tests and metrics).
  std::atomic<std::uint64_t>& grants_taken() noexcept { return grants_taken_; }
  // Grants that came too late to trust (or not for the op's own attempt): taken by an attempt.
  std::atomic<std::uint64_t>& grants_untrusted() noexcept { return grants_untrusted_; }
  // Grants that came while the waiter's attempt was out: held until that attempt's reply.
  std::atomic<std::uint64_t>& grants_deferred() noexcept { return grants_deferred_; }
  // The one turn of a client's blocking callers to sleep watching the subscriber's socket
  // (runtime/caller_wake.hpp).
  watch_slot& watch_turn() noexcept { return watch_turn_; }
  // Blocking waits that watched the subscriber (for tests and metrics).
  std::atomic<std::uint64_t>& watched_waits() noexcept { return watched_waits_; }
  // Strand only: gives `w` to config::on_warning (or stderr), once per kind per client.
  void warn(warning w, const std::string& message);

 private:
  // Asks the server's maxmemory-policy once, in the background (warnings.cpp).
  void check_eviction_policy();
  // Shutdown: PINGs behind what was sent until a PING's reply finds nothing submitted after it
  // unanswered, or `until`; then sets `drained` (strand only).
  void drain(std::chrono::steady_clock::time_point until, std::promise<void>& drained);
  // Posts an operation's step to the strand. Once it has run, if no other is queued behind it,
  // what it submitted goes out at once instead of after a posted flush's turn
  // (connection::end_step). Steps queued together (the next steps of fifty lockers, made by one
  // read's replies) are not sent one by one: the last of them sends what they submitted. (A
  // step that throws leaves its requests to a posted flush.) Asked for by the handler of a
  // link's read on this client's strand (an async chain's next step, started from the
  // completion of the last), a step runs at that handler's end instead of posted
  // (transport::deferred_starts): no scheduler round before its request leaves.
  template <class Fn>
  void post_start(Fn fn) {
    starts_queued_.fetch_add(1, std::memory_order_relaxed);
    try {
      auto step = [this, fn = std::move(fn)]() mutable {
        starts_queued_.fetch_sub(1, std::memory_order_relaxed);
        conn_->begin_step();
        try {
          fn();
        } catch (...) {
          conn_->end_step(false);
          throw;
        }
        conn_->end_step(starts_queued_.load(std::memory_order_relaxed) == 0);
      };
      if (auto* d = transport::deferred_starts::for_executor(strand_)) {
        d->push(std::move(step));
      } else {
        asio::post(strand_, std::move(step));
      }
    } catch (...) {
      starts_queued_.fetch_sub(1, std::memory_order_relaxed);
      throw;
    }
  }

 private:
  config cfg_;
  std::string id_;
  std::error_code init_error_;
  mutable asio::io_context ioc_;  // mutable: get_executor() is non-const in Asio
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  transport::link::executor_type strand_;  // all of this client's state lives on it
  std::shared_ptr<transport::connection> conn_;
  std::shared_ptr<transport::subscriber> sub_;
  std::unique_ptr<scripts::runner> runner_;
  std::unique_ptr<transport::caller_channel> caller_;  // null: not used (config::caller_io)
  std::atomic<std::size_t> undos_{0};  // undoing_.size(), readable from any thread
  std::atomic<std::uint32_t> starts_queued_{0};  // post_start: posted, not yet run
  std::atomic<std::uint64_t> grants_taken_{0}, grants_untrusted_{0}, grants_deferred_{0};
  std::unique_ptr<detail::watchdog> watchdog_;
  std::unique_ptr<waiter_registry> waiters_;
  asio::steady_timer linger_timer_;  // strand: the waiter registry's next sweep of lingering channels
  hold_table holds_;
  std::unordered_set<abortable*> ops_;  // strand only
  std::vector<std::thread> threads_;
  std::atomic<bool> stopped_{false};
  std::atomic<bool> stopping_{false};
  watch_slot watch_turn_;
  std::atomic<std::uint64_t> watched_waits_{0};
  unsigned warned_ = 0;  // strand only: bit per warning already given
  std::unordered_map<std::string, std::uintptr_t> undoing_;  // strand only
  std::mutex gate_;  // orders post_or_shutdown against shutdown
};

// A random RFC 4122 version-4 UUID, lower-case with dashes (as Redisson's client ids).
std::string make_uuid();

}  // namespace dlock::detail
