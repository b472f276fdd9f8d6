// dlock::mutex across processes against a real redis-server: a holder killed with SIGKILL, a
// holder frozen with SIGSTOP past its lease, mutual exclusion of 8 processes on one file, and
// interoperability with an independent client of Redisson's RLock protocol (a Python script).
//
// The other processes are dlock_lock_worker (lock_worker.cpp) and redisson_client.py, each
// spawned with its stdin, stdout and stderr on pipes, killed with SIGKILL by its destructor and
// reaped. Every wait is bounded.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <future>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "dlock/mutex.hpp"
#include "dlock/keys.hpp"
#include "runtime/owner.hpp"
#include "support/redis_server.hpp"
#include "test_util.hpp"

#ifndef DLOCK_LOCK_WORKER
#error "DLOCK_LOCK_WORKER must name the dlock_lock_worker executable"
#endif
#ifndef DLOCK_REDISSON_PY
#error "DLOCK_REDISSON_PY must name redisson_client.py"
#endif
#ifndef DLOCK_PYTHON3
#define DLOCK_PYTHON3 "/usr/bin/python3"
#endif

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

milliseconds ms_since(steady::time_point t) {
  return std::chrono::duration_cast<milliseconds>(steady::now() - t);
}

[[noreturn]] void throw_errno(const std::string& what) {
  throw std::runtime_error(what + ": " + std::strerror(errno));
}

// A child process with its stdin, stdout and stderr on pipes. Destruction kills it (SIGKILL)
// and reaps it, so no test leaves a process behind; the child also gets SIGKILL if the thread
// that spawned it (the test's) dies, and its stdin reaches EOF if the test process dies.
class child_process {
 public:
  explicit child_process(std::vector<std::string> argv) : argv_{std::move(argv)} {
    int in[2], out[2], err[2];
    if (::pipe2(in, O_CLOEXEC) != 0) throw_errno("pipe2");
    if (::pipe2(out, O_CLOEXEC) != 0) throw_errno("pipe2");
    if (::pipe2(err, O_CLOEXEC | O_NONBLOCK) != 0) throw_errno("pipe2");
    std::vector<char*> cargv;
    for (auto& a : argv_) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ < 0) {
      const int e = errno;
      for (int fd : {in[0], in[1], out[0], out[1], err[0], err[1]}) ::close(fd);
      errno = e;
      throw_errno("fork");
    }
    if (pid_ == 0) {
      // Only async-signal-safe calls from here to exec.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(126);
      sigset_t none;
      ::sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      ::signal(SIGPIPE, SIG_DFL);
      ::fcntl(err[1], F_SETFL, 0);  // blocking for the child
      if (::dup2(in[0], 0) < 0 || ::dup2(out[1], 1) < 0 || ::dup2(err[1], 2) < 0) ::_exit(126);
      ::syscall(SYS_close_range, 3U, ~0U, 0U);
      ::execv(cargv[0], cargv.data());
      static constexpr char msg[] = "exec failed\n";
      [[maybe_unused]] auto n = ::write(2, msg, sizeof msg - 1);
      ::_exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    ::close(err[1]);
    stdin_ = in[1];
    stdout_ = out[0];
    stderr_ = err[0];
  }

  ~child_process() {
    kill9();
    close_fd(stdin_);
    close_fd(stdout_);
    close_fd(stderr_);
  }
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  pid_t pid() const noexcept { return pid_; }

