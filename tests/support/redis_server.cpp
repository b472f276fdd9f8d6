#include "support/redis_server.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace dlock::test {
namespace {

using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr auto stop_grace = 2s;    // SIGTERM -> SIGKILL
constexpr auto signal_wait = 2s;   // SIGSTOP / SIGCONT to take effect
constexpr auto start_poll = 10ms;  // readiness polling interval

std::string errno_text(int err) { return std::strerror(err); }

[[noreturn]] void throw_errno(const std::string& what, int err) {
  throw std::runtime_error(what + ": " + errno_text(err));
}

class unique_fd {
 public:
  unique_fd() = default;
  explicit unique_fd(int fd) noexcept : fd_{fd} {}
  ~unique_fd() { reset(); }
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;
  unique_fd(unique_fd&& o) noexcept : fd_{o.release()} {}
  unique_fd& operator=(unique_fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = o.release();
    }
    return *this;
  }
  int get() const noexcept { return fd_; }
  int release() noexcept {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

std::string read_file(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  if (!in) return {};
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& contents) {
  std::ofstream out{path, std::ios::binary | std::ios::trunc};
  out << contents;
  out.close();
  if (!out) throw std::runtime_error("cannot write " + path);
}

std::string tail_lines(const std::string& text, std::size_t lines) {
  std::size_t pos = text.size();
  if (pos > 0 && text[pos - 1] == '\n') --pos;
  for (std::size_t n = 0; pos > 0; --pos) {
    if (text[pos - 1] == '\n' && ++n == lines) break;
  }
  return text.substr(pos);
}

// Milliseconds left until `deadline`, rounded up, for poll(); 0 once it passed.
int poll_ms(clock_type::time_point deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - clock_type::now());
  if (left.count() <= 0) return 0;
  return left.count() > INT_MAX ? INT_MAX : static_cast<int>(left.count());
}

std::string resolve_executable(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= dirs.size()) {
    auto end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    if (dir.empty()) dir = ".";
    const std::string candidate = dir + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  throw std::runtime_error("executable not found in PATH: " + name);
}

// Highest descriptor a child must close when close_range(2) is unavailable.
int max_fd_to_close() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    return rl.rlim_cur > 65536 ? 65536 : static_cast<int>(rl.rlim_cur);
  }
  return 65536;
}

// Forks and execs `exe` with `argv` (argv[0] included); the child's stdin is /dev/null and its
// stdout and stderr go to `out_fd`. Only async-signal-safe calls happen in the child.
pid_t fork_exec(const std::string& exe, const std::vector<std::string>& argv, int out_fd) {
  std::vector<char*> cargv;
  cargv.reserve(argv.size() + 1);
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  const int close_limit = max_fd_to_close();
  const pid_t parent = ::getpid();

  const pid_t pid = ::fork();
  if (pid < 0) throw_errno("fork", errno);
  if (pid == 0) {
    // Die with the test process; bail out if it is already gone.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(126);
    sigset_t none;
    ::sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGTERM, SIG_DFL);
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGPIPE, SIG_DFL);
    const int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd < 0 || ::dup2(null_fd, 0) < 0 || ::dup2(out_fd, 1) < 0 || ::dup2(out_fd, 2) < 0) {
      ::_exit(126);
    }
    if (::syscall(SYS_close_range, 3U, ~0U, 0U) != 0) {
      for (int fd = 3; fd < close_limit; ++fd) ::close(fd);
    }
    ::execv(exe.c_str(), cargv.data());
    static constexpr char msg[] = "exec failed\n";
    [[maybe_unused]] auto n = ::write(2, msg, sizeof msg - 1);
    ::_exit(127);
  }
  return pid;
}

// PR_SET_PDEATHSIG fires when the *thread* that forked exits, not the process. So every fork
// happens on one thread that lives until the process ends (never joined, never destroyed): a
// server started from a short-lived test thread survives that thread, and still dies with the
// test process (normal exit, crash or SIGKILL from a test runner's timeout).
class spawner {
 public:
  static spawner& instance() {
    static spawner* const s = new spawner;  // leaked on purpose: its thread must never exit
    return *s;
  }

  pid_t spawn(const std::string& exe, const std::vector<std::string>& argv, int out_fd) {
    std::packaged_task<pid_t()> task{[&] { return fork_exec(exe, argv, out_fd); }};
    auto result = task.get_future();
    {
      std::lock_guard lock{mu_};
      jobs_.push_back(std::move(task));
    }
    cv_.notify_one();
    return result.get();  // rethrows fork_exec's exception
  }

