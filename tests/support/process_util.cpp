// Processes and files for the test support library: errors from errno, reading and writing
// files, executables found in PATH, children forked from one long-lived thread (so that they die
// with the test process), run_program, temporary directories and wait_until.
#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
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

#include "support/posix_util.hpp"
#include "support/redis_server.hpp"

namespace dlock::test {
namespace posix {
namespace {

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

}  // namespace

void throw_errno(const std::string& what, int err) {
  throw std::runtime_error(what + ": " + std::strerror(err));
}

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

pid_t spawn(const std::string& exe, const std::vector<std::string>& argv, int out_fd) {
  return spawner::instance().spawn(exe, argv, out_fd);
}

}  // namespace posix

using namespace std::chrono_literals;
using posix::clock_type;
using posix::poll_ms;
using posix::resolve_executable;
using posix::spawn;
using posix::throw_errno;
using posix::unique_fd;

bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds limit) {
  const auto deadline = clock_type::now() + limit;
  for (;;) {
    if (pred()) return true;
    if (clock_type::now() >= deadline) return pred();
    std::this_thread::sleep_for(2ms);
  }
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

}  // namespace dlock::test
