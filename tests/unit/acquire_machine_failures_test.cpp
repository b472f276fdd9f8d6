// detail::acquire_machine, part 2: cancellation, lost replies, error replies, re-entry, WAIT for
// replicas and malformed replies, stepped with constructed steady_clock times. Actions are
// compared whole as rendered by show() (acquire_machine_steps.hpp).
#include <gtest/gtest.h>

#include <asio/error.hpp>
#include <chrono>
#include <cstdint>
#include <string>
#include <system_error>
#include <utility>

#include "acquire_machine_steps.hpp"
#include "dlock/error.hpp"
#include "dlock/reply.hpp"
#include "sync/acquire_machine.hpp"

namespace {

using namespace dlock::test::steps;

TEST(acquire_machine_failures, a_cancel_before_any_reply_gives_back) {
  machine m{waiting(10s)};
  m.start(t0);
  EXPECT_EQ(show(m.on_cancel(aborted, t0 + 1ms)), "complete(operation_aborted) give_back(1)");
  EXPECT_EQ(show(m.on_reply(ok, acquired(1), t0, t0 + 2ms)), "") << "the give-back has it";

  machine once{waiting(0ms)};
  once.start(t0);
  EXPECT_EQ(show(once.on_cancel(err(errc::shutdown), t0)), "complete(shutdown) give_back(1)");

  auto p = waiting(10s);
  p.have = 2;
  machine reentry{p};
  reentry.start(t0);
  EXPECT_EQ(show(reentry.on_cancel(aborted, t0)), "complete(operation_aborted) give_back(3)");

  machine idle{waiting(10s)};
  EXPECT_EQ(show(idle.on_cancel(aborted, t0)), "complete(operation_aborted)") << "not started";
}

TEST(acquire_machine_failures, a_cancel_while_sleeping_in_the_queue_gives_back) {
  // Queued, it may have been handed the lock by an unlock it has not heard of yet.
  machine m{waiting(10s)};
  m.start(t0);
  m.on_reply(ok, held(5000), t0, t0 + 1ms);
  EXPECT_EQ(show(m.on_cancel(err(errc::shutdown), t0 + 2ms)), "complete(shutdown) give_back(1)");
  EXPECT_EQ(show(m.on_timer(t0 + 3001ms)), "");
  EXPECT_EQ(show(m.on_wake(false, t0 + 3002ms)), "");
}

TEST(acquire_machine_failures, a_cancel_while_pausing_without_a_queue_place_gives_nothing_back) {
  machine m{waiting(10s)};
  m.start(t0);
  EXPECT_EQ(show(m.on_reply(err(errc::loading), none, t0, t0 + 1ms)), "timer(t0+51ms)");
  EXPECT_EQ(show(m.on_cancel(aborted, t0 + 2ms)), "complete(operation_aborted)");
}

TEST(acquire_machine_failures, a_cancel_after_completion_does_nothing) {
  machine m{waiting(10s)};
  m.start(t0);
  m.on_reply(ok, acquired(4), t0, t0 + 1ms);
  EXPECT_EQ(show(m.on_cancel(aborted, t0 + 2ms)), "");
  EXPECT_EQ(show(m.on_cancel(err(errc::shutdown), t0 + 2ms)), "");
  EXPECT_TRUE(m.done());
  EXPECT_EQ(m.token(), 4u);
}

TEST(acquire_machine_failures, a_lost_reply_is_resent_with_the_same_count_up_to_max_resends) {
  ASSERT_EQ(machine::max_resends, 3);
  machine m{waiting(10s)};
  m.start(t0);
  const std::error_code lost[] = {err(errc::timeout), err(errc::connection_lost),
                                  err(errc::timeout)};
  for (auto ec : lost) {
    EXPECT_EQ(show(m.on_reply(ec, none, t0, t0 + 3s)),
              "attempt(0,queue,b=3000ms) timer(t0+10050ms)");
  }
  EXPECT_EQ(show(m.on_reply(err(errc::connection_lost), none, t0 + 3s, t0 + 6s)),
            "complete(connection_lost) give_back(1)");

  auto p = waiting(10s);
  p.have = 2;
  machine reentry{p};
  EXPECT_EQ(show(reentry.start(t0)), "attempt(2,b=3000ms)");
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(show(reentry.on_reply(err(errc::timeout), none, t0, t0)), "attempt(2,b=3000ms)");
  EXPECT_EQ(show(reentry.on_reply(err(errc::timeout), none, t0, t0)),
            "complete(timeout) give_back(3)");
  // A timeout of the commands is a failure, not "busy" (metrics): the lock was never seen held.
  EXPECT_FALSE(reentry.ended_busy());
  EXPECT_FALSE(m.ended_busy());
}

TEST(acquire_machine_failures, a_reply_starts_the_resend_count_again) {
  machine m{waiting(10s)};
  m.start(t0);
  m.on_reply(err(errc::timeout), none, t0, t0 + 1ms);
  m.on_reply(err(errc::timeout), none, t0 + 1ms, t0 + 2ms);
  EXPECT_EQ(show(m.on_reply(ok, held(100), t0 + 2ms, t0 + 3ms)), "subscribe timer(t0+104ms)");
  EXPECT_EQ(show(m.on_wake(false, t0 + 4ms)), "attempt(0,queue,b=3000ms) timer(t0+10050ms)");
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(show(m.on_reply(err(errc::connection_lost), none, t0, t0 + 5ms)),
              "attempt(0,queue,b=3000ms) timer(t0+10050ms)");
  }
  EXPECT_EQ(show(m.on_reply(err(errc::connection_lost), none, t0, t0 + 6ms)),
            "complete(connection_lost) give_back(1)");
}

