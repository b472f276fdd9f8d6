// Real redis-server processes for dlock's integration tests (no mocks, no GoogleTest).
//
//   dlock::test::redis_server srv;                        // plain server on a free port
//   dlock::client c{dlock::config::from_uri(srv.url())};
//   srv.command({"CLIENT", "KILL", "TYPE", "pubsub"});     // admin commands over a side channel
//   srv.pause();  ...  srv.resume();                      // SIGSTOP / SIGCONT
//   srv.restart();                                        // same port and arguments, no data
//
//   auto tls = dlock::test::make_tls_material(dir);       // CA, server, client certificates
//   dlock::test::redis_server tls_srv{{.tls = true, .tls_cert_file = tls.server_cert,
//                                      .tls_key_file = tls.server_key,
//                                      .tls_ca_file = tls.ca_cert}};
//
// Each server runs in its own temporary directory (/tmp/dlock-redis-XXXXXX, removed by the
// destructor) with `--bind 127.0.0.1 --save '' --appendonly no --daemonize no`, its log in
// `<dir>/redis.log` and `enable-debug-command local` (so DEBUG SLEEP etc. work). Servers die
// with the test process even when it is killed: the children get PR_SET_PDEATHSIG(SIGKILL),
// forked from one internal thread that lives as long as the process (so servers may be started
// and restarted from any thread, including short-lived ones).
//
// Every wait is bounded; failures throw std::runtime_error carrying the tail of the server log.
// command() may be called from any thread; the other members from one thread at a time.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace dlock::test {

// A TCP port on 127.0.0.1 that was free a moment ago (bind to port 0, read it, close). Another
// process may take it before it is used; redis_server retries its start on EADDRINUSE.
std::uint16_t free_port();

// Polls `pred` every 2 ms until it returns true or `limit` passes; returns its last result.
bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds limit);

// Options of a blocking admin command (redis_server::command, send_command).
struct command_options {
  std::chrono::milliseconds timeout{5000};  // whole exchange: connect, AUTH, command, reply
  bool authenticate = true;  // AUTH first, with the credentials below or else the server's own
  std::string username{};    // non-empty: AUTH <username> <password>
  std::string password{};    // non-empty: AUTH with this instead of the server's credentials
};

// One command over a fresh plain-TCP RESP2 connection to 127.0.0.1:port (AUTH first when
// `opts.password` is set and `opts.authenticate`). Returns the reply rendered as text:
//   simple string "+OK", error "-ERR ...", integer ":3", bulk string: its raw bytes ("v"),
//   nil bulk "$-1", nil array "*-1", array "[a, :1, $-1]" (elements rendered the same way).
// Throws std::runtime_error on connect failure, timeout, a closed connection or a failed AUTH.
std::string send_command(std::uint16_t port, const std::vector<std::string>& args,
                         const command_options& opts = {});

struct redis_server_options {
  std::vector<std::string> extra_args{};    // appended last, e.g. {"--maxmemory", "1mb"}
  std::vector<std::string> config_lines{};  // written to <dir>/redis.conf (the command line
                                            // overrides them)
  std::string acl_file_contents{};          // non-empty: written to <dir>/users.acl, --aclfile
  std::string requirepass{};                // non-empty: --requirepass; command() AUTHs with it
  std::string admin_username{};             // command() AUTHs as this user ...
  std::string admin_password{};             // ... with this password (for ACL-file servers)

  bool tls = false;                     // --tls-port P --port 0 (port()/url(): the TLS port)
  std::string tls_cert_file{};          // server certificate (PEM)
  std::string tls_key_file{};           // its private key
  std::string tls_ca_file{};            // CA for client certificates (tls-ca-cert-file)
  std::string tls_auth_clients = "no";  // "no", "yes" or "optional"
  bool tls_plain_admin_port = false;    // TLS servers: also listen in plain text on
                                        // plain_port(), used by command() and readiness

  std::string clock_file{};  // non-empty: the server runs with the fake-clock shim LD_PRELOADed,
                             // reading its wall clock from this file (fake_clock.hpp)

  // Sentinel mode (`--sentinel`; the configuration file is redis.conf in dir()). Sentinel
  // rewrites that file with what it learns, so it is written from config_lines at the first
  // start only and kept across restarts, like a real sentinel's state.
  bool sentinel = false;
  std::uint16_t port = 0;  // non-zero: this port (retried while taken), else a free one

  std::chrono::milliseconds start_timeout{10000};  // until the server answers
  std::string executable{};  // empty: $DLOCK_REDIS_SERVER, else redis-server from PATH

  // An ACL file in which `default` may do everything (the fixture's own commands) and user
  // `app`, password `password`, has `rules` (e.g. "~app:* &* +@all").
  static redis_server_options with_app_user(const std::string& password, const std::string& rules) {
    redis_server_options o;
    o.acl_file_contents =
        "user default on nopass ~* &* +@all\nuser app on >" + password + " " + rules + "\n";
    return o;
  }
};