  // The next line of its stdout (without the newline), or nullopt if none came within `limit`
  // or stdout closed first.
  std::optional<std::string> read_line(milliseconds limit) {
    const auto deadline = steady::now() + limit;
    for (;;) {
      if (auto nl = out_.find('\n'); nl != std::string::npos) {
        std::string line = out_.substr(0, nl);
        out_.erase(0, nl + 1);
        return line;
      }
      if (stdout_ < 0) return std::nullopt;
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - steady::now());
      if (left <= 0ms) return std::nullopt;
      pollfd p{stdout_, POLLIN, 0};
      const int r = ::poll(&p, 1, static_cast<int>(left.count()));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) throw_errno("poll");
      if (r == 0) continue;
      char buf[4096];
      const auto n = ::read(stdout_, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        close_fd(stdout_);
        continue;
      }
      out_.append(buf, static_cast<std::size_t>(n));
    }
  }

  // Closes its stdin: the workers take EOF as "release and exit".
  void close_stdin() { close_fd(stdin_); }

  // SIGSTOP / SIGCONT, each waited for until the kernel reports the state change.
  void pause() {
    ::kill(pid_, SIGSTOP);
    wait_state(WUNTRACED, [](int st) { return WIFSTOPPED(st); }, "stop");
  }
  void resume() {
    ::kill(pid_, SIGCONT);
    wait_state(WCONTINUED, [](int st) { return WIFCONTINUED(st); }, "continue");
  }

  // SIGKILL and reap (no-op once reaped).
  void kill9() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int st = 0;
    while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
  }

  // Waits up to `limit` for it to exit: its exit status, -1 if a signal ended it, nullopt if
  // it is still running.
  std::optional<int> wait_exit(milliseconds limit) {
    if (pid_ <= 0) return exit_status_;
    dlock::test::wait_until(
        [&] {
          int st = 0;
          const pid_t r = ::waitpid(pid_, &st, WNOHANG);
          if (r != pid_) return false;
          pid_ = -1;
          exit_status_ = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
          return true;
        },
        limit);
    if (pid_ > 0) return std::nullopt;
    return exit_status_;
  }

  // What it wrote to stderr so far, and its stdout not yet read: for failure messages.
  std::string diagnostics() {
    for (;;) {
      char buf[4096];
      const auto n = stderr_ >= 0 ? ::read(stderr_, buf, sizeof buf) : 0;
      if (n <= 0) break;
      err_.append(buf, static_cast<std::size_t>(n));
    }
    std::string cmd;
    for (const auto& a : argv_) cmd += (cmd.empty() ? "" : " ") + a;
    return "[" + cmd + "] stderr: '" + err_ + "' unread stdout: '" + out_ + "'";
  }

 private:
  template <class Pred>
  void wait_state(int flags, Pred pred, const char* what) {
    const bool ok = dlock::test::wait_until(
        [&] {
          int st = 0;
          return ::waitpid(pid_, &st, flags | WNOHANG) == pid_ && pred(st);
        },
        5s);
    if (!ok) throw std::runtime_error(std::string{"child did not "} + what + ": " + diagnostics());
  }

  static void close_fd(int& fd) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }

  std::vector<std::string> argv_;
  pid_t pid_ = -1;
  int stdin_ = -1, stdout_ = -1, stderr_ = -1;
  std::string out_, err_;
  std::optional<int> exit_status_;
};

// "acquired 17" -> 17; nullopt for anything else.
std::optional<std::uint64_t> acquired_token(const std::optional<std::string>& line) {
  if (!line || line->rfind("acquired ", 0) != 0) return std::nullopt;
  return std::stoull(line->substr(9));
}

std::vector<std::string> words(const std::string& line) {
  std::istringstream s{line};
  std::vector<std::string> out;
  for (std::string w; s >> w;) out.push_back(w);
  return out;
}

child_process lock_worker(std::vector<std::string> args) {
  args.insert(args.begin(), DLOCK_LOCK_WORKER);
  return child_process{std::move(args)};
}

child_process redisson_client(std::vector<std::string> args) {
  args.insert(args.begin(), {DLOCK_PYTHON3, "-u", DLOCK_REDISSON_PY});
  return child_process{std::move(args)};
}

// -- dlock processes -----------------------------------------------------------------------------

TEST(mutex_process, kill9_of_the_holder_frees_the_lock_when_its_lease_ends_not_before) {
  dlock::test::redis_server srv;
  const auto name = dlock::test::unique_name("proc-kill9");
  const auto url = srv.url() + "?watchdog=1500ms";
  auto worker = lock_worker({"hold", url, name});
  const auto worker_token = acquired_token(worker.read_line(15s));
  ASSERT_TRUE(worker_token) << worker.diagnostics();

  dlock::client c{dlock::config::from_uri(url)};
  dlock::mutex m{c, name};
  EXPECT_FALSE(m.try_lock()) << "the worker holds it";

  const auto killed_at = steady::now();
  worker.kill9();  // SIGKILL and reap: nothing renews the lease from here on
  // Measured once the holder is dead, so no renewal can come after it: the lease cannot end
  // sooner than this after the kill.
  const auto pttl = m.remaining_lease();
  ASSERT_GT(pttl, 0ms) << "the dead holder's lease still runs";
  ASSERT_LE(pttl, 1500ms);

  ASSERT_TRUE(m.try_lock_for(5s)) << "acquired once the dead holder's lease ended";
  const auto took = ms_since(killed_at);
  constexpr auto slop = 50ms;
  EXPECT_GE(took, pttl - slop) << "acquired " << took.count() << " ms after the kill, but the "
                               << "dead holder's lease had " << pttl.count()
                               << " ms left (slop " << slop.count() << " ms)";
  EXPECT_GT(took, 0ms);
  EXPECT_LT(took, pttl + 1000ms) << "the waiter re-checks when the holder's lease ends";
  EXPECT_GT(m.fencing_token(), *worker_token);
  m.unlock();
}