TEST(acquire_machine_failures, a_single_try_resends_a_lost_reply_even_after_its_deadline) {
  machine m{waiting(0ms)};
  m.start(t0);
  EXPECT_EQ(show(m.on_reply(err(errc::timeout), none, t0, t0 + 3s)), "attempt(0,b=3000ms)");
  EXPECT_EQ(show(m.on_reply(ok, acquired(6), t0 + 3s, t0 + 3001ms)), "complete(ok)");

  machine other{waiting(0ms)};  // the lost send may have acquired: given back on failure
  other.start(t0);
  other.on_reply(err(errc::connection_lost), none, t0, t0 + 1ms);
  EXPECT_EQ(show(other.on_reply(ok, held(50), t0 + 1ms, t0 + 2ms)),
            "complete(timeout) give_back(1)");
}

TEST(acquire_machine_failures,
     a_lost_reply_after_the_deadline_of_a_wait_times_out_with_a_give_back) {
  machine m{waiting(1s)};
  m.start(t0);
  EXPECT_EQ(show(m.on_reply(err(errc::connection_lost), none, t0, t0 + 1s)),
            "complete(timeout) give_back(1)");
  EXPECT_EQ(show(m.on_timer(t0 + 1s)), "");
}

TEST(acquire_machine_failures, transient_errors_are_retried_for_one_command_timeout) {
  auto p = waiting(10s);
  p.command_timeout = 200ms;
  machine m{p};
  m.start(t0);
  EXPECT_EQ(show(m.on_reply(err(errc::loading), none, t0, t0)), "timer(t0+50ms)");
  EXPECT_EQ(show(m.on_timer(t0 + 50ms)), "attempt(0,queue,b=200ms) timer(t0+10050ms)");
  EXPECT_EQ(show(m.on_reply(err(errc::busy), none, t0 + 50ms, t0 + 199ms)), "timer(t0+249ms)");
  EXPECT_EQ(show(m.on_timer(t0 + 249ms)), "attempt(0,queue,b=200ms) timer(t0+10050ms)");
  const auto a = m.on_reply(err(errc::busy), none, t0 + 249ms, t0 + 250ms);
  EXPECT_EQ(a.complete, err(errc::busy)) << show(a);  // it had queued: given back
  EXPECT_FALSE(a.attempt);
  EXPECT_TRUE(m.done());
}