class redis_server {
 public:
  // Starts the server and waits until it is ready. Throws std::runtime_error on failure.
  redis_server();
  explicit redis_server(redis_server_options opts);
  // Stops the server (SIGCONT if paused, SIGTERM, SIGKILL after 2 s) and removes its directory.
  ~redis_server();
  redis_server(const redis_server&) = delete;
  redis_server& operator=(const redis_server&) = delete;
  redis_server(redis_server&&) = delete;
  redis_server& operator=(redis_server&&) = delete;

  // The port clients use: the TLS port of a TLS server, else the plain one.
  std::uint16_t port() const noexcept { return port_; }
  // The plain-text port: port() for plain servers; 0 for TLS servers without an admin port.
  std::uint16_t plain_port() const noexcept;
  std::string host() const { return "127.0.0.1"; }
  // "redis://127.0.0.1:P" or "rediss://127.0.0.1:P".
  std::string url() const;
  // PID of the running server, or -1 once it was stopped or killed.
  pid_t pid() const noexcept { return pid_; }
  bool running() const noexcept { return pid_ > 0; }
  bool paused() const noexcept { return paused_; }
  const redis_server_options& options() const noexcept { return opts_; }
  // The server's temporary directory and its log (whole, or the last `lines` lines).
  const std::string& dir() const noexcept { return dir_; }
  std::string log_path() const;
  std::string log() const;
  std::string log_tail(std::size_t lines = 40) const;

  // Graceful stop: SIGTERM (after SIGCONT if paused), bounded wait, then SIGKILL. No-op if
  // not running.
  void stop();
  // SIGKILL and reap. No-op if not running.
  void kill9();
  // SIGSTOP / SIGCONT, each waited for until the kernel reports the state change.
  void pause();
  void resume();
  // Starts a stopped server again on the same port with the same arguments and no data: dir()
  // is emptied (the previous log is kept as redis.log.1) and the configuration and ACL files
  // are written again from the options. Retries while the port is taken, up to start_timeout.
  // No-op if running.
  void start();
  // stop() then start().
  void restart();
  // stop(), then start() with `opts` on the same port(s), e.g. with a clock_file added. `opts`
  // must keep the TLS settings that chose the ports (tls, tls_plain_admin_port): throws
  // std::invalid_argument otherwise.
  void restart(redis_server_options opts);

  // One command over a fresh plain connection (see send_command for the reply rendering),
  // authenticated with the server's credentials (requirepass or admin_username/password).
  // TLS servers need tls_plain_admin_port. Throws std::runtime_error on failure.
  std::string command(const std::vector<std::string>& args) const;
  std::string command(const std::vector<std::string>& args, command_options opts) const;

 private:
  void write_files() const;
  std::vector<std::string> build_argv() const;
  // One attempt: fork/exec and wait until ready. Returns false if the port was taken (the child
  // is then reaped); throws on any other failure.
  bool launch(std::chrono::steady_clock::time_point deadline);
  bool probe_ready() const;
  void reap_blocking();
  bool reap_nonblocking();
  void remove_dir() noexcept;

  redis_server_options opts_;
  std::string executable_;
  std::string dir_;
  std::uint16_t port_ = 0;
  std::uint16_t admin_port_ = 0;  // TLS servers with tls_plain_admin_port
  pid_t pid_ = -1;
  bool paused_ = false;
};

// Certificates for TLS tests, all PEM (EC P-256, valid 2 days), created by make_tls_material.
struct tls_material {
  std::string dir;
  std::string ca_cert, ca_key;                      // ca.pem, ca.key: the test CA
  std::string server_cert, server_key;              // server.pem/.key: CN localhost,
                                                    // SAN IP:127.0.0.1, DNS:localhost (by the CA)
  std::string other_host_cert, other_host_key;      // other_host.pem/.key: CN and SAN
                                                    // DNS:elsewhere.invalid only (by the CA)
  std::string client_cert, client_key;              // client.pem/.key: client cert (by the CA)
  std::string wrong_ca_cert, wrong_ca_key;          // wrong_ca.pem/.key: an unrelated CA
  std::string wrong_client_cert, wrong_client_key;  // wrong_client.pem/.key: by the wrong CA
};

// Runs the `openssl` command line to create the files above in `dir` (which must exist).
// Throws std::runtime_error with openssl's output if a step fails.
tls_material make_tls_material(const std::string& dir);

// Creates a fresh directory /tmp/<prefix>XXXXXX and returns its path (throws on failure).
std::string make_temp_dir(const std::string& prefix = "dlock-test-");

// A directory from make_temp_dir, removed (recursively) on destruction.
class temp_dir {
 public:
  explicit temp_dir(const std::string& prefix = "dlock-test-") : path_{make_temp_dir(prefix)} {}
  ~temp_dir();
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  const std::string& path() const noexcept { return path_; }

 private:
  std::string path_;
};

// Runs argv[0] (searched in PATH) with stdin from /dev/null and stdout+stderr captured into
// `output` (if given). Kills it with SIGKILL after `limit`. Returns the exit status, or -1 if it
// died from a signal or timed out. Throws std::runtime_error if it cannot be started.
int run_program(const std::vector<std::string>& argv, std::chrono::milliseconds limit,
                std::string* output = nullptr);

}  // namespace dlock::test
