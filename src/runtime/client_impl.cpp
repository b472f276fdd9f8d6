#include "runtime/client_impl.hpp"

#include <asio/post.hpp>
#include <asio/system_executor.hpp>
#include <cstdio>
#include <future>
#include <random>

#include "dlock/error.hpp"
#include "dlock/keys.hpp"
#include "resp/encoder.hpp"
#include "runtime/observer.hpp"
#include "transport/tls.hpp"

namespace dlock::detail {

std::string make_uuid() {
  std::random_device rd;
  std::mt19937_64 rng{(static_cast<std::uint64_t>(rd()) << 32) ^ rd()};
  std::uint64_t hi = rng(), lo = rng();
  hi = (hi & 0xffffffffffff0fffull) | 0x0000000000004000ull;  // version 4
  lo = (lo & 0x3fffffffffffffffull) | 0x8000000000000000ull;  // RFC 4122 variant
  char buf[37];
  std::snprintf(buf, sizeof buf, "%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(hi >> 32),
                static_cast<unsigned>((hi >> 16) & 0xffff), static_cast<unsigned>(hi & 0xffff),
                static_cast<unsigned>(lo >> 48),
                static_cast<unsigned long long>(lo & 0xffffffffffffull));
  return buf;
}

client_impl::client_impl(config cfg, std::error_code& ec, std::string& reason)
    : cfg_{std::move(cfg)},
      id_{make_uuid()},
      // One I/O thread: the hint 1 lets Asio queue its own posts and completions without its
      // scheduler lock. The plain hint only, never ASIO_CONCURRENCY_HINT_UNSAFE_IO: user threads
      // post to the strand and submit commands, so the scheduler and the reactor keep their locks.
      ioc_{ASIO_CONCURRENCY_HINT_1},
      work_{asio::make_work_guard(ioc_)},
      strand_{ioc_.get_executor()},
      observer_{&observer_of(strand_)} {
  ec = cfg_.validate(reason);
  std::shared_ptr<asio::ssl::context> tls;
  if (!ec && cfg_.tls.enabled) tls = transport::make_tls_context(cfg_.tls, ec, reason);
  init_error_ = ec;
  if (ec) cfg_.cluster_nodes.clear();  // nothing connects; one placeholder node is enough
  router_ = std::make_shared<topology::router>(strand_, cfg_, tls);
  observer_->set_config(cfg_);
  runner_ = std::make_unique<scripts::runner>(router_, observer_->script_reloads);
  watchdog_ = std::make_unique<detail::watchdog>(strand_, *runner_, cfg_.command_timeout,
                                                 cfg_.watchdog_lease, cfg_.cluster());
  waiters_ = std::make_unique<waiter_registry>(
      [this](waiter_registry::channel_listeners channels) {
        return router_->listen(std::move(channels));
      },
      [this](std::vector<transport::listener_id> ids) { router_->unlisten(std::move(ids)); },
      [this](std::error_code why) {
        warn(warning::channels_denied,
             "SUBSCRIBE refused (" + why.message() +
                 "): waiters cannot be woken by unlock messages and re-check every " +
                 std::to_string(cfg_.wait_recheck.count()) +
                 " ms instead; grant the user the redisson_lock__channel:* and "
                 "dlock_lock__channel:* channels");
      },
      id_);
  if (ec) {
    router_->stop();  // every call completes with shutdown; see submit() for the init error
  } else {
    // After a reconnect the server may have restarted (without persistence) or failed over:
    // ask at once whether the holds are still there rather than at the next renewal.
    router_->on_reconnect([this] { watchdog_->check_all(); });
    if (replication_.wanted()) {
      watchdog_->replicate_with(
          [this](std::function<void(std::error_code, bool)> done) {
            replication_.confirm(router_->replying(), std::move(done));
          },
          cfg_.on_shortfall == config::shortfall_policy::accept, cfg_.wait_timeout);
    }
    router_->when_unfenced([this](const std::string& why) {
      warn(warning::unfenced,
           why +
               ": a request a broken connection delivers late may run after its resend "
               "(docs/safety.md); grant the user client|info and client|kill");
    });
    router_->when_refused([](const std::string& why) {
      std::fprintf(stderr, "dlock: Redis Cluster mode refused by the server: %s\n", why.c_str());
    });
    router_->start();
    check_eviction_policy();
  }
  thread_ = std::thread{[this] { run(); }};
}

client_impl::~client_impl() {
  std::error_code ec;
  shutdown(ec);
  if (ec) {
    std::fputs("dlock: client destroyed on its own I/O thread; aborting\n", stderr);
    std::abort();
  }
}

// An exception thrown by a user's completion handler or callback that runs on the I/O thread
// (Asio lets it escape run()) must not terminate the process or stop the client: report it and
// keep running, as Asio recommends.
void client_impl::run() {
  for (;;) {
    try {
      ioc_.run();
      return;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "dlock: a handler on the I/O thread threw: %s\n", e.what());
    } catch (...) {
      std::fputs("dlock: a handler on the I/O thread threw a non-standard exception\n", stderr);
    }
  }
}