TEST(acquire_machine_failures, transient_retries_end_at_the_deadline) {
  machine m{waiting(100ms)};
  m.start(t0);
  EXPECT_EQ(show(m.on_reply(err(errc::loading), none, t0, t0 + 1ms)), "timer(t0+51ms)");
  EXPECT_EQ(show(m.on_timer(t0 + 51ms)), "attempt(0,queue,b=50ms) timer(t0+150ms)");
  EXPECT_EQ(show(m.on_reply(err(errc::loading), none, t0 + 51ms, t0 + 60ms)), "timer(t0+100ms)");
  // The error being waited out is the answer at the deadline (never queued: nothing to give).
  EXPECT_EQ(show(m.on_timer(t0 + 100ms)), "complete(loading)");
}

TEST(acquire_machine_failures, a_reply_starts_the_transient_window_again) {
  auto p = waiting(10s);
  p.command_timeout = 200ms;
  machine m{p};
  m.start(t0);
  m.on_reply(err(errc::loading), none, t0, t0);
  m.on_timer(t0 + 50ms);
  EXPECT_EQ(show(m.on_reply(ok, held(1000), t0 + 50ms, t0 + 150ms)), "subscribe timer(t0+1151ms)");
  EXPECT_EQ(show(m.on_timer(t0 + 1151ms)), "attempt(0,queue,b=200ms) timer(t0+10050ms)");
  EXPECT_EQ(show(m.on_reply(err(errc::loading), none, t0 + 1151ms, t0 + 1200ms)),
            "timer(t0+1250ms)");
}

// Within the grace an attempt's reply decides: its own error is what the caller learns (given
// back only if the wait may hold something), a held or lost reply is a timeout.
TEST(acquire_machine_failures, a_reply_within_the_grace_completes_with_its_own_outcome) {
  machine refused{waiting(1s)};
  refused.start(t0);
  EXPECT_EQ(show(refused.on_timer(t0 + 1s)), "");
  EXPECT_EQ(show(refused.on_reply(err(errc::connection_refused), none, t0, t0 + 1020ms)),
            "complete(connection_refused)")
      << "not a timeout, and nothing to give back";
  EXPECT_EQ(show(refused.on_timer(t0 + 1050ms)), "");

  machine queued{waiting(1s)};  // queued by its first attempt: the error gives back
  queued.start(t0);
  queued.on_reply(ok, held(60000), t0, t0 + 1ms);
  EXPECT_EQ(show(queued.on_wake(false, t0 + 990ms)), "attempt(0,queue,b=50ms) timer(t0+1050ms)");
  EXPECT_EQ(show(queued.on_timer(t0 + 1s)), "");
  EXPECT_EQ(show(queued.on_reply(err(errc::connection_refused), none, t0 + 990ms, t0 + 1049ms)),
            "complete(connection_refused) give_back(1)");

  machine loading{waiting(1s)};
  loading.start(t0);
  EXPECT_EQ(show(loading.on_reply(err(errc::loading), none, t0, t0 + 1001ms)), "complete(loading)")
      << "no time left to wait it out";

  machine lost{waiting(1s)};
  lost.start(t0);
  EXPECT_EQ(show(lost.on_reply(err(errc::connection_lost), none, t0, t0 + 1001ms)),
            "complete(timeout) give_back(1)");

  machine woken{waiting(1s)};
  woken.start(t0);
  EXPECT_EQ(show(woken.on_wake(false, t0 + 1001ms)), "");
  EXPECT_EQ(show(woken.on_reply(ok, held(5000), t0, t0 + 1002ms)), "complete(timeout) give_back(1)")
      << "a wake during the grace sends no new attempt";
}

TEST(acquire_machine_failures, an_error_after_queueing_or_a_lost_reply_gives_back) {
  machine queued{waiting(10s)};
  queued.start(t0);
  queued.on_reply(ok, held(1000), t0, t0 + 1ms);
  EXPECT_EQ(show(queued.on_timer(t0 + 1002ms)), "attempt(0,queue,b=3000ms) timer(t0+10050ms)");
  EXPECT_EQ(show(queued.on_reply(err(errc::wrong_type), none, t0 + 1002ms, t0 + 1003ms)),
            "complete(wrong_type) give_back(1)");

  machine lost{waiting(10s)};
  lost.start(t0);
  lost.on_reply(err(errc::timeout), none, t0, t0 + 1ms);
  EXPECT_EQ(show(lost.on_reply(err(errc::wrong_type), none, t0 + 1ms, t0 + 2ms)),
            "complete(wrong_type) give_back(1)");
}

