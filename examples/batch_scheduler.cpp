// The batch scheduler of the lock tutorial (docs/examples.md): for high availability two or more
// scheduler processes run the same loop — read the due tasks, do the bookkeeping, mark each one
// queued (HDEL from the task hash) and push it to the work queue (RPUSH). Without a lock two
// schedulers read the same batch in the same moment and every task of it is queued twice. With
// a dlock::mutex around the read-then-move step only one scheduler moves a batch at a time.
//
//   ./batch_scheduler redis://127.0.0.1:6379 [--no-lock] [--schedulers N] [--tasks M]
//   (or DLOCK_URL=redis://... ./batch_scheduler ...)
//
// It seeds M tasks, forks N schedulers (each with its own dlock::client, as separate hosts
// would have), waits for them and counts the queue. Exit status 0 when the run shows its
// mode's claim: duplicates with --no-lock, none with the lock (and every task queued once at
// least); 1 otherwise; 2 for bad arguments or Redis errors.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <dlock/dlock.hpp>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace batch_scheduler {

const std::string tasks_key = "examples:batch:tasks";  // task id -> payload: the task table
const std::string queue_key = "examples:batch:queue";  // the message queue
constexpr std::size_t batch_size = 10;

struct options {
  std::string url;
  bool lock = true;
  int schedulers = 3;
  int tasks = 50;
};

// One round of the scheduler's loop; false once no task is due.
bool move_due_tasks(dlock::client& c, dlock::mutex* lock) {
  std::unique_lock<dlock::mutex> guard;
  if (lock) guard = std::unique_lock{*lock};  // waits; throws dlock::lock_error
  auto due = c.execute({"HKEYS", tasks_key}).elements();
  if (due.empty()) return false;
  std::sort(due.begin(), due.end(), [](auto& a, auto& b) { return a.str() < b.str(); });
  due.resize(std::min(due.size(), batch_size));
  // The time between reading the batch and moving it: the query, the status updates. Another
  // scheduler reading now sees the same batch.
  std::this_thread::sleep_for(std::chrono::milliseconds{20});
  for (const auto& task : due) {
    c.execute({"HDEL", tasks_key, task.str()});   // status: queued
    c.execute({"RPUSH", queue_key, task.str()});  // then into the queue
  }
  return true;
}

// A scheduler process: connect, say ready, wait for the start, run rounds until nothing is due.
int scheduler(const options& o, int ready_fd, int start_fd) {
  try {
    dlock::client client{dlock::config::from_uri(o.url)};
    dlock::mutex lock{client, "examples:batch:scheduler"};
    client.ping();
    char byte = 'r';
    if (::write(ready_fd, &byte, 1) != 1 || ::read(start_fd, &byte, 1) != 0) return 2;
    while (move_due_tasks(client, o.lock ? &lock : nullptr)) {
      std::this_thread::sleep_for(std::chrono::milliseconds{5});  // the scheduler's period
    }
    return 0;
  } catch (const dlock::lock_error& e) {
    std::fprintf(stderr, "scheduler %d: %s\n", static_cast<int>(::getpid()), e.what());
    return 2;
  }
}

// Forks the schedulers, starts them together, and waits for them; false if one failed.
bool run_schedulers(const options& o) {
  int ready[2], start[2];
  if (::pipe(ready) != 0 || ::pipe(start) != 0) return false;
  std::vector<pid_t> pids;
  for (int i = 0; i < o.schedulers; ++i) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(ready[0]);
      ::close(start[1]);
      std::_Exit(scheduler(o, ready[1], start[0]));
    }
    if (pid > 0) pids.push_back(pid);
  }
  ::close(ready[1]);
  ::close(start[0]);
  char byte;
  for (std::size_t i = 0; i < pids.size(); ++i) {
    if (::read(ready[0], &byte, 1) != 1) break;  // a scheduler died before it was ready
  }
  ::close(start[1]);  // go
  bool ok = pids.size() == static_cast<std::size_t>(o.schedulers);
  for (const pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  ::close(ready[0]);
  return ok;
}

int report(dlock::client& c, const options& o) {
  std::map<std::string, int> times;
  const auto queue = c.execute({"LRANGE", queue_key, "0", "-1"}).elements();
  for (const auto& task : queue) ++times[task.str()];
  const auto duplicates = queue.size() - times.size();
  std::printf("%d schedulers, %d tasks, %s\n", o.schedulers, o.tasks,
              o.lock ? "under dlock::mutex" : "no lock");
  std::printf("queue: %zu entries, %zu distinct tasks, %zu duplicates\n", queue.size(),
              times.size(), duplicates);
  int shown = 0;
  for (const auto& [task, n] : times) {
    if (n > 1 && shown++ < 5) std::printf("  %s queued %d times\n", task.c_str(), n);
  }
  if (times.size() != static_cast<std::size_t>(o.tasks)) return 1;  // a task was never queued
  return (o.lock ? duplicates == 0 : duplicates > 0) ? 0 : 1;
}

}  // namespace batch_scheduler

namespace bs = batch_scheduler;

namespace {

bool parse(int argc, char** argv, bs::options& o) {
  const char* env = std::getenv("DLOCK_URL");
  o.url = env ? env : "redis://127.0.0.1:6379";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--no-lock") {
      o.lock = false;
    } else if ((a == "--schedulers" || a == "--tasks") && has_value) {
      char* end = nullptr;
      const long n = std::strtol(argv[++i], &end, 10);
      if (*end != '\0' || n < 1 || n > (a == "--tasks" ? 100000 : 64)) return false;
      (a == "--tasks" ? o.tasks : o.schedulers) = static_cast<int>(n);
    } else if (a.rfind("redis", 0) == 0) {
      o.url = a;
    } else {
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  bs::options o;
  if (!parse(argc, argv, o)) {
    std::fprintf(stderr,
                 "usage: batch_scheduler [redis://host:port] [--no-lock] [--schedulers 1-64] "
                 "[--tasks 1-100000]\n");
    return 2;
  }
  try {
    {  // Seed the task table; this client is closed before the fork (no threads to fork).
      dlock::client client{dlock::config::from_uri(o.url)};
      client.execute({"DEL", bs::tasks_key, bs::queue_key});
      for (int i = 0; i < o.tasks; ++i) {
        char id[32];
        std::snprintf(id, sizeof id, "task:%06d", i);
        client.execute({"HSET", bs::tasks_key, id, "due"});
      }
    }
    if (!bs::run_schedulers(o)) {
      std::fprintf(stderr, "batch_scheduler: a scheduler failed\n");
      return 2;
    }
    dlock::client client{dlock::config::from_uri(o.url)};
    return bs::report(client, o);
  } catch (const dlock::lock_error& e) {
    std::fprintf(stderr, "batch_scheduler: %s\n", e.what());
    return 2;
  }
}