 private:
  spawner() {
    std::thread{[this] { run(); }}.detach();
  }

  [[noreturn]] void run() {
    for (;;) {
      std::packaged_task<pid_t()> task;
      {
        std::unique_lock lock{mu_};
        cv_.wait(lock, [this] { return !jobs_.empty(); });
        task = std::move(jobs_.front());
        jobs_.pop_front();
      }
      task();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::packaged_task<pid_t()>> jobs_;
};

pid_t spawn(const std::string& exe, const std::vector<std::string>& argv, int out_fd) {
  return spawner::instance().spawn(exe, argv, out_fd);
}

// --- A tiny blocking RESP2 client -------------------------------------------------------------

unique_fd connect_loopback(std::uint16_t port, clock_type::time_point deadline) {
  unique_fd fd{::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)};
  if (fd.get() < 0) throw_errno("socket", errno);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const std::string where = "127.0.0.1:" + std::to_string(port);
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    if (errno != EINPROGRESS) throw_errno("connect to " + where, errno);
    pollfd p{fd.get(), POLLOUT, 0};
    int r;
    do {
      r = ::poll(&p, 1, poll_ms(deadline));
    } while (r < 0 && errno == EINTR);
    if (r < 0) throw_errno("poll", errno);
    if (r == 0) throw std::runtime_error("connect to " + where + ": timed out");
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) {
      throw_errno("getsockopt", errno);
    }
    if (err != 0) throw_errno("connect to " + where, err);
  }
  return fd;
}

class resp_conn {
 public:
  resp_conn(std::uint16_t port, clock_type::time_point deadline)
      : fd_{connect_loopback(port, deadline)}, deadline_{deadline}, port_{port} {}

  std::string call(const std::vector<std::string>& args) {
    std::string out = "*" + std::to_string(args.size()) + "\r\n";
    for (const auto& a : args) out += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
    write_all(out);
    return read_reply();
  }

 private:
  void wait_for(short events) {
    pollfd p{fd_.get(), events, 0};
    int r;
    do {
      r = ::poll(&p, 1, poll_ms(deadline_));
    } while (r < 0 && errno == EINTR);
    if (r < 0) throw_errno("poll", errno);
    if (r == 0) throw std::runtime_error(where() + ": timed out");
  }

  void write_all(const std::string& data) {
    std::size_t off = 0;
    while (off < data.size()) {
      const auto n = ::send(fd_.get(), data.data() + off, data.size() - off, MSG_NOSIGNAL);
      if (n >= 0) {
        off += static_cast<std::size_t>(n);
      } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
        wait_for(POLLOUT);
      } else if (errno != EINTR) {
        throw_errno(where() + ": send", errno);
      }
    }
  }

  void fill() {
    char buf[4096];
    for (;;) {
      const auto n = ::recv(fd_.get(), buf, sizeof buf, 0);
      if (n > 0) {
        buf_.append(buf, static_cast<std::size_t>(n));
        return;
      }
      if (n == 0) throw std::runtime_error(where() + ": connection closed by the server");
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        wait_for(POLLIN);
      } else if (errno != EINTR) {
        throw_errno(where() + ": recv", errno);
      }
    }
  }

  std::string read_line() {
    for (;;) {
      const auto end = buf_.find("\r\n", pos_);
      if (end != std::string::npos) {
        std::string line = buf_.substr(pos_, end - pos_);
        pos_ = end + 2;
        return line;
      }
      fill();
    }
  }

  std::string read_exact(std::size_t n) {
    while (buf_.size() - pos_ < n) fill();
    std::string s = buf_.substr(pos_, n);
    pos_ += n;
    return s;
  }

  long long read_length(const std::string& line) {
    try {
      std::size_t used = 0;
      const long long n = std::stoll(line.substr(1), &used);
      if (used == line.size() - 1 && n >= -1) return n;
    } catch (const std::exception&) {
    }
    throw std::runtime_error(where() + ": bad RESP length line: " + line);
  }

  std::string read_reply() {
    const std::string line = read_line();
    if (line.empty()) throw std::runtime_error(where() + ": empty RESP line");
    switch (line[0]) {
      case '+':
      case '-':
      case ':':
        return line;
      case '$': {
        const long long n = read_length(line);
        if (n < 0) return "$-1";
        std::string s = read_exact(static_cast<std::size_t>(n) + 2);
        s.resize(static_cast<std::size_t>(n));
        return s;
      }
      case '*': {
        const long long n = read_length(line);
        if (n < 0) return "*-1";
        std::string s = "[";
        for (long long i = 0; i < n; ++i) {
          if (i > 0) s += ", ";
          s += read_reply();
        }
        return s + "]";
      }
      default:
        throw std::runtime_error(where() + ": not a RESP2 reply: " + line);
    }
  }

  std::string where() const { return "redis 127.0.0.1:" + std::to_string(port_); }

  unique_fd fd_;
  clock_type::time_point deadline_;
  std::uint16_t port_;
  std::string buf_;
  std::size_t pos_ = 0;
};

