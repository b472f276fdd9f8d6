#include "runtime/caller_wake.hpp"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <new>
#include <thread>

#include "transport/link.hpp"

namespace dlock::detail {

caller_wake::~caller_wake() {
  ::close(ev_);
  ::close(ep_);
}

std::shared_ptr<caller_wake> caller_wake::make() noexcept {
  const int ev = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (ev < 0) return nullptr;
  const int ep = ::epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) {
    ::close(ev);
    return nullptr;
  }
  epoll_event e{};
  e.events = EPOLLIN;
  e.data.fd = ev;
  if (::epoll_ctl(ep, EPOLL_CTL_ADD, ev, &e) != 0) {
    ::close(ev);
    ::close(ep);
    return nullptr;
  }
  auto* raw = new (std::nothrow) caller_wake{ev, ep};
  if (raw == nullptr) {
    ::close(ev);
    ::close(ep);
    return nullptr;
  }
  try {
    return std::shared_ptr<caller_wake>{raw};
  } catch (...) {  // the control block's allocation failed: the constructor deleted `raw`
    return nullptr;
  }
}

void caller_wake::signal() noexcept {
  const std::uint64_t one = 1;
  // Fails only at a count near 2^64, which is readable all the same.
  [[maybe_unused]] const auto n = ::write(ev_, &one, sizeof one);
}

void caller_wake::drain() noexcept {
  std::uint64_t count = 0;
  // Non-blocking: EAGAIN when nothing was signalled.
  [[maybe_unused]] const auto n = ::read(ev_, &count, sizeof count);
}

caller_wake::outcome caller_wake::wait(std::atomic<wait_phase>& phase, int watched_fd, read_progress reads,
                                       std::chrono::microseconds bound) {
  outcome out;
  // A signal may be left from an earlier wait (its completion swapped the phase to done while
  // that caller slept, and signalled after it had seen done): drained here, or at worst one
  // more turn below.
  drain();
  for (;;) {
    auto expected = wait_phase::running;
    if (!phase.compare_exchange_strong(expected, wait_phase::sleeping_watching, std::memory_order_acq_rel)) {
      return out;
    }
    epoll_event events[2];
    const int n = ::epoll_wait(ep_, events, 2, -1);  // bounded: the completion always comes, and signals
    // The reads handled when the bytes woke this caller, taken before it says it is awake
    // (below): a read handled from then on may be the one that carries them.
    const auto woken_at = reads.handled->load(std::memory_order_acquire);
    bool message = false;
    for (int i = 0; i < n; ++i) {
      if (events[i].data.fd == ev_) {
        drain();
      } else if (events[i].data.fd == watched_fd) {
        message = true;
      }
    }
    expected = wait_phase::sleeping_watching;
    if (!phase.compare_exchange_strong(expected, wait_phase::running, std::memory_order_acq_rel)) {
      return out;  // completed (and signalled, or about to: drained by the next wait)
    }
    if (!message) continue;  // interrupted, or a signal left from an earlier wait
    ++out.messages;
    // Bytes came on the connection, and the I/O thread woke with this one: its read likely
    // completes this wait. Yield (it may need this CPU) until a read has been handled since
    // this wake-up, with none under way and no bytes left queued. (The I/O thread may have
    // taken the bytes off the socket and not yet begun to handle them: the first condition
    // waits for that. Handled is loaded first: a read that begins or ends between the two
    // loads makes them differ, and the next turn looks again. A read handled between the
    // wake-up and `woken_at`'s load, which did carry the bytes, makes this wait last the bound,
    // unless that read completed the wait.)
    const auto until = std::chrono::steady_clock::now() + bound;
    while (phase.load(std::memory_order_acquire) != wait_phase::done && std::chrono::steady_clock::now() < until) {
      const auto handled = reads.handled->load(std::memory_order_acquire);
      if (handled != woken_at && reads.started->load(std::memory_order_acquire) == handled &&
          !reads.queued()) {
        break;
      }
      std::this_thread::yield();
    }
    if (phase.load(std::memory_order_acquire) == wait_phase::done) {
      out.completed_awake = true;
      return out;
    }
  }
}

watch_scope::watch_scope(watch_slot& slot, const transport::link& watched) noexcept {
  if (slot.taken.exchange(true, std::memory_order_acquire)) return;
  if (!slot.wake) slot.wake = caller_wake::make();
  if (slot.wake) fd_ = watched.watch(slot.wake->epoll_fd());
  if (fd_ < 0) {
    // Nothing up to watch (or no descriptors): this caller sleeps on its condition variable,
    // and the turn goes back at once, for a caller that comes when the connection is up.
    slot.taken.store(false, std::memory_order_release);
    return;
  }
  slot_ = &slot;
  watched_ = &watched;
  wake_ = slot.wake;
}

watch_scope::~watch_scope() {
  if (fd_ >= 0) watched_->unwatch(wake_->epoll_fd(), fd_);
  if (slot_ != nullptr) slot_->taken.store(false, std::memory_order_release);
}

}  // namespace dlock::detail
