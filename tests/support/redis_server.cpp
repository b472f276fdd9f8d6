// redis_server (redis_server.hpp): a real redis-server process per test, in a temporary
// directory of its own, started, stopped, paused and restarted with bounded waits.
#include "support/redis_server.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <thread>

#include "support/fake_clock.hpp"
#include "support/posix_util.hpp"

namespace dlock::test {
namespace {

using namespace std::chrono_literals;
using posix::clock_type;

constexpr auto stop_grace = 2s;    // SIGTERM -> SIGKILL
constexpr auto signal_wait = 2s;   // SIGSTOP / SIGCONT to take effect
constexpr auto start_poll = 10ms;  // readiness polling interval

}  // namespace

using posix::read_file;
using posix::resolve_executable;
using posix::spawn;
using posix::tail_lines;
using posix::tcp_accepts;
using posix::throw_errno;
using posix::unique_fd;
using posix::write_file;

redis_server::redis_server() : redis_server(redis_server_options{}) {}

redis_server::redis_server(redis_server_options opts) : opts_{std::move(opts)} {
  if (opts_.executable.empty()) {
    const char* env = std::getenv("DLOCK_REDIS_SERVER");
    opts_.executable = env != nullptr && *env != '\0' ? env : "redis-server";
  }
  executable_ = resolve_executable(opts_.executable);
  port_ = opts_.port;
  dir_ = make_temp_dir("dlock-redis-");
  try {
    start();
  } catch (...) {
    kill9();
    remove_dir();
    throw;
  }
}

redis_server::~redis_server() {
  try {
    stop();
  } catch (...) {
  }
  kill9();
  remove_dir();
}

std::uint16_t redis_server::plain_port() const noexcept { return opts_.tls ? admin_port_ : port_; }

std::string redis_server::url() const {
  return std::string{opts_.tls ? "rediss" : "redis"} + "://127.0.0.1:" + std::to_string(port_);
}

std::string redis_server::log_path() const { return dir_ + "/redis.log"; }

std::string redis_server::log() const { return read_file(log_path()); }

std::string redis_server::log_tail(std::size_t lines) const {
  std::string s = tail_lines(log(), lines);
  const std::string out = read_file(dir_ + "/redis.stdout");
  if (!out.empty()) s += "\n[stdout/stderr]\n" + tail_lines(out, lines);
  return s;
}

void redis_server::remove_dir() noexcept {
  if (dir_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

bool redis_server::reap_nonblocking() {
  if (pid_ <= 0) return true;
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &status, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == 0) return false;
  pid_ = -1;  // exited (r == pid) or no longer our child (ECHILD)
  paused_ = false;
  return true;
}

void redis_server::reap_blocking() {
  if (pid_ <= 0) return;
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  paused_ = false;
}

void redis_server::kill9() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  reap_blocking();
}

void redis_server::stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  if (paused_) ::kill(pid_, SIGCONT);
  paused_ = false;
  const auto deadline = clock_type::now() + stop_grace;
  while (!reap_nonblocking()) {
    if (clock_type::now() >= deadline) {
      kill9();
      return;
    }
    std::this_thread::sleep_for(2ms);
  }
}

void redis_server::pause() {
  if (pid_ <= 0) throw std::runtime_error("redis_server::pause: not running");
  if (paused_) return;
  if (::kill(pid_, SIGSTOP) != 0) throw_errno("kill(SIGSTOP)", errno);
  const auto deadline = clock_type::now() + signal_wait;
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, WUNTRACED | WNOHANG);
    if (r < 0 && errno == EINTR) continue;
    if (r == pid_ && WIFSTOPPED(status)) break;
    if (r != 0) {
      pid_ = -1;
      throw std::runtime_error("redis_server::pause: the server exited\n" + log_tail());
    }
    if (clock_type::now() >= deadline) {
      throw std::runtime_error("redis_server::pause: the server did not stop in time");
    }
    std::this_thread::sleep_for(1ms);
  }
  paused_ = true;
}

void redis_server::resume() {
  if (pid_ <= 0 || !paused_) return;
  if (::kill(pid_, SIGCONT) != 0) throw_errno("kill(SIGCONT)", errno);
  paused_ = false;
  const auto deadline = clock_type::now() + signal_wait;
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, WCONTINUED | WNOHANG);
    if (r < 0 && errno == EINTR) continue;
    if (r == pid_ && WIFCONTINUED(status)) return;
    if (r != 0) {
      pid_ = -1;
      throw std::runtime_error("redis_server::resume: the server exited\n" + log_tail());
    }
    if (clock_type::now() >= deadline) {
      throw std::runtime_error("redis_server::resume: the server did not continue in time");
    }
    std::this_thread::sleep_for(1ms);
  }
}

void redis_server::restart() {
  stop();
  start();
}

void redis_server::restart(redis_server_options opts) {
  if (opts.tls != opts_.tls || opts.tls_plain_admin_port != opts_.tls_plain_admin_port) {
    throw std::invalid_argument("redis_server::restart: the TLS port settings must not change");
  }
  if (opts.executable.empty()) opts.executable = opts_.executable;
  stop();
  executable_ = resolve_executable(opts.executable);
  opts_ = std::move(opts);
  start();
}