bool tcp_accepts(std::uint16_t port, std::chrono::milliseconds limit) {
  try {
    connect_loopback(port, clock_type::now() + limit);
    return true;
  } catch (const std::runtime_error&) {
    return false;
  }
}

}  // namespace

// --- Free helpers -------------------------------------------------------------------------

std::uint16_t free_port() {
  unique_fd fd{::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
  if (fd.get() < 0) throw_errno("socket", errno);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = 0;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    throw_errno("bind 127.0.0.1:0", errno);
  }
  socklen_t len = sizeof addr;
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    throw_errno("getsockname", errno);
  }
  return ntohs(addr.sin_port);
}

bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds limit) {
  const auto deadline = clock_type::now() + limit;
  for (;;) {
    if (pred()) return true;
    if (clock_type::now() >= deadline) return pred();
    std::this_thread::sleep_for(2ms);
  }
}

std::string send_command(std::uint16_t port, const std::vector<std::string>& args,
                         const command_options& opts) {
  if (args.empty()) throw std::invalid_argument("send_command: no arguments");
  resp_conn conn{port, clock_type::now() + opts.timeout};
  if (opts.authenticate && !opts.password.empty()) {
    std::vector<std::string> auth{"AUTH"};
    if (!opts.username.empty()) auth.push_back(opts.username);
    auth.push_back(opts.password);
    auto r = conn.call(auth);
    if (r != "+OK") {
      throw std::runtime_error("AUTH failed on port " + std::to_string(port) + ": " + r);
    }
  }
  return conn.call(args);
}

std::string make_temp_dir(const std::string& prefix) {
  std::string tmpl = "/tmp/" + prefix + "XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) throw_errno("mkdtemp " + tmpl, errno);
  return tmpl;
}

temp_dir::~temp_dir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