TEST(mutex_process, sigstop_past_the_lease_loses_it_and_the_stale_unlock_touches_nothing) {
  dlock::test::redis_server srv;
  const auto name = dlock::test::unique_name("proc-sigstop");
  auto worker = lock_worker({"hold_then_check", srv.url() + "?watchdog=600ms", name});
  const auto worker_token = acquired_token(worker.read_line(15s));
  ASSERT_TRUE(worker_token) << worker.diagnostics();

  dlock::client c{dlock::config::from_uri(srv.url())};
  dlock::mutex m{c, name};
  worker.pause();
  const auto stopped_at = steady::now();
  ASSERT_TRUE(m.try_lock_for(5s)) << "the frozen holder's lease ends within 600 ms";
  const auto took = ms_since(stopped_at);
  EXPECT_LE(took, 600ms + 400ms) << "acquired " << took.count()
                                 << " ms after SIGSTOP; the lease is 600 ms (slop 400 ms)";
  EXPECT_GT(m.fencing_token(), *worker_token);

  const auto own_field = dlock::detail::owner_field(c.id(), dlock::detail::this_thread_number());
  const auto before = srv.command({"HGETALL", name});
  EXPECT_EQ(before, "[" + own_field + ", 1]");

  worker.resume();
  const auto lost = worker.read_line(5s);
  ASSERT_EQ(lost, std::optional<std::string>{"lost"}) << worker.diagnostics();
  const auto unlock_line = worker.read_line(5s);
  ASSERT_TRUE(unlock_line) << worker.diagnostics();
  const auto w = words(*unlock_line);
  ASSERT_GE(w.size(), 2u) << *unlock_line;
  EXPECT_EQ(w[0], "unlock");
  EXPECT_EQ(w[1], std::to_string(static_cast<int>(dlock::errc::lease_lost))) << *unlock_line;

  EXPECT_EQ(srv.command({"HGETALL", name}), before) << "the stale unlock changed the new hold";
  EXPECT_EQ(srv.command({"EXISTS", name}), ":1");
  EXPECT_EQ(worker.wait_exit(5s), std::optional<int>{0}) << worker.diagnostics();
  EXPECT_TRUE(m.is_held_by_current_thread());
  m.unlock();
  EXPECT_EQ(srv.command({"EXISTS", name}), ":0");
}

TEST(mutex_process, eight_processes_increment_one_file_under_the_lock) {
  constexpr int processes = 8;
  constexpr int rounds = 500;
  dlock::test::redis_server srv;
  dlock::test::temp_dir dir;
  const auto name = dlock::test::unique_name("proc-rmw");
  const auto file = dir.path() + "/counter";
  std::ofstream{file} << "0 0\n";

  const auto started = steady::now();
  std::vector<std::unique_ptr<child_process>> workers;
  for (int i = 0; i < processes; ++i) {
    workers.push_back(std::make_unique<child_process>(std::vector<std::string>{
        DLOCK_LOCK_WORKER, "rmw", srv.url(), name, file, std::to_string(rounds)}));
  }
  const auto deadline = started + 110s;
  for (auto& w : workers) {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - steady::now());
    EXPECT_EQ(w->wait_exit(std::max(left, 0ms)), std::optional<int>{0}) << w->diagnostics();
  }
  std::ifstream in{file};
  std::uint64_t value = 0, last_token = 0;
  in >> value >> last_token;
  EXPECT_EQ(value, std::uint64_t{processes * rounds}) << "lost updates: exclusion broken";
  EXPECT_EQ(last_token, std::uint64_t{processes * rounds}) << "one token per acquisition";
  EXPECT_EQ(srv.command({"GET", dlock::keys::fencing_counter(name)}),
            std::to_string(processes * rounds));
  EXPECT_EQ(srv.command({"EXISTS", name}), ":0");
  std::cout << "[          ] " << processes << " x " << rounds << " critical sections in "
            << ms_since(started).count() << " ms\n";
}

// -- interoperability with an independent Redisson RLock client ----------------------------------

