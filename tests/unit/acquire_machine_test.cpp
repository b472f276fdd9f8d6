// detail::acquire_machine, part 1: acquisition, waiting, wake-ups, the deadline and the trust of
// an acquisition, stepped with constructed steady_clock times (no sockets, timers or sleeping).
// Cancellation, lost replies, errors, re-entry and WAIT: acquire_machine_failures_test.cpp.
// Each step's actions are compared whole as rendered by show() (acquire_machine_steps.hpp).
#include "sync/acquire_machine.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <system_error>

#include "acquire_machine_steps.hpp"
#include "dlock/error.hpp"
#include "dlock/reply.hpp"
#include "runtime/renewal_schedule.hpp"

namespace {

using namespace dlock::test::steps;

TEST(acquire_machine, an_uncontended_lock_is_acquired_by_one_attempt) {
  machine m{waiting(10s)};
  EXPECT_EQ(show(m.start(t0)), "attempt(0,queue,b=3000ms) timer(t0+10050ms)");
  EXPECT_FALSE(m.done());
  EXPECT_EQ(show(m.on_reply(ok, acquired(42), t0, t0 + 2ms)), "complete(ok)");
  EXPECT_TRUE(m.done());
  EXPECT_EQ(m.token(), 42u);
  EXPECT_EQ(m.trusted_from(), t0) << "trusted from the send, not the reply";
  EXPECT_TRUE(m.replicated());

  machine forever{machine::params{}};  // lock(): no deadline, so no timer while attempting
  EXPECT_EQ(show(forever.start(t0)), "attempt(0,queue,b=3000ms)");
  EXPECT_EQ(show(forever.on_reply(ok, acquired(43), t0, t0 + 1ms)), "complete(ok)");
  EXPECT_EQ(forever.token(), 43u);
}

TEST(acquire_machine, a_single_try_sends_one_attempt_that_does_not_queue) {
  machine m{single_try()};
  EXPECT_EQ(show(m.start(t0)), "attempt(0,b=3000ms)")
      << "no ticket, no timer: it ends with its reply";
  EXPECT_EQ(show(m.on_reply(ok, acquired(5), t0, t0 + 1ms)), "complete(ok)");
  EXPECT_EQ(m.token(), 5u);

  machine past{waiting(0ms)};
  EXPECT_EQ(show(past.start(t0 + 1s)), "attempt(0,b=3000ms)")
      << "a deadline already passed: one try";
  EXPECT_EQ(show(past.on_timer(t0 + 5s)), "") << "no deadline (or grace) for a single try";
  EXPECT_EQ(show(past.on_reply(ok, acquired(6), t0 + 1s, t0 + 5s)), "complete(ok)");
}

// A held (or yielded) reply to a single try proves it neither acquired nor queued (it carried no
// ticket): it completes with timeout and gives nothing back.
TEST(acquire_machine, a_single_try_that_finds_the_lock_held_gives_nothing_back) {
  machine m{single_try()};
  m.start(t0);
  EXPECT_EQ(show(m.on_reply(ok, held(5000), t0, t0 + 1ms)), "complete(timeout)");
  EXPECT_TRUE(m.ended_busy());  // metrics: busy, not failed

  machine y{single_try()};
  y.start(t0);
  EXPECT_EQ(show(y.on_reply(ok, yielded(80), t0, t0 + 1ms)), "complete(timeout)");
  EXPECT_EQ(show(y.on_timer(t0 + 1ms)), "");
}

TEST(acquire_machine, a_wait_subscribes_once_and_sleeps_one_ms_past_the_pttl) {
  machine m{waiting(10s)};
  m.start(t0);
  EXPECT_EQ(show(m.on_reply(ok, held(500), t0, t0 + 1ms)), "subscribe timer(t0+502ms)");
  EXPECT_EQ(show(m.on_timer(t0 + 502ms)), "attempt(0,queue,b=3000ms) timer(t0+10050ms)");
  EXPECT_EQ(show(m.on_reply(ok, yielded(40), t0 + 502ms, t0 + 503ms)), "timer(t0+544ms)")
      << "already subscribed";
  EXPECT_EQ(show(m.on_timer(t0 + 544ms)), "attempt(0,queue,b=3000ms) timer(t0+10050ms)");
  EXPECT_EQ(show(m.on_reply(ok, held(0), t0 + 544ms, t0 + 545ms)), "timer(t0+546ms)");
}

TEST(acquire_machine, the_sleep_is_capped_by_the_recheck_and_the_deadline) {
  machine m{waiting(10s)};
  m.start(t0);
  EXPECT_EQ(show(m.on_reply(ok, held(60000), t0, t0 + 1ms)), "subscribe timer(t0+3001ms)");
  EXPECT_EQ(show(m.on_timer(t0 + 3001ms)), "attempt(0,queue,b=3000ms) timer(t0+10050ms)");
  EXPECT_EQ(show(m.on_reply(ok, held(-1), t0 + 3001ms, t0 + 3002ms)), "timer(t0+6002ms)")
      << "no expiry (PTTL -1): the recheck";

  auto p = waiting(10s);
  p.recheck = 200ms;
  machine short_recheck{p};
  short_recheck.start(t0);
  EXPECT_EQ(show(short_recheck.on_reply(ok, held(60000), t0, t0 + 1ms)),
            "subscribe timer(t0+201ms)");

  machine near{waiting(2s)};
  near.start(t0);
  EXPECT_EQ(show(near.on_reply(ok, held(60000), t0, t0 + 1ms)), "subscribe timer(t0+2000ms)");
  EXPECT_EQ(show(near.on_timer(t0 + 2s)), "complete(timeout) give_back(1)") << "it queued";
}

TEST(acquire_machine, a_wake_during_an_attempt_makes_the_next_attempt_follow_at_once) {
  machine m{waiting(10s)};
  m.start(t0);
  EXPECT_EQ(show(m.on_wake(false, t0 + 1ms)), "");
  EXPECT_EQ(show(m.on_wake(false, t0 + 1ms)), "") << "two wakes, still one attempt in flight";
  EXPECT_EQ(show(m.on_reply(ok, held(5000), t0, t0 + 2ms)),
            "attempt(0,queue,b=3000ms) subscribe timer(t0+10050ms)");
  EXPECT_EQ(show(m.on_reply(ok, held(5000), t0 + 2ms, t0 + 3ms)), "timer(t0+3003ms)")
      << "the wake was used up by that attempt";

  EXPECT_EQ(show(m.on_timer(t0 + 3003ms)), "attempt(0,queue,b=3000ms) timer(t0+10050ms)");
  EXPECT_EQ(show(m.on_wake(true, t0 + 3004ms)), "");
  EXPECT_EQ(show(m.on_reply(ok, yielded(100), t0 + 3003ms, t0 + 3005ms)),
            "attempt(0,queue,foreign,b=3000ms) timer(t0+10050ms)");
  EXPECT_EQ(show(m.on_reply(ok, held(100), t0 + 3005ms, t0 + 3006ms)), "timer(t0+3107ms)");
}

TEST(acquire_machine, a_wake_while_sleeping_attempts_at_once_and_foreign_applies_once) {
  machine m{waiting(10s)};
  m.start(t0);
  m.on_reply(ok, held(5000), t0, t0 + 1ms);
  EXPECT_EQ(show(m.on_wake(true, t0 + 10ms)),
            "attempt(0,queue,foreign,b=3000ms) timer(t0+10050ms)");
  EXPECT_EQ(show(m.on_reply(ok, held(5000), t0 + 10ms, t0 + 11ms)), "timer(t0+3011ms)");
  EXPECT_EQ(show(m.on_wake(false, t0 + 20ms)), "attempt(0,queue,b=3000ms) timer(t0+10050ms)")
      << "the foreign flag went with one attempt";
  EXPECT_EQ(show(m.on_reply(ok, acquired(3), t0 + 20ms, t0 + 21ms)), "complete(ok)");
  EXPECT_EQ(m.trusted_from(), t0 + 20ms);
  EXPECT_EQ(show(m.on_wake(true, t0 + 22ms)), "") << "done";

  machine idle{waiting(10s)};
  EXPECT_EQ(show(idle.on_wake(false, t0)), "") << "not started";
  EXPECT_EQ(show(idle.start(t0)), "attempt(0,queue,b=3000ms) timer(t0+10050ms)");
}

TEST(acquire_machine, a_yield_only_shortens_the_sleep) {
  machine m{waiting(10s)};
  m.start(t0);
  EXPECT_EQ(show(m.on_reply(ok, held(60000), t0, t0 + 1ms)), "subscribe timer(t0+3001ms)");
  EXPECT_EQ(show(m.on_wake(false, t0 + 5ms, t0 + 105ms)), "timer(t0+105ms)");
  EXPECT_EQ(show(m.on_wake(false, t0 + 6ms, t0 + 2000ms)), "") << "never later";
  EXPECT_EQ(show(m.on_wake(false, t0 + 7ms, t0 + 50ms)), "timer(t0+50ms)");
  EXPECT_EQ(show(m.on_timer(t0 + 50ms)), "attempt(0,queue,b=3000ms) timer(t0+10050ms)");
  EXPECT_EQ(show(m.on_wake(false, t0 + 51ms, t0 + 60ms)), "") << "attempting: nothing at once";

  machine near{waiting(100ms)};
  near.start(t0);
  EXPECT_EQ(show(near.on_reply(ok, held(60000), t0, t0 + 1ms)), "subscribe timer(t0+100ms)");
  EXPECT_EQ(show(near.on_wake(false, t0 + 2ms, t0 + 500ms)), "timer(t0+100ms)")
      << "still no later than the deadline";
  EXPECT_EQ(show(near.on_timer(t0 + 100ms)), "complete(timeout) give_back(1)");
}

// A yield (re-check at `after`) that arrives while an attempt sent before the release is in
// flight is remembered: that attempt's reply carries the old holder's PTTL, and the sleep after
// it ends by the earliest such `after` (at once if that has passed), for that one sleep only.
TEST(acquire_machine, a_yield_during_an_attempt_is_not_lost) {
  machine m{waiting(10s)};
  m.start(t0);
  EXPECT_EQ(show(m.on_wake(false, t0 + 1ms, t0 + 101ms)), "");
  EXPECT_EQ(show(m.on_reply(ok, held(20000), t0, t0 + 2ms)), "subscribe timer(t0+101ms)");
  EXPECT_EQ(show(m.on_timer(t0 + 101ms)), "attempt(0,queue,b=3000ms) timer(t0+10050ms)");
  EXPECT_EQ(show(m.on_reply(ok, held(20000), t0 + 101ms, t0 + 102ms)), "timer(t0+3102ms)")
      << "used up by one sleep";

  EXPECT_EQ(show(m.on_timer(t0 + 3102ms)), "attempt(0,queue,b=3000ms) timer(t0+10050ms)");
  EXPECT_EQ(show(m.on_wake(false, t0 + 3103ms, t0 + 3300ms)), "");
  EXPECT_EQ(show(m.on_wake(false, t0 + 3104ms, t0 + 3200ms)), "");
  EXPECT_EQ(show(m.on_wake(false, t0 + 3105ms, t0 + 3400ms)), "");
  EXPECT_EQ(show(m.on_reply(ok, held(20000), t0 + 3102ms, t0 + 3106ms)), "timer(t0+3200ms)")
      << "the earliest";

  EXPECT_EQ(show(m.on_timer(t0 + 3200ms)), "attempt(0,queue,b=3000ms) timer(t0+10050ms)");
  EXPECT_EQ(show(m.on_wake(false, t0 + 3201ms, t0 + 3210ms)), "");
  EXPECT_EQ(show(m.on_reply(ok, held(20000), t0 + 3200ms, t0 + 3250ms)), "timer(t0+3250ms)")
      << "already passed: re-check at once";
}

// An attempt of a wait still out at the deadline gets the grace (50 ms) to answer; at the
// deadline plus the grace the wait times out and gives the attempt back.
TEST(acquire_machine, the_deadline_during_an_attempt_times_out_after_the_grace_with_a_give_back) {
  ASSERT_EQ(machine::grace, 50ms);
  machine m{waiting(1s)};
  EXPECT_EQ(show(m.start(t0)), "attempt(0,queue,b=1000ms) timer(t0+1050ms)");
  EXPECT_EQ(show(m.on_timer(t0 + 999ms)), "") << "an early timer changes nothing";
  EXPECT_EQ(show(m.on_timer(t0 + 1s)), "") << "the deadline itself: the attempt has the grace";
  EXPECT_EQ(show(m.on_wake(false, t0 + 1010ms)), "");
  EXPECT_EQ(show(m.on_timer(t0 + 1050ms - 1ns)), "");
  EXPECT_FALSE(m.done());
  EXPECT_EQ(show(m.on_timer(t0 + 1050ms)), "complete(timeout) give_back(1)");
  EXPECT_TRUE(m.done());
  EXPECT_EQ(show(m.on_reply(ok, acquired(1), t0, t0 + 1055ms)), "") << "given back already";
  EXPECT_EQ(show(m.on_reply(ok, held(5), t0, t0 + 1055ms)), "");
  EXPECT_EQ(show(m.on_timer(t0 + 1056ms)), "");
  EXPECT_EQ(show(m.on_wake(true, t0 + 1056ms)), "");
  EXPECT_EQ(show(m.on_cancel(make_error_code(errc::shutdown), t0 + 1057ms)), "");
  EXPECT_EQ(show(m.on_replicas(ok, true, t0 + 1057ms)), "");
  EXPECT_EQ(m.token(), 0u);

  machine later{waiting(1s)};  // a later attempt, after a sleep
  later.start(t0);
  later.on_reply(ok, held(100), t0, t0 + 1ms);
  EXPECT_EQ(show(later.on_timer(t0 + 102ms)), "attempt(0,queue,b=898ms) timer(t0+1050ms)");
  EXPECT_EQ(show(later.on_timer(t0 + 1s)), "");
  EXPECT_EQ(show(later.on_timer(t0 + 1050ms)), "complete(timeout) give_back(1)");
}

TEST(acquire_machine, a_held_reply_after_the_deadline_completes_once) {
  machine m{waiting(1s)};
  m.start(t0);
  // The reply is handled before the timer at the deadline plus the grace.
  EXPECT_EQ(show(m.on_reply(ok, held(5000), t0, t0 + 1001ms)), "complete(timeout) give_back(1)");
  EXPECT_EQ(show(m.on_timer(t0 + 1050ms)), "");
  EXPECT_TRUE(m.ended_busy());

  machine y{waiting(1s)};
  y.start(t0);
  EXPECT_EQ(show(y.on_reply(ok, yielded(50), t0, t0 + 1s)), "complete(timeout) give_back(1)");
}

// Like Redisson's tryLock: an attempt sent in time whose trusted acquisition is handled just
// after the deadline (within the grace) is kept, once.
TEST(acquire_machine, a_trusted_acquisition_handled_after_the_deadline_completes_once) {
  machine m{waiting(1s)};
  m.start(t0);
  EXPECT_EQ(show(m.on_timer(t0 + 1s)), "");
  EXPECT_EQ(show(m.on_reply(ok, acquired(7), t0, t0 + 1001ms)), "complete(ok)");
  EXPECT_EQ(show(m.on_timer(t0 + 1050ms)), "");
  EXPECT_EQ(m.token(), 7u);
}

// A wake handled while sleeping past the deadline, before the timer, completes with timeout at
// once (giving the queue place back) rather than sending an attempt that would end later still.
TEST(acquire_machine, a_wake_after_the_deadline_sends_no_new_attempt) {
  machine m{waiting(1s)};
  m.start(t0);
  EXPECT_EQ(show(m.on_reply(ok, held(5000), t0, t0 + 1ms)), "subscribe timer(t0+1000ms)");
  EXPECT_EQ(show(m.on_wake(false, t0 + 1s)), "complete(timeout) give_back(1)");
  EXPECT_EQ(show(m.on_timer(t0 + 1s)), "");
}

TEST(acquire_machine, an_acquisition_past_its_trust_is_given_back_and_tried_again) {
  auto p = waiting(10s);
  p.lease = 1s;
  const auto trusted = dlock::detail::renewal_schedule::trusted_until(t0, 1s);
  ASSERT_EQ(trusted, t0 + 988ms);

  machine in_time{p};
  in_time.start(t0);
  EXPECT_EQ(show(in_time.on_reply(ok, acquired(8), t0, trusted - 1ns)), "complete(ok)");

  machine m{p};
  m.start(t0);
  EXPECT_EQ(show(m.on_reply(ok, acquired(9), t0, trusted)),
            "give_back(1) attempt(0,queue,b=3000ms) timer(t0+10050ms)");
  EXPECT_FALSE(m.done());
  EXPECT_EQ(show(m.on_reply(ok, acquired(10), t0 + 988ms, t0 + 990ms)), "complete(ok)");
  EXPECT_EQ(m.token(), 10u);
  EXPECT_EQ(m.trusted_from(), t0 + 988ms);

  p.have = 1;  // a re-entry gives back the one hold it added
  machine again{p};
  again.start(t0);
  EXPECT_EQ(show(again.on_reply(ok, acquired(0), t0, t0 + 2s)), "give_back(2) attempt(1,b=3000ms)");
}

TEST(acquire_machine, an_acquisition_past_its_trust_with_no_time_left_times_out) {
  auto p = waiting(500ms);
  p.lease = 1s;
  machine m{p};
  m.start(t0);
  EXPECT_EQ(show(m.on_reply(ok, acquired(9), t0, t0 + 988ms)), "complete(timeout) give_back(1)");
  EXPECT_EQ(show(m.on_timer(t0 + 988ms)), "");
  EXPECT_EQ(m.token(), 0u);

  auto q = single_try();
  q.lease = 1s;
  machine once{q};
  once.start(t0);
  EXPECT_EQ(show(once.on_reply(ok, acquired(9), t0, t0 + 1s)), "complete(timeout) give_back(1)");
}

TEST(acquire_machine, a_timer_before_the_wake_time_rearms_it) {
  machine m{waiting(10s)};
  m.start(t0);
  m.on_reply(ok, held(60000), t0, t0 + 1ms);
  EXPECT_EQ(show(m.on_timer(t0 + 2s)), "timer(t0+3001ms)");
  EXPECT_EQ(show(m.on_timer(t0 + 3001ms)), "attempt(0,queue,b=3000ms) timer(t0+10050ms)");
}

// An attempt's budget (its timeout): what is left of a wait, at least the grace and at most a
// command timeout; a whole command timeout for a single try, a re-entry and lock().
TEST(acquire_machine, an_attempt_has_the_budget_of_what_is_left_of_the_wait) {
  machine m{waiting(10s)};
  EXPECT_EQ(show(m.start(t0)), "attempt(0,queue,b=3000ms) timer(t0+10050ms)")
      << "10 s left: the command timeout";
  m.on_reply(ok, held(60000), t0, t0 + 1ms);
  EXPECT_EQ(show(m.on_wake(false, t0 + 8500ms)), "attempt(0,queue,b=1500ms) timer(t0+10050ms)");
  EXPECT_EQ(show(m.on_reply(ok, held(60000), t0 + 8500ms, t0 + 8501ms)), "timer(t0+10000ms)");
  EXPECT_EQ(show(m.on_wake(false, t0 + 9980ms)), "attempt(0,queue,b=50ms) timer(t0+10050ms)")
      << "20 ms left: the grace";

  machine near{waiting(20ms)};
  EXPECT_EQ(show(near.start(t0)), "attempt(0,queue,b=50ms) timer(t0+70ms)");
  machine lost{waiting(1s)};  // a resend has what is left when it goes
  EXPECT_EQ(show(lost.start(t0)), "attempt(0,queue,b=1000ms) timer(t0+1050ms)");
  EXPECT_EQ(show(lost.on_reply(err(errc::timeout), none, t0, t0 + 900ms)),
            "attempt(0,queue,b=100ms) timer(t0+1050ms)");

  auto p = waiting(10s);
  p.command_timeout = 500ms;
  machine short_timeout{p};
  EXPECT_EQ(show(short_timeout.start(t0)), "attempt(0,queue,b=500ms) timer(t0+10050ms)");
  EXPECT_EQ(show(short_timeout.on_reply(ok, held(-1), t0, t0 + 1ms)), "subscribe timer(t0+3001ms)");
  EXPECT_EQ(show(short_timeout.on_wake(false, t0 + 9700ms)),
            "attempt(0,queue,b=300ms) timer(t0+10050ms)");

  p = waiting(0ms);
  machine once{p};
  EXPECT_EQ(show(once.start(t0)), "attempt(0,b=3000ms)") << "a single try: the command timeout";
  p.command_timeout = 500ms;
  machine once_short{p};
  EXPECT_EQ(show(once_short.start(t0)), "attempt(0,b=500ms)");
  EXPECT_EQ(show(once_short.on_reply(err(errc::timeout), none, t0, t0 + 500ms)),
            "attempt(0,b=500ms)");

  machine forever{machine::params{}};
  EXPECT_EQ(show(forever.start(t0)), "attempt(0,queue,b=3000ms)") << "lock(): the command timeout";
  forever.on_reply(ok, held(100), t0, t0 + 1ms);
  EXPECT_EQ(show(forever.on_timer(t0 + 102ms)), "attempt(0,queue,b=3000ms)");

  p = waiting(20ms);
  p.have = 1;
  machine reentry{p};
  EXPECT_EQ(show(reentry.start(t0)), "attempt(1,b=3000ms)") << "a re-entry does not wait";
}

// A `0` (foreign wake) it could not answer is owed to the next waiter of its process; a held
// reply answers it (the lock was not free), a plain wake-up owes nothing.
TEST(acquire_machine, a_foreign_wake_is_owed_until_a_held_reply_answers_it) {
  machine m{waiting(10s)};
  m.start(t0);
  m.on_reply(ok, held(5000), t0, t0 + 1ms);
  m.on_wake(false, t0 + 2ms);
  EXPECT_FALSE(m.owes_wake());
  m.on_reply(ok, held(5000), t0 + 2ms, t0 + 3ms);
  m.on_wake(true, t0 + 4ms);
  EXPECT_TRUE(m.owes_wake());
  m.on_reply(ok, held(5000), t0 + 4ms, t0 + 5ms);
  EXPECT_FALSE(m.owes_wake());
  m.on_wake(true, t0 + 6ms);
  EXPECT_EQ(show(m.on_cancel(aborted, t0 + 7ms)), "complete(operation_aborted) give_back(1)");
  EXPECT_TRUE(m.owes_wake());
}

}  // namespace
