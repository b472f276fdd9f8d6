// One Redis connection's life: resolve, connect, TLS handshake (with host name verification),
// AUTH / SELECT / CLIENT SETNAME, reading replies, writing what the owner has queued, an idle
// health check, and reconnecting with jittered backoff after any failure.
//
// Fencing (a link whose fences_old_connections() is true: the command connection): requests a
// broken connection left without a reply may still reach the server later — held in a network
// that heals, retransmitted after the client gave up on the connection — and run after what the
// client sent since on its next connection: a release that deletes this owner's newer hold, an
// acquire that takes the lock again after its resend was released. So every connection learns
// who it is to the server (CLIENT INFO: id, addr, laddr) in its handshake, and the next one's
// handshake kills the one before (CLIENT KILL ID .. ADDR .. LADDR .. SKIPME yes: all must match,
// so another client is practically never hit — ids restart only with the server, and then the
// same address pair must come back too) before any request goes out on it: what the old
// connection delivered ran before, what it had not yet delivered never runs — on that server.
// A transient refusal of either (BUSY while a script runs, LOADING) drops the new connection
// before anything went out on it and keeps the fence for the next one. A refusal for good (an
// ACL user without the right, a server before 6.2) leaves the connection unfenced, as before:
// on_unfenced() says so, and the handshake goes on. The handshake always ends with a reply that
// must succeed (PING if nothing else), so NOAUTH and the like still fail it.
//
// What flows over the connection is decided by the derived class (the pipelined command
// connection, or the pub/sub subscriber) through the hooks below. Every hook and every member
// runs on the link's strand. A link lives in a shared_ptr: pending operations keep it alive.
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/ssl.hpp>
#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <string>
#include <vector>

#include "dlock/config.hpp"
#include "dlock/detail/unique_function.hpp"
#include "dlock/reply.hpp"
#include "resp/reader.hpp"
#include "transport/backoff.hpp"

namespace dlock::transport {

// Appends a new connection's handshake for `cfg` — AUTH, SELECT, CLIENT SETNAME `client_name`,
// each only if needed — and returns how many replies it asks for.
std::size_t append_handshake(std::string& out, const config& cfg, std::string_view client_name);

// A connection as the server knows it: CLIENT INFO's id, addr (the client's address as the
// server sees it) and laddr (the server's address the client connected to).
struct client_identity {
  std::string id, addr, laddr;
};
// CLIENT INFO's reply ("id=7 addr=127.0.0.1:50310 laddr=127.0.0.1:6379 fd=8 ...") as an
// identity; nullopt when it is not a string or lacks one of the three (an error reply, a server
// before 6.2).
std::optional<client_identity> parse_client_info(const reply& r);

// Whether bytes wait unread on socket `fd` (FIONREAD); false when it cannot be asked.
bool bytes_readable(int fd) noexcept;

// The executor on which a client's links and the runtime above them do all their work, one
// sequence: with one thread running the io_context (config::io_threads, default 1), the
// io_context's own executor, whose handlers that thread runs one at a time; with several, a
// strand of it. A strand there cost rounds of the scheduler (a handler posted into a running
// strand makes its invoker post itself again), each a poll of the reactor (an epoll_wait): W1
// async, docs/benchmarks.md. Without it, what a handler posts joins the queue when that handler
// returns, behind what other threads posted meanwhile (client_impl::shutdown allows for it).
// Called "the strand" throughout.
using executor_type = asio::any_io_executor;
executor_type make_executor(asio::io_context& ioc, unsigned threads);
// Whether the calling thread runs `ex`'s handlers now: inside the strand, or the one thread
// running the io_context.
bool running_in(const executor_type& ex) noexcept;

// Operation steps that the handler now running on the strand asked for (client_impl::post_start),
// run when that handler ends instead of posted behind it. A posted step costs the I/O thread a
// round of its scheduler, and a poll of its reactor, before its request leaves (W1 async,
// docs/benchmarks.md). A link's read handler defers for its executor (link::on_read): its
// replies complete operations, and a completion handler without an executor of its own runs
// there and starts the next (an async chain); the steps run after the read's walk of its
// replies, when a step may submit and write again. A step asked for by any other handler,
// another client or another thread is posted as before.
class deferred_starts {
 public:
  // Defers for `ex` on this thread until run() or the end of the scope (which must not outlive
  // `ex`).
  explicit deferred_starts(const executor_type& ex) noexcept;
  // Posts the steps that run() did not get to (the handler returned early, or a step threw).
  ~deferred_starts();
  deferred_starts(const deferred_starts&) = delete;
  deferred_starts& operator=(const deferred_starts&) = delete;
  // Stops deferring and runs the deferred steps in the order asked (steps they ask for are
  // posted).
  void run();
  // The scope deferring for `ex` on this thread, or null.
  static deferred_starts* for_executor(const executor_type& ex) noexcept;
  void push(detail::unique_function<void()> step) { steps_.push_back(std::move(step)); }