int run_program(const std::vector<std::string>& argv, std::chrono::milliseconds limit,
                std::string* output) {
  if (argv.empty()) throw std::invalid_argument("run_program: empty argv");
  const std::string exe = resolve_executable(argv[0]);
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw_errno("pipe2", errno);
  unique_fd read_end{fds[0]}, write_end{fds[1]};
  const pid_t pid = spawn(exe, argv, write_end.get());
  write_end.reset();

  const auto deadline = clock_type::now() + limit;
  std::string out;
  bool timed_out = false;
  for (;;) {
    pollfd p{read_end.get(), POLLIN, 0};
    const int r = ::poll(&p, 1, poll_ms(deadline));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      timed_out = true;
      break;
    }
    char buf[4096];
    const auto n = ::read(read_end.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (output != nullptr) *output = std::move(out);
  if (timed_out || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

// --- redis_server -------------------------------------------------------------------------

redis_server::redis_server() : redis_server(redis_server_options{}) {}

redis_server::redis_server(redis_server_options opts) : opts_{std::move(opts)} {
  if (opts_.executable.empty()) {
    const char* env = std::getenv("DLOCK_REDIS_SERVER");
    opts_.executable = env != nullptr && *env != '\0' ? env : "redis-server";
  }
  executable_ = resolve_executable(opts_.executable);
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

void redis_server::write_files() const {
  namespace fs = std::filesystem;
  // Keep the previous log for diagnostics; wipe everything else (dump.rdb, AOF dir...).
  std::error_code ec;
  if (fs::exists(log_path(), ec)) fs::rename(log_path(), log_path() + ".1", ec);
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    if (entry.path().filename() != "redis.log.1") fs::remove_all(entry.path(), ec);
  }
  std::string conf;
  for (const auto& line : opts_.config_lines) conf += line + "\n";
  write_file(dir_ + "/redis.conf", conf);
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
  pid_ = spawn(executable_, build_argv(), out.get());
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

// --- TLS material -------------------------------------------------------------------------

namespace {

void run_openssl(const std::vector<std::string>& args) {
  std::vector<std::string> argv{"openssl"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::string out;
  const int rc = run_program(argv, 60s, &out);
  if (rc != 0) {
    std::string cmd;
    for (const auto& a : argv) cmd += a + " ";
    throw std::runtime_error("make_tls_material: `" + cmd + "` failed (" + std::to_string(rc) +
                             "):\n" + out);
  }
}

void make_key(const std::string& path) {
  run_openssl({"genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path});
}

// A self-signed CA certificate for `key`.
void make_ca(const std::string& dir, const std::string& key, const std::string& cert,
             const std::string& cn) {
  const std::string cnf = dir + "/ca.cnf";
  write_file(cnf,
             "[req]\n"
             "distinguished_name = dn\n"
             "[dn]\n"
             "[v3_ca]\n"
             "basicConstraints = critical,CA:TRUE\n"
             "keyUsage = critical,keyCertSign,cRLSign\n"
             "subjectKeyIdentifier = hash\n"
             "authorityKeyIdentifier = keyid:always\n");
  run_openssl({"req", "-x509", "-new", "-key", key, "-sha256", "-days", "2", "-subj", "/CN=" + cn,
               "-config", cnf, "-extensions", "v3_ca", "-out", cert});
}

// A leaf certificate for `key` signed by the CA, with the given subject alternative names.
void make_leaf(const std::string& dir, const std::string& name, const std::string& cn,
               const std::string& san, const std::string& ca_cert, const std::string& ca_key,
               int serial) {
  const std::string cnf = dir + "/" + name + ".cnf";
  std::string conf =
      "[req]\n"
      "distinguished_name = dn\n"
      "[dn]\n"
      "[ext]\n"
      "basicConstraints = CA:FALSE\n"
      "keyUsage = critical,digitalSignature,keyEncipherment\n"
      "extendedKeyUsage = serverAuth,clientAuth\n"
      "subjectKeyIdentifier = hash\n"
      "authorityKeyIdentifier = keyid,issuer\n";
  if (!san.empty()) conf += "subjectAltName = " + san + "\n";
  write_file(cnf, conf);
  const std::string csr = dir + "/" + name + ".csr";
  run_openssl({"req", "-new", "-key", dir + "/" + name + ".key", "-subj", "/CN=" + cn, "-config",
               cnf, "-out", csr});
  run_openssl({"x509", "-req", "-in", csr, "-CA", ca_cert, "-CAkey", ca_key, "-set_serial",
               std::to_string(serial), "-days", "2", "-sha256", "-extfile", cnf, "-extensions",
               "ext", "-out", dir + "/" + name + ".pem"});
}

}  // namespace

tls_material make_tls_material(const std::string& dir) {
  tls_material m;
  m.dir = dir;
  m.ca_cert = dir + "/ca.pem";
  m.ca_key = dir + "/ca.key";
  m.server_cert = dir + "/server.pem";
  m.server_key = dir + "/server.key";
  m.other_host_cert = dir + "/other_host.pem";
  m.other_host_key = dir + "/other_host.key";
  m.client_cert = dir + "/client.pem";
  m.client_key = dir + "/client.key";
  m.wrong_ca_cert = dir + "/wrong_ca.pem";
  m.wrong_ca_key = dir + "/wrong_ca.key";
  m.wrong_client_cert = dir + "/wrong_client.pem";
  m.wrong_client_key = dir + "/wrong_client.key";

  for (const auto* key : {&m.ca_key, &m.server_key, &m.other_host_key, &m.client_key,
                          &m.wrong_ca_key, &m.wrong_client_key}) {
    make_key(*key);
  }
  make_ca(dir, m.ca_key, m.ca_cert, "dlock test CA");
  make_ca(dir, m.wrong_ca_key, m.wrong_ca_cert, "dlock unrelated test CA");
  make_leaf(dir, "server", "localhost", "IP:127.0.0.1,DNS:localhost", m.ca_cert, m.ca_key, 1001);
  make_leaf(dir, "other_host", "elsewhere.invalid", "DNS:elsewhere.invalid", m.ca_cert, m.ca_key,
            1002);
  make_leaf(dir, "client", "dlock test client", "", m.ca_cert, m.ca_key, 1003);
  make_leaf(dir, "wrong_client", "dlock wrong client", "", m.wrong_ca_cert, m.wrong_ca_key, 1004);
  return m;
}

}  // namespace dlock::test
