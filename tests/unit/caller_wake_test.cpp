// detail::caller_wake: a blocking caller sleeping on its eventfd and a watched socket (a
// socketpair here, no network), woken by the completion or by bytes on the socket, against a
// stand-in for the I/O thread that handles them.
#include "runtime/caller_wake.hpp"
#include "transport/link.hpp"

#include <gtest/gtest.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <cstdint>
#include <future>
#include <thread>

namespace {

using namespace std::chrono_literals;
using dlock::detail::caller_wake;
using dlock::detail::wait_phase;

// Polls `pred` every 100 µs for at most 5 s.
template <class Pred>
bool eventually(Pred pred) {
  const auto until = std::chrono::steady_clock::now() + 5s;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(100us);
  }
  return true;
}

// A caller's wake with one end of a socketpair registered as the watched socket (as
// link::watch registers the subscriber's), the other end for the "server" to write to.
struct lab {
  lab() {
    wake = caller_wake::make();
    EXPECT_NE(wake, nullptr);
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLET;
    ev.data.fd = fds[0];
    EXPECT_EQ(::epoll_ctl(wake->epoll_fd(), EPOLL_CTL_ADD, fds[0], &ev), 0);
  }
  // A test that failed half-way still ends its caller's wait before the descriptors close; a
  // wait that does not end even so fails the run at once, not at the test's time limit.
  ~lab() {
    if (caller.valid()) {
      complete();
      if (caller.wait_for(5s) != std::future_status::ready) {
        std::fprintf(stderr, "caller_wake_test: the caller's wait did not end\n");
        std::abort();
      }
    }
    ::close(fds[0]);
    ::close(fds[1]);
  }
  // The caller: waits on another thread, with `bound` as the wait for the read's end.
  std::future<caller_wake::outcome>& start(std::chrono::microseconds bound = caller_wake::handled_wait_max) {
    caller = std::async(std::launch::async, [this, bound] {
      const auto queued = [fd = fds[0]] { return dlock::transport::bytes_readable(fd); };
      return wake->wait(phase, fds[0], {&started, &handled, queued}, bound);
    });
    return caller;
  }
  // The completion, as run_blocking's: signals only a caller that sleeps watching.
  wait_phase complete() {
    const auto was = phase.exchange(wait_phase::done);
    if (was == wait_phase::sleeping_watching) wake->signal();
    return was;
  }
  void send() { ASSERT_EQ(::write(fds[1], "x", 1), 1); }
  bool reaches(wait_phase p) {
    return eventually([&] { return phase.load() == p; });
  }
  // The caller's outcome, once its wait has ended (within 5 s).
  caller_wake::outcome ended() {
    if (caller.wait_for(5s) != std::future_status::ready) {
      ADD_FAILURE() << "the caller's wait did not end";
      return {};
    }
    return caller.get();
  }
  // The I/O thread: reads what came, then counts the read as handled (link::on_read).
  void handle_read(bool completes) {
    ++started;
    char buf[16];
    ASSERT_GT(::read(fds[0], buf, sizeof buf), 0);
    if (completes) {
      EXPECT_EQ(complete(), wait_phase::running) << "the caller was awake: no signal needed";
    }
    handled.fetch_add(1);
  }

  std::shared_ptr<caller_wake> wake;
  int fds[2] = {-1, -1};
  std::atomic<wait_phase> phase{wait_phase::running};
  std::atomic<std::uint64_t> started{0}, handled{0};
  std::future<caller_wake::outcome> caller;
};

TEST(caller_wake, a_completion_before_the_wait_returns_at_once) {
  lab l;
  l.phase = wait_phase::done;
  const auto got = l.start().get();
  EXPECT_EQ(got.messages, 0u);
  EXPECT_FALSE(got.completed_awake);
}

TEST(caller_wake, the_completion_wakes_a_sleeping_caller) {
  lab l;
  l.start();
  ASSERT_TRUE(l.reaches(wait_phase::sleeping_watching));
  EXPECT_EQ(l.complete(), wait_phase::sleeping_watching);
  EXPECT_EQ(l.ended().messages, 0u);
}

TEST(caller_wake, a_message_wakes_the_caller_and_the_read_that_carries_it_completes_the_wait) {
  lab l;
  l.start(std::chrono::microseconds{10s});  // waits for the read however slow
  ASSERT_TRUE(l.reaches(wait_phase::sleeping_watching));
  l.send();
  ASSERT_TRUE(l.reaches(wait_phase::running)) << "woken by the bytes";
  l.handle_read(true);
  const auto got = l.ended();
  EXPECT_EQ(got.messages, 1u);
  EXPECT_TRUE(got.completed_awake);
}