 private:
  void uninstall() noexcept;
  const executor_type& ex_;
  deferred_starts* outer_;
  bool installed_ = true;
  // A vector (which allocates nothing while empty, unlike a deque: most reads defer nothing);
  // steps_[next_..] are still to run.
  std::vector<detail::unique_function<void()>> steps_;
  std::size_t next_ = 0;
};

class link : public std::enable_shared_from_this<link> {
 public:
  using executor_type = transport::executor_type;
  using clock = std::chrono::steady_clock;

  // `strand` serializes this link's work; a client shares one strand between its links and the
  // runtime above them, so that all of its state lives in one sequence.
  link(executor_type strand, config cfg, std::shared_ptr<asio::ssl::context> tls);
  virtual ~link();
  link(const link&) = delete;
  link& operator=(const link&) = delete;

  // Starts connecting (thread-safe).
  void start();
  // Closes for good: no reconnect; on_stopped() runs (thread-safe, idempotent).
  void stop();

  const executor_type& get_executor() const noexcept { return strand_; }
  // Handshakes completed so far: 1 after the first connect, +1 per reconnect (thread-safe).
  std::uint64_t connects() const noexcept { return connects_.load(); }
  // True while a connection is up and past its handshake (thread-safe).
  bool connected() const noexcept { return up_.load(); }
  // Socket writes started so far (thread-safe): shows how well requests are coalesced.
  std::uint64_t writes() const noexcept { return writes_.load(); }
  // The server address of the connection up now, with connects() as it was when it came up;
  // nullopt while none is up (thread-safe).
  std::optional<std::pair<asio::ip::tcp::endpoint, std::uint64_t>> peer() const;

  // For a thread that sleeps until something this connection's messages complete (a blocking
  // acquire waiting for its grant, on the subscriber): registers the socket up now in the
  // epoll set `epfd`, edge-triggered, so that the thread wakes when bytes arrive — at the same
  // time as the I/O thread that handles them, not after it. Exclusive (EPOLLEXCLUSIVE): Linux
  // queues exclusive waiters behind the others on the socket (an implementation detail, not
  // the flag's contract, which is only "at least one exclusive waiter wakes"), so the I/O
  // thread, which has the message to handle, is woken first. Observed in W3 (docs/benchmarks.md):
  // the scheduler then mostly puts the I/O thread on the CPU that ran Redis' write and the
  // watcher on another; the other way round, the I/O thread waited for an idle CPU to wake.
  // Returns the descriptor registered, or -1 (no connection up, or epoll_ctl failed). The
  // registration ends with unwatch(), or by itself when the socket is closed (thread-safe).
  int watch(int epfd) const;
  void unwatch(int epfd, int fd) const noexcept;
  // Whether bytes are queued on the registered socket `fd`, not yet read by the I/O thread;
  // false once that socket is closed (thread-safe).
  bool bytes_queued(int fd) const noexcept;
  // Reads begun and reads handled so far (counted on the strand when on_read starts and ends;
  // read from any thread): a thread woken by watch() learns from them whether the I/O thread
  // is handling what woke it.
  const std::atomic<std::uint64_t>& reads_started() const noexcept { return reads_started_; }
  const std::atomic<std::uint64_t>& reads_handled() const noexcept { return reads_; }

