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
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dlock/config.hpp"
#include "dlock/detail/unique_function.hpp"
#include "dlock/reply.hpp"
#include "resp/reader.hpp"
#include "transport/backoff.hpp"

namespace dlock::detail {
class observer;
}

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

// The executor on which a client's links and the runtime above them do all their work: the
// io_context's own, run by the client's one I/O thread, whose handlers run one at a time.
// Called "the strand" throughout.
using executor_type = asio::any_io_executor;
// Whether the calling thread runs `ex`'s handlers now.
bool running_in(const executor_type& ex) noexcept;

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

  // Called on the strand after every failed connect or broken connection (set before start()):
  // the cluster router reads the slot map again while a master it routes to is down.
  void when_down(std::function<void(std::error_code)> fn) { down_hook_ = std::move(fn); }
  // Sentinel mode (set before start()). `locate` is asked before every connect for the address
  // to connect to (the master as the sentinels name it; an error fails the attempt like a
  // refused connect), and the handshake ends with ROLE: a node that is not a master fails it
  // with errc::read_only after `not_master` runs (which asks the sentinels again). A connect
  // that fails otherwise runs `not_master` too: a sentinel may still name a dead master.
  using located = std::function<void(std::error_code, const endpoint&)>;
  void follow(std::function<void(located)> locate, std::function<void()> not_master) {
    locate_ = std::move(locate);
    not_master_ = std::move(not_master);
  }
  // Closes the connection up now, if it goes to another address than `master`, and connects
  // again at once (a failover moved the master): requests in flight complete with
  // errc::connection_lost, queued ones go to the new master. Strand only.
  void leave_unless(const endpoint& master);
  // The address of the connection up now or being made (strand only), and when this link last
  // wrote to each address it connected to (strand only): a test shows nothing went to a node
  // after the client learnt it was demoted.
  endpoint target() const { return {cfg_.host, cfg_.port}; }
  const std::vector<std::pair<endpoint, clock::time_point>>& last_writes() const noexcept {
    return last_writes_;
  }
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

 protected:
  detail::observer& observer() const noexcept { return obs_; }
  // Hooks, all on the strand.
  virtual void on_ready() = 0;                    // handshake done; may want_write()
  virtual void on_reply(reply r) = 0;             // a reply after the handshake
  virtual void on_down(std::error_code why) = 0;  // the connection broke or failed
  virtual void fill_write(std::string& out) = 0;  // append the bytes to send now
  virtual void on_idle() = 0;                     // nothing heard for health_check_interval
  virtual void on_stopped() = 0;                  // stop() took effect
  // Whether a new connection fences the one before (above), and what to do when the server
  // refuses it for good (`why`: the command and its error reply).
  virtual bool fences_old_connections() const { return false; }
  virtual void on_unfenced(const std::string& why) { (void)why; }

  // Writes what fill_write() gives, now or when the current write finishes.
  void want_write();
  // Counts and tells (events.hpp) a connection lost (why) or re-established.
  void report_connection(event_type what, std::error_code why) const;
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
  enum class handshake_reply : std::uint8_t { required, fence, identify, role };

  void connect();
  void resolve(std::uint64_t gen);
  void note_write();
  void connect_to(std::uint64_t gen, std::shared_ptr<std::vector<asio::ip::tcp::endpoint>> eps,
                  std::size_t at, std::error_code last);
  void on_connected(std::uint64_t gen);
  void send_handshake();
  void on_handshake_reply(const reply& r);
  void read(std::uint64_t gen);
  void on_read(std::uint64_t gen, std::error_code ec, std::size_t n);
  void on_written(std::uint64_t gen, std::error_code ec);
  void arm_health_check();
  void close_stream();

  executor_type strand_;
  detail::observer& obs_;  // the client's metrics and events (a service of its io_context)
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
  std::vector<handshake_reply> handshake_;   // the replies the handshake asked for, in order
  std::size_t handshake_at_ = 0;             // the next one to come
  std::optional<client_identity> identity_;  // the connection up (or coming up) now, once known
  std::optional<client_identity> fence_;  // an earlier connection that may still deliver requests
  clock::time_point last_heard_{};
  std::error_code last_error_;
  std::function<void(std::error_code)> down_hook_;
  std::function<void(located)> locate_;
  std::function<void()> not_master_;
  std::vector<std::pair<endpoint, clock::time_point>> last_writes_;
  std::atomic<std::uint64_t> connects_{0};
  std::atomic<std::uint64_t> writes_{0};
  std::atomic<bool> up_{false};
  mutable std::mutex peer_mu_;
  std::optional<std::pair<asio::ip::tcp::endpoint, std::uint64_t>> peer_;  // guarded by peer_mu_
};

}  // namespace dlock::transport