bool client_impl::on_io_thread() const noexcept {
  return ioc_.get_executor().running_in_this_thread();
}

void client_impl::shutdown(std::error_code& ec) {
  ec.clear();
  if (on_io_thread()) {
    ec = errc::would_deadlock;
    return;
  }
  {
    std::lock_guard lock{gate_};
    if (stopped_.exchange(true)) return;
  }
  // Abort what still runs — waiters leave the lock's queue (passing on a hand-off kept for
  // them), an acquire attempt in flight is given back if it was applied — then let all that
  // was sent on its way (fire-and-forget releases too) reach the server before the link
  // closes: when connected, wait briefly for a PING queued behind it (one connection keeps
  // order). Then stop both links and wait until each has failed its pending work with
  // errc::shutdown, so no handler is left behind when the io_context stops.
  std::promise<void> drained;
  // The sweep goes round twice: posted from here it could run before what a handler on the I/O
  // thread posted just before stopped_ was set (with one I/O thread and the concurrency hint 1,
  // those posts join the io_context's queue only when that handler returns). Posted again from
  // the I/O thread, it runs after them.
  auto sweep = [this, &drained] {
    watchdog_->stop();
    auto ops = ops_;  // abort() untracks
    for (auto* op : ops) op->abort(errc::shutdown);
    const auto bound =
        std::min<std::chrono::milliseconds>(cfg_.command_timeout, std::chrono::milliseconds{250});
    drain(std::chrono::steady_clock::now() + bound, drained);
  };
  asio::post(strand_, [this, sweep] { asio::post(strand_, sweep); });
  drained.get_future().wait();
  // Each link's stop runs in a post the router's stop makes (in a cluster, from a post of its
  // own): two posts later, every link has failed its pending work.
  std::promise<void> stopped;
  router_->stop();
  asio::post(strand_, [&] { asio::post(strand_, [&] { stopped.set_value(); }); });
  stopped.get_future().wait();
  work_.reset();
  ioc_.stop();
  if (thread_.joinable()) thread_.join();
}

// A reply can make more requests after the sweep's PING was queued — a NOSCRIPT's reload and
// resend of the script (a give-back's, or the acquisition it gives back), an undo that answers
// an attempt's reply — and the PING's reply would not wait for them: the acquisition could then
// reach the server without its give-back. So ping again behind them, until a PING finds nothing
// unanswered after it (or the bound).
// Every node's command connection is drained; `drained` is set when the last one is.
void client_impl::drain(std::chrono::steady_clock::time_point until, std::promise<void>& drained) {
  auto conns = router_->connections();
  auto left = std::make_shared<std::size_t>(conns.size() + 1);
  auto one_done = [left, &drained] {
    if (--*left == 0) drained.set_value();
  };
  for (auto& c : conns) drain_one(std::move(c), until, one_done);
  one_done();
}

void client_impl::drain_one(std::shared_ptr<transport::connection> conn,
                            std::chrono::steady_clock::time_point until,
                            std::function<void()> done) {
  const auto now = std::chrono::steady_clock::now();
  if (!conn->connected() || now >= until) return done();
  auto& c = *conn;
  c.submit(resp::encode_command({"PING"}), until - now,
           [this, conn = std::move(conn), until, done](std::error_code ec, reply) mutable {
             if (!ec && conn->unanswered() > 0) return drain_one(std::move(conn), until, done);
             done();
           });
}

void client_impl::submit(std::uint16_t slot, std::string payload, transport::reply_handler done) {
  // After shutdown a cluster's or sentinel's router would post to a stopped io_context, where
  // nothing runs: answer here. (One server's connection answers for itself.)
  const auto refused = init_error_       ? init_error_
                       : stopped_.load() ? make_error_code(errc::shutdown)
                                         : std::error_code{};
  if (refused) {
    asio::post(asio::system_executor{},
               [done = std::move(done), ec = refused]() mutable { done(ec, {}); });
    return;
  }
  router_->submit(slot, std::move(payload), cfg_.command_timeout, std::move(done));
}

}  // namespace dlock::detail