 protected:
  // Hooks, all on the strand.
  virtual void on_ready() = 0;                          // handshake done; may want_write()
  virtual void on_reply(reply r) = 0;                   // a reply after the handshake
  virtual void on_down(std::error_code why) = 0;        // the connection broke or failed
  virtual void fill_write(std::string& out) = 0;        // append the bytes to send now
  virtual void on_idle() = 0;                           // nothing heard for health_check_interval
  virtual void on_stopped() = 0;                        // stop() took effect
  // Whether a new connection fences the one before (above), and what to do when the server
  // refuses it for good (`why`: the command and its error reply).
  virtual bool fences_old_connections() const { return false; }
  virtual void on_unfenced(const std::string& why) { (void)why; }

  // Writes what fill_write() gives, now or when the current write finishes.
  void want_write();
  // Closes the connection because of `why`; a reconnect follows after a backoff delay.
  void drop(std::error_code why);

  bool ready() const noexcept { return state_ == state::ready; }
  bool stopped() const noexcept { return state_ == state::stopped; }
  // Why the last connection or connect attempt failed; empty before any failure.
  std::error_code last_error() const noexcept { return last_error_; }
  const config& cfg() const noexcept { return cfg_; }

 private:
  enum class state { idle, connecting, handshaking, ready, stopped };
  struct stream;
  // The replies a handshake waits for, in order: most must succeed; a fence's and an
  // identification's may fail (above).
  enum class handshake_reply : std::uint8_t { required, fence, identify };

  void connect();
  void connect_to(std::uint64_t gen, std::shared_ptr<std::vector<asio::ip::tcp::endpoint>> eps, std::size_t at,
                  std::error_code last);
  void on_connected(std::uint64_t gen);
  void send_handshake();
  void on_handshake_reply(const reply& r);
  void read(std::uint64_t gen);
  void on_read(std::uint64_t gen, std::error_code ec, std::size_t n);
  void on_written(std::uint64_t gen, std::error_code ec);
  void arm_health_check();
  void close_stream();

  executor_type strand_;
  config cfg_;
  std::shared_ptr<asio::ssl::context> tls_;
  std::shared_ptr<stream> stream_;
  asio::ip::tcp::resolver resolver_;
  asio::steady_timer connect_timer_, retry_timer_, health_timer_;
  resp::reader reader_;
  backoff backoff_;
  std::vector<char> rbuf_;
  std::shared_ptr<std::string> wbuf_;
  state state_ = state::idle;
  bool writing_ = false;
  std::uint64_t gen_ = 0;  // bumped on every drop: completions of older connections are ignored
  std::vector<handshake_reply> handshake_;  // the replies the handshake asked for, in order
  std::size_t handshake_at_ = 0;            // the next one to come
  std::optional<client_identity> identity_;  // the connection up (or coming up) now, once known
  std::optional<client_identity> fence_;     // an earlier connection that may still deliver requests
  clock::time_point last_heard_{};
  std::error_code last_error_;
  std::atomic<std::uint64_t> connects_{0};
  std::atomic<std::uint64_t> writes_{0};
  std::atomic<bool> up_{false};
  std::atomic<std::uint64_t> reads_started_{0}, reads_{0};
  mutable std::mutex peer_mu_;
  std::optional<std::pair<asio::ip::tcp::endpoint, std::uint64_t>> peer_;  // guarded by peer_mu_
  int watch_fd_ = -1;  // guarded by peer_mu_: the socket up now, for watch(); -1 when none
};

}  // namespace dlock::transport