// An error reply proves the script did not run (nothing acquired, nothing queued): with no
// queue place or lost reply before it, nothing is given back.
TEST(acquire_machine_failures, an_error_reply_before_queueing_gives_nothing_back) {
  machine wrong{waiting(10s)};
  wrong.start(t0);
  EXPECT_EQ(show(wrong.on_reply(err(errc::wrong_type), none, t0, t0 + 1ms)),
            "complete(wrong_type)");

  machine once{waiting(0ms)};  // a single try: no time to wait LOADING out
  once.start(t0);
  EXPECT_EQ(show(once.on_reply(err(errc::loading), none, t0, t0 + 1ms)), "complete(loading)");

  auto p = waiting(10s);
  p.command_timeout = 200ms;
  machine transient{p};
  transient.start(t0);
  transient.on_reply(err(errc::loading), none, t0, t0);
  transient.on_timer(t0 + 50ms);
  EXPECT_EQ(show(transient.on_reply(err(errc::loading), none, t0 + 50ms, t0 + 200ms)),
            "complete(loading)");
}

TEST(acquire_machine_failures, a_reentry_never_queues_and_takes_token_zero) {
  auto p = waiting(10s);
  p.have = 1;
  machine m{p};
  EXPECT_EQ(show(m.start(t0)), "attempt(1,b=3000ms)");
  EXPECT_EQ(show(m.on_wake(false, t0 + 1ms)), "");
  EXPECT_EQ(show(m.on_reply(ok, acquired(0), t0, t0 + 2ms)), "complete(ok)");
  EXPECT_EQ(m.token(), 0u);
  EXPECT_EQ(m.trusted_from(), t0);
}

// A re-entry writes too (the count, the lease): it is replicated like a first acquisition, and
// a shortfall under `fail` gives back the re-entry only.
TEST(acquire_machine_failures, a_reentry_waits_for_the_replicas_too) {
  auto p = waiting(10s);
  p.have = 1;
  p.replicate = true;
  machine m{p};
  m.start(t0);
  EXPECT_EQ(show(m.on_reply(ok, acquired(0), t0, t0 + 2ms)), "send_wait timer(t0+10000ms)");
  EXPECT_EQ(show(m.on_replicas(ok, true, t0 + 3ms)), "complete(ok)");
  machine short_of{p};
  short_of.start(t0);
  short_of.on_reply(ok, acquired(0), t0, t0 + 2ms);
  EXPECT_EQ(show(short_of.on_replicas(ok, false, t0 + 3ms)), "complete(no_replicas) give_back(2)");
}

// {3, 0} says the owner's field holds fewer holds than it expects: the script changed nothing,
// so nothing is given back.
TEST(acquire_machine_failures, a_reentry_whose_hold_was_lost_gives_nothing_back) {
  auto p = waiting(10s);
  p.have = 1;
  machine m{p};
  m.start(t0);
  EXPECT_EQ(show(m.on_reply(ok, script(3, 0), t0, t0 + 1ms)), "complete(lease_lost)");
}

machine replicating(machine::params p) {
  machine m{p};
  m.start(t0);
  EXPECT_EQ(show(m.on_replicas(ok, true, t0)), "") << "no WAIT before the acquisition";
  m.on_reply(ok, acquired(5), t0, t0 + 1ms);
  return m;
}

TEST(acquire_machine_failures, replicate_sends_wait_after_a_first_acquisition) {
  auto p = waiting(1s);
  p.replicate = true;
  machine m{p};
  m.start(t0);
  EXPECT_EQ(show(m.on_reply(ok, acquired(5), t0, t0 + 1ms)), "send_wait timer(t0+1000ms)");
  EXPECT_EQ(show(m.on_wake(false, t0 + 2ms)), "");
  EXPECT_EQ(show(m.on_timer(t0 + 500ms)), "") << "before the deadline";
  EXPECT_EQ(show(m.on_replicas(ok, true, t0 + 3ms)), "complete(ok)");
  EXPECT_TRUE(m.replicated());
  EXPECT_EQ(m.token(), 5u);
  EXPECT_EQ(show(m.on_replicas(ok, true, t0 + 4ms)), "");

  machine::params forever;
  forever.replicate = true;
  machine f{forever};
  f.start(t0);
  EXPECT_EQ(show(f.on_reply(ok, acquired(5), t0, t0 + 1ms)), "send_wait");
  EXPECT_EQ(show(f.on_replicas(ok, true, t0 + 2ms)), "complete(ok)");
}

