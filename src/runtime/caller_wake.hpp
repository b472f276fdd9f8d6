// Waking a blocking caller with the message that completes its wait (runtime/blocking.hpp).
//
// An operation that a message on a connection will most likely complete (an acquire that found
// the lock held waits for its grant, which comes on the subscriber) can have its caller watch
// that connection: the caller sleeps in epoll on an eventfd and on the connection's socket
// (edge-triggered), so the message wakes it together with the I/O thread that handles it,
// instead of the I/O thread waking it afterwards — two wake-ups of an idle CPU in a row, the
// larger part of a hand-off (W3 in docs/benchmarks.md). Of the two the I/O thread is woken first
// (the caller's registration is exclusive: link::watch). Woken so, it yields until a read has
// been handled since, none is under way and no bytes are left queued (a few microseconds once
// the I/O thread runs; handled_wait_max at most); if the operation is not complete by then, it
// sleeps again. This is a race the caller wins or loses: if the I/O thread has handled the
// message before the caller looks, epoll does not report the bytes (they are gone), and the
// completion's signal wakes the caller as before.
// One caller per client watches at a time (a message wakes one exclusive watcher of a socket,
// link::watch: a second watcher would mostly not be woken by it), with the client's one
// eventfd and epoll set (watch_slot); the others sleep on a condition variable.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

namespace dlock::transport {
class link;
}

namespace dlock::detail {

// What a caller in run_blocking is doing, for the completion that may have to wake it.
enum class wait_phase : int { running, sleeping, sleeping_watching, done };

// The watched connection's reads: begun and handled so far (link::reads_started/reads_handled),
// and whether bytes are queued on its socket, not yet read (link::bytes_queued).
struct read_progress {
  const std::atomic<std::uint64_t>* started;
  const std::atomic<std::uint64_t>* handled;
  std::function<bool()> queued;
};

// An eventfd and an epoll set holding it, in which a caller sleeps with a watched socket. A
// completion holds it by shared_ptr: it may signal after its caller has returned (the next
// wait then wakes once for nothing, and sleeps again).
class caller_wake {
 public:
  static constexpr std::chrono::microseconds handled_wait_max{100};

  ~caller_wake();
  caller_wake(const caller_wake&) = delete;
  caller_wake& operator=(const caller_wake&) = delete;
  // Null if the descriptors (or the memory) could not be had: callers then sleep on condition
  // variables.
  static std::shared_ptr<caller_wake> make() noexcept;
  // The epoll set: a watched socket is registered in it for a wait's length (link::watch).
  int epoll_fd() const noexcept { return ep_; }
  // Wakes the wait (the completion does, when it found the phase sleeping_watching).
  void signal() noexcept;

  // What the wait was (its unit tests look at it).
  struct outcome {
    unsigned messages = 0;         // wake-ups by bytes on the watched socket
    bool completed_awake = false;  // completed while awake after one (no signal was needed)
  };
  // Sleeps until `phase` is done. `watched_fd`: the watched socket, registered in this set;
  // `reads`: its reads; `bound`: how long a caller woken by the socket waits at most for the
  // I/O thread to handle what is there.
  outcome wait(std::atomic<wait_phase>& phase, int watched_fd, read_progress reads,
               std::chrono::microseconds bound = handled_wait_max);

 private:
  caller_wake(int ev, int ep) : ev_{ev}, ep_{ep} {}
  void drain() noexcept;
  const int ev_, ep_;
};

// A client's turn to watch: who has it may use (and first make) `wake`.
struct watch_slot {
  std::atomic<bool> taken{false};
  std::shared_ptr<caller_wake> wake;  // guarded by `taken`
};

// Takes the turn and registers the connection's socket in the slot's set; both undone at scope
// end. Empty (wake() null, the turn not kept) when another caller has the turn, no connection
// is up, or the descriptors could not be made.
class watch_scope {
 public:
  watch_scope(watch_slot& slot, const transport::link& watched) noexcept;
  ~watch_scope();
  watch_scope(const watch_scope&) = delete;
  watch_scope& operator=(const watch_scope&) = delete;
  const std::shared_ptr<caller_wake>& wake() const noexcept { return wake_; }
  int fd() const noexcept { return fd_; }

 private:
  watch_slot* slot_ = nullptr;
  const transport::link* watched_ = nullptr;
  std::shared_ptr<caller_wake> wake_;
  int fd_ = -1;
};

}  // namespace dlock::detail