TEST(caller_wake, a_message_for_someone_else_sends_the_caller_back_to_sleep) {
  lab l;
  auto& caller = l.start(std::chrono::microseconds{10s});
  ASSERT_TRUE(l.reaches(wait_phase::sleeping_watching));
  l.send();
  ASSERT_TRUE(l.reaches(wait_phase::running));
  l.handle_read(false);  // handled, and it was not this caller's
  ASSERT_TRUE(l.reaches(wait_phase::sleeping_watching)) << "asleep again";
  EXPECT_EQ(caller.wait_for(20ms), std::future_status::timeout);
  EXPECT_EQ(l.complete(), wait_phase::sleeping_watching);
  const auto got = l.ended();
  EXPECT_EQ(got.messages, 1u);
  EXPECT_FALSE(got.completed_awake);
}

// Reads handled while the caller slept, without waking it (their bytes were read before epoll
// looked), must not make it give up on the next message's read: it counts from its wake-up.
// The I/O thread of this test has taken the next message's bytes off the socket and not yet
// begun to handle them (no read under way, nothing queued): only a read handled since the
// wake-up lets the caller go back to sleep.
TEST(caller_wake, reads_handled_during_the_sleep_do_not_cut_the_next_wake_short) {
  lab l;
  l.start(std::chrono::microseconds{10s});
  ASSERT_TRUE(l.reaches(wait_phase::sleeping_watching));
  for (int i = 0; i < 3; ++i) {  // reads of earlier messages, handled while it sleeps
    ++l.started;
    l.handled.fetch_add(1);
  }
  l.send();
  ASSERT_TRUE(l.reaches(wait_phase::running)) << "woken by the bytes";
  char buf[16];
  ASSERT_GT(::read(l.fds[0], buf, sizeof buf), 0);  // taken off the socket, not yet begun
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(l.phase.load(), wait_phase::running) << "still waiting for the read since its wake-up";
  ++l.started;
  EXPECT_EQ(l.complete(), wait_phase::running);
  l.handled.fetch_add(1);
  const auto got = l.ended();
  EXPECT_EQ(got.messages, 1u);
  EXPECT_TRUE(got.completed_awake) << "it waited for the read of the bytes that woke it";
}

// A read under way (begun, not yet through) keeps the woken caller waiting for it.
TEST(caller_wake, a_read_under_way_keeps_the_woken_caller_waiting_for_its_end) {
  lab l;
  l.start(std::chrono::microseconds{10s});
  ASSERT_TRUE(l.reaches(wait_phase::sleeping_watching));
  l.send();
  ASSERT_TRUE(l.reaches(wait_phase::running));
  ++l.started;  // the I/O thread took the bytes off the socket and handles them...
  char buf[16];
  ASSERT_GT(::read(l.fds[0], buf, sizeof buf), 0);
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(l.phase.load(), wait_phase::running) << "nothing queued, but a read under way";
  EXPECT_EQ(l.complete(), wait_phase::running);  // ...and they complete the wait
  l.handled.fetch_add(1);
  EXPECT_TRUE(l.ended().completed_awake);
}

TEST(caller_wake, a_read_that_never_comes_ends_the_callers_wait_for_it_after_the_bound) {
  lab l;
  auto& caller = l.start();  // the default bound: 100 µs
  ASSERT_TRUE(l.reaches(wait_phase::sleeping_watching));
  l.send();  // nobody reads it (an I/O thread that is busy elsewhere)
  EXPECT_EQ(caller.wait_for(50ms), std::future_status::timeout);
  EXPECT_EQ(l.phase.load(), wait_phase::sleeping_watching) << "back to sleep after the bound";
  EXPECT_EQ(l.complete(), wait_phase::sleeping_watching);
  EXPECT_EQ(l.ended().messages, 1u) << "woken once: the same bytes do not wake it again (edge-triggered)";
}

TEST(caller_wake, a_signal_left_by_an_earlier_wait_does_not_end_the_next_one) {
  lab l;
  l.wake->signal();  // an earlier completion that signalled after its caller had returned
  auto& caller = l.start();
  ASSERT_TRUE(l.reaches(wait_phase::sleeping_watching));
  EXPECT_EQ(caller.wait_for(20ms), std::future_status::timeout);
  l.wake->signal();  // and one that comes in the middle of the wait
  EXPECT_EQ(caller.wait_for(20ms), std::future_status::timeout);
  EXPECT_EQ(l.phase.load(), wait_phase::sleeping_watching);
  EXPECT_EQ(l.complete(), wait_phase::sleeping_watching);
  EXPECT_EQ(l.ended().messages, 0u);
}

TEST(caller_wake, a_closed_watched_socket_leaves_the_wait_to_the_completion) {
  lab l;
  auto& caller = l.start();
  ASSERT_TRUE(l.reaches(wait_phase::sleeping_watching));
  ::close(l.fds[0]);  // the subscriber reconnects: its socket closes, which ends the registration
  l.fds[0] = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);  // the number may be reused by anything
  EXPECT_EQ(caller.wait_for(20ms), std::future_status::timeout);
  EXPECT_EQ(l.complete(), wait_phase::sleeping_watching);
  ASSERT_EQ(caller.wait_for(5s), std::future_status::ready);
}

}  // namespace