void redis_server::write_files() const {
  namespace fs = std::filesystem;
  // Keep the previous log for diagnostics; wipe everything else (dump.rdb, AOF dir...).
  std::error_code ec;
  if (fs::exists(log_path(), ec)) fs::rename(log_path(), log_path() + ".1", ec);
  // A sentinel's state lives in its configuration file: keep it across restarts.
  const bool keep_conf = opts_.sentinel && fs::exists(dir_ + "/redis.conf", ec);
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    const auto name = entry.path().filename();
    if (name != "redis.log.1" && !(keep_conf && name == "redis.conf")) {
      fs::remove_all(entry.path(), ec);
    }
  }
  if (!keep_conf) {
    std::string conf;
    for (const auto& line : opts_.config_lines) conf += line + "\n";
    write_file(dir_ + "/redis.conf", conf);
  }
  if (!opts_.acl_file_contents.empty()) {
    std::string acl = opts_.acl_file_contents;
    if (acl.back() != '\n') acl += '\n';
    write_file(dir_ + "/users.acl", acl);
  }
}

std::vector<std::string> redis_server::build_argv() const {
  const std::string plain =
      std::to_string(opts_.tls ? (opts_.tls_plain_admin_port ? admin_port_ : 0) : port_);
  std::vector<std::string> a{executable_, dir_ + "/redis.conf"};
  if (opts_.sentinel) a.emplace_back("--sentinel");
  a.insert(a.end(),
           {"--port", plain, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir",
            dir_, "--daemonize", "no", "--logfile", log_path(), "--enable-debug-command", "local"});
  if (opts_.tls) {
    a.insert(a.end(), {"--tls-port", std::to_string(port_), "--tls-cert-file", opts_.tls_cert_file,
                       "--tls-key-file", opts_.tls_key_file});
    if (!opts_.tls_ca_file.empty()) a.insert(a.end(), {"--tls-ca-cert-file", opts_.tls_ca_file});
    if (!opts_.tls_auth_clients.empty()) {
      a.insert(a.end(), {"--tls-auth-clients", opts_.tls_auth_clients});
    }
  }
  if (!opts_.acl_file_contents.empty()) a.insert(a.end(), {"--aclfile", dir_ + "/users.acl"});
  if (!opts_.requirepass.empty()) a.insert(a.end(), {"--requirepass", opts_.requirepass});
  a.insert(a.end(), opts_.extra_args.begin(), opts_.extra_args.end());
  return a;
}

bool redis_server::probe_ready() const {
  if (const auto plain = plain_port(); plain != 0) {
    try {
      const auto r = send_command(plain, {"PING"}, {.timeout = 1000ms, .authenticate = false});
      return !r.empty() && r.rfind("-LOADING", 0) != 0;  // +PONG, or -NOAUTH: it is serving
    } catch (const std::exception&) {
      return false;
    }
  }
  return log().find("Ready to accept connections") != std::string::npos &&
         tcp_accepts(port_, 1000ms);
}

bool redis_server::launch(clock_type::time_point deadline) {
  write_files();
  unique_fd out{
      ::open((dir_ + "/redis.stdout").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)};
  if (out.get() < 0) throw_errno("open " + dir_ + "/redis.stdout", errno);
  if (opts_.clock_file.empty()) {
    pid_ = spawn(executable_, build_argv(), out.get());
  } else {
    // env(1) sets the child's environment and execs the server in place (same pid), so the
    // fork in spawn() stays as it is for every other server.
    std::vector<std::string> argv{"env", "LD_PRELOAD=" + clock_shim_path(),
                                  "DLOCK_CLOCK_SHIM_FILE=" + opts_.clock_file};
    const auto server = build_argv();
    argv.insert(argv.end(), server.begin(), server.end());
    pid_ = spawn(resolve_executable("env"), argv, out.get());
  }
  out.reset();
  paused_ = false;
  try {
    for (;;) {
      if (reap_nonblocking()) {
        const auto text = log() + read_file(dir_ + "/redis.stdout");
        if (text.find("Address already in use") != std::string::npos) return false;
        throw std::runtime_error("redis-server exited during startup (port " +
                                 std::to_string(port_) + ")\n" + log_tail());
      }
      if (probe_ready()) return true;
      if (clock_type::now() >= deadline) {
        throw std::runtime_error("redis-server (port " + std::to_string(port_) +
                                 ") not ready in time\n" + log_tail());
      }
      std::this_thread::sleep_for(start_poll);
    }
  } catch (...) {
    kill9();
    throw;
  }
}

void redis_server::start() {
  if (pid_ > 0) return;
  const auto deadline = clock_type::now() + opts_.start_timeout;
  const bool first = port_ == 0;
  const bool wants_admin = opts_.tls && opts_.tls_plain_admin_port;
  for (int attempt = 0;; ++attempt) {
    if (first) {  // a free port may be taken by someone else before redis binds it: pick again
      port_ = free_port();
      if (wants_admin) {
        do {
          admin_port_ = free_port();
        } while (admin_port_ == port_);
      }
    }
    if (launch(deadline)) return;
    if (clock_type::now() >= deadline || (first && attempt >= 8)) {
      throw std::runtime_error("redis-server: port " + std::to_string(port_) + " stays in use\n" +
                               log_tail());
    }
    if (!first) std::this_thread::sleep_for(50ms);  // restart: wait for the same port to free up
  }
}

std::string redis_server::command(const std::vector<std::string>& args) const {
  return command(args, command_options{});
}

std::string redis_server::command(const std::vector<std::string>& args,
                                  command_options opts) const {
  const auto plain = plain_port();
  if (plain == 0) {
    throw std::runtime_error("redis_server::command: TLS server without tls_plain_admin_port");
  }
  if (opts.authenticate && opts.password.empty()) {
    if (!opts_.admin_password.empty()) {
      opts.username = opts_.admin_username;
      opts.password = opts_.admin_password;
    } else {
      opts.password = opts_.requirepass;
    }
  }
  return send_command(plain, args, opts);
}

}  // namespace dlock::test