TEST(interop, a_dlock_waiter_is_woken_by_a_redisson_unlock_message) {
  dlock::test::redis_server srv;
  const auto name = dlock::test::unique_name("interop-py-holds");
  auto py = redisson_client({"hold", srv.url(), name});
  const auto acquired = py.read_line(20s);
  ASSERT_TRUE(acquired && acquired->rfind("acquired ", 0) == 0) << py.diagnostics();
  const auto py_owner = acquired->substr(9);
  EXPECT_EQ(srv.command({"HGETALL", name}), "[" + py_owner + ", 1]");
  const auto py_pttl = std::stoll(srv.command({"PTTL", name}).substr(1));
  EXPECT_GT(py_pttl, 20000) << "Redisson's lease is 30 s";

  // recheck=30s: without the unlock message this waiter would sleep for ~30 s (the recheck and
  // the Redisson lease alike), so a wake-up within 1 s of the release can only be the message.
  dlock::client c{dlock::config::from_uri(srv.url() + "?recheck=30s")};
  dlock::mutex m{c, name};
  EXPECT_FALSE(m.try_lock()) << "the Redisson client holds it";

  struct outcome {
    bool ok = false;
    steady::time_point at;
    std::uint64_t token = 0;
  };
  auto waiter = std::async(std::launch::async, [&] {
    outcome o;
    o.ok = m.try_lock_for(10s);
    o.at = steady::now();
    o.token = m.fencing_token();
    if (o.ok) m.unlock();
    return o;
  });
  // Subscribed means its first attempt found the lock held and it waits for the message.
  const auto channel = dlock::keys::lock_channel(name);
  EXPECT_TRUE(dlock::test::wait_until(
      [&] { return srv.command({"PUBSUB", "NUMSUB", channel}) == "[" + channel + ", :1]"; }, 5s))
      << "the dlock waiter subscribed to " << channel;

  const auto released_at = steady::now();
  py.close_stdin();  // the Redisson client unlocks: DEL + PUBLISH 0
  EXPECT_EQ(py.read_line(5s), std::optional<std::string>{"released 1"}) << py.diagnostics();
  ASSERT_EQ(waiter.wait_for(5s), std::future_status::ready)
      << "the dlock waiter did not acquire within 5 s of the Redisson unlock";
  const auto o = waiter.get();
  ASSERT_TRUE(o.ok);
  EXPECT_GT(o.at, released_at) << "acquired only after the Redisson client let go";
  const auto lag = std::chrono::duration_cast<milliseconds>(o.at - released_at);
  EXPECT_LT(lag, 1000ms) << "woken by the unlock message (the lease had " << py_pttl
                         << " ms left and the recheck is 30 s)";
  EXPECT_GT(o.token, 0u);
  EXPECT_EQ(py.wait_exit(5s), std::optional<int>{0}) << py.diagnostics();
  EXPECT_EQ(srv.command({"EXISTS", name}), ":0");
}

TEST(interop, a_redisson_waiter_is_woken_by_a_dlock_unlock_message) {
  dlock::test::redis_server srv;
  const auto name = dlock::test::unique_name("interop-dlock-holds");
  dlock::client c{dlock::config::from_uri(srv.url())};  // watchdog lease: 30 s
  dlock::mutex m{c, name};
  m.lock();

  auto py = redisson_client({"acquire_wait", srv.url(), name});
  const auto waiting = py.read_line(20s);  // printed once subscribed and refused
  ASSERT_TRUE(waiting && waiting->rfind("waiting ", 0) == 0) << py.diagnostics();
  const auto pttl = std::stoll(waiting->substr(8));
  EXPECT_GT(pttl, 20000) << "the Redisson client saw dlock's 30 s watchdog lease";

  const auto released_at = steady::now();
  m.unlock();
  const auto acquired = py.read_line(5s);
  const auto lag = ms_since(released_at);
  ASSERT_TRUE(acquired) << py.diagnostics();
  const auto w = words(*acquired);
  ASSERT_EQ(w.size(), 3u) << *acquired;
  EXPECT_EQ(w[0], "acquired");
  EXPECT_LT(lag, 1000ms) << "woken by dlock's unlock message (its lease had " << pttl
                         << " ms left)";
  EXPECT_EQ(py.read_line(5s), std::optional<std::string>{"released 1"}) << py.diagnostics();
  EXPECT_EQ(py.wait_exit(5s), std::optional<int>{0}) << py.diagnostics();
  EXPECT_EQ(srv.command({"EXISTS", name}), ":0");
}

}  // namespace