TEST(acquire_machine_failures, a_replica_shortfall_is_accepted_when_allowed) {
  auto p = waiting(1s);
  p.replicate = true;
  p.accept_shortfall = true;
  auto m = replicating(p);
  EXPECT_EQ(show(m.on_replicas(ok, false, t0 + 2ms)), "complete(ok)");
  EXPECT_FALSE(m.replicated());

  auto e = replicating(p);
  EXPECT_EQ(show(e.on_replicas(err(errc::connection_lost), false, t0 + 2ms)), "complete(ok)");
  EXPECT_FALSE(e.replicated());
}

TEST(acquire_machine_failures, a_replica_shortfall_gives_the_lock_back_otherwise) {
  auto p = waiting(1s);
  p.replicate = true;
  auto m = replicating(p);
  EXPECT_EQ(show(m.on_replicas(ok, false, t0 + 2ms)), "complete(no_replicas) give_back(1)");

  auto e = replicating(p);
  EXPECT_EQ(show(e.on_replicas(err(errc::connection_lost), false, t0 + 2ms)),
            "complete(connection_lost) give_back(1)");

  auto late = replicating(p);
  EXPECT_EQ(show(late.on_timer(t0 + 1s)), "complete(timeout) give_back(1)");
  EXPECT_EQ(show(late.on_replicas(ok, true, t0 + 1001ms)), "");

  auto cancelled = replicating(p);
  EXPECT_EQ(show(cancelled.on_cancel(aborted, t0 + 2ms)),
            "complete(operation_aborted) give_back(1)");
}

// Nothing certain can be read from a malformed reply: it gives back in case the script acquired.
TEST(acquire_machine_failures, a_malformed_reply_is_a_protocol_error) {
  const reply bad[] = {
      reply::make_integer(0),
      reply::make_nil(),
      script(6, 0),
      reply::make_array({reply::make_integer(0)}),
      reply::make_array({reply::make_integer(0), reply::make_integer(1), reply::make_integer(2)}),
      reply::make_array({reply::make_bulk("0"), reply::make_integer(1)}),
  };
  for (const auto& r : bad) {
    machine m{waiting(10s)};
    m.start(t0);
    EXPECT_EQ(show(m.on_reply(ok, r, t0, t0 + 1ms)), "complete(protocol_error) give_back(1)")
        << dlock::to_string(r);
    EXPECT_TRUE(m.done());
  }
}

// A reader asking for the write side (4) and a name of another lock kind (5) end the operation
// at once with their own error; nothing was queued, so nothing is given back.
TEST(acquire_machine_failures, an_upgrade_or_another_kind_fails_at_once) {
  for (const auto& [code, expected] :
       {std::pair{4, "complete(upgrade_refused)"}, std::pair{5, "complete(wrong_kind)"}}) {
    machine m{waiting(10s)};
    m.start(t0);
    EXPECT_EQ(show(m.on_reply(ok, script(code, 0), t0, t0 + 1ms)), expected);
    EXPECT_TRUE(m.done());
  }
}

// A writer that queued (its entry among the waiting writers) and then meets another kind leaves
// the queue: the give-back removes its entry.
TEST(acquire_machine_failures, another_kind_after_queueing_gives_the_entry_back) {
  machine m{waiting(10s)};
  m.start(t0);
  m.on_reply(ok, script(1, 500), t0, t0 + 1ms);
  m.on_wake(false, t0 + 2ms);
  EXPECT_EQ(show(m.on_reply(ok, script(5, 0), t0 + 2ms, t0 + 3ms)),
            "complete(wrong_kind) give_back(1)");
}

}  // namespace
