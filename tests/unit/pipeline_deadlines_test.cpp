// transport::pipeline, the request/reply state machine of a command connection, step by step:
// deadlines — queued requests expiring unwritten, the link deadline, in-flight timeouts that keep
// their slot, the stuck report, and the next deadline to wait for. (Fixture:
// pipeline_fixture.hpp.)
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <system_error>
#include <vector>

#include "dlock/error.hpp"
#include "dlock/reply.hpp"
#include "pipeline_fixture.hpp"
#include "transport/pipeline.hpp"

using namespace dlock::test::pipeline_fixture;

namespace {

TEST_F(pipeline_test, expired_queued_request_is_removed_and_never_written) {
  push(1, t0_ + 1s);
  push(2, t0_ + 10s);
  push(3, t0_ + 1s);
  EXPECT_FALSE(pipe_.expire(t0_ + 2s, true, errc::connection_refused));
  ASSERT_EQ(calls_.size(), 2u);
  EXPECT_EQ(tags(), (std::vector<int>{1, 3}));
  EXPECT_EQ(calls_[0].ec, errc::connection_refused);
  EXPECT_EQ(calls_[1].ec, errc::connection_refused);
  EXPECT_EQ(pipe_.queued(), 1u);

  EXPECT_EQ(take_writes(), "2;");
  EXPECT_TRUE(pipe_.on_reply(reply::make_simple("OK")));
  ASSERT_EQ(calls_.size(), 3u);
  EXPECT_EQ(calls_[2].tag, 2);
  EXPECT_FALSE(calls_[2].ec);
}

TEST_F(pipeline_test, expire_at_exactly_the_deadline) {
  push(1, t0_ + 1s);
  pipe_.expire(t0_ + 1s - 1ns, true, errc::timeout);
  EXPECT_TRUE(calls_.empty());
  pipe_.expire(t0_ + 1s, true, errc::timeout);
  ASSERT_EQ(calls_.size(), 1u);
  EXPECT_EQ(calls_[0].ec, errc::timeout);
}

TEST_F(pipeline_test, nothing_due_changes_nothing) {
  push(1, t0_ + 5s);
  take_writes();
  push(2, t0_ + 5s);
  EXPECT_FALSE(pipe_.expire(t0_ + 1s, false, errc::connect_timeout));
  EXPECT_TRUE(calls_.empty());
  EXPECT_EQ(pipe_.queued(), 1u);
  EXPECT_EQ(pipe_.in_flight(), 1u);
}

TEST_F(pipeline_test, link_deadline_applies_only_while_not_linked) {
  push(1, t0_ + 10s, t0_ + 1s);
  // Linked: only the request deadline counts.
  EXPECT_FALSE(pipe_.expire(t0_ + 2s, true, errc::timeout));
  EXPECT_TRUE(calls_.empty());
  EXPECT_EQ(pipe_.queued(), 1u);
  // Not linked: the request gives up at its link deadline with the connect error.
  EXPECT_FALSE(pipe_.expire(t0_ + 2s, false, errc::connection_refused));
  ASSERT_EQ(calls_.size(), 1u);
  EXPECT_EQ(calls_[0].ec, errc::connection_refused);
  EXPECT_EQ(pipe_.queued(), 0u);
  EXPECT_EQ(take_writes(), "");
}

TEST_F(pipeline_test, link_deadline_does_not_apply_in_flight) {
  push(1, t0_ + 10s, t0_ + 1s);
  take_writes();
  EXPECT_FALSE(pipe_.expire(t0_ + 2s, false, errc::connection_refused));
  EXPECT_TRUE(calls_.empty());
  EXPECT_EQ(pipe_.in_flight(), 1u);
}

TEST_F(pipeline_test, in_flight_timeout_keeps_its_slot_and_swallows_the_late_reply) {
  push(1, t0_ + 1s);
  push(2, t0_ + 10s);
  take_writes();
  EXPECT_TRUE(pipe_.expire(t0_ + 2s, true, errc::connect_timeout));
  ASSERT_EQ(calls_.size(), 1u);
  EXPECT_EQ(calls_[0].tag, 1);
  EXPECT_EQ(calls_[0].ec, errc::timeout);  // in flight: always timeout, not queued_ec
  EXPECT_EQ(pipe_.in_flight(), 2u);        // the slot stays so replies keep matching

  // The late reply to 1 is consumed without calling anything.
  EXPECT_TRUE(pipe_.on_reply(reply::make_bulk("late for 1")));
  EXPECT_EQ(calls_.size(), 1u);
  EXPECT_EQ(pipe_.in_flight(), 1u);

  // The reply to 2 reaches 2.
  EXPECT_TRUE(pipe_.on_reply(reply::make_bulk("for 2")));
  ASSERT_EQ(calls_.size(), 2u);
  EXPECT_EQ(calls_[1].tag, 2);
  EXPECT_FALSE(calls_[1].ec);
  EXPECT_EQ(calls_[1].value, reply::make_bulk("for 2"));
}

TEST_F(pipeline_test, expired_in_flight_request_completes_once) {
  push(1, t0_ + 1s);
  take_writes();
  pipe_.expire(t0_ + 2s, true, errc::timeout);
  pipe_.expire(t0_ + 3s, true, errc::timeout);
  pipe_.on_disconnect();
  pipe_.fail_all(errc::shutdown);
  ASSERT_EQ(calls_.size(), 1u);
  EXPECT_EQ(calls_[0].ec, errc::timeout);
}

TEST_F(pipeline_test, expire_reports_stuck_only_for_the_oldest_waiting_request) {
  push(1, t0_ + 10s);  // head: long deadline
  push(2, t0_ + 1s);   // later: short deadline
  take_writes();
  // 2 expires, but the server still owes the reply to 1, which is not late yet.
  EXPECT_FALSE(pipe_.expire(t0_ + 2s, true, errc::timeout));
  ASSERT_EQ(calls_.size(), 1u);
  EXPECT_EQ(calls_[0].tag, 2);
  EXPECT_EQ(calls_[0].ec, errc::timeout);
  EXPECT_EQ(pipe_.in_flight(), 2u);
  // Now 1 is late too: the connection is stuck.
  EXPECT_TRUE(pipe_.expire(t0_ + 11s, true, errc::timeout));
  ASSERT_EQ(calls_.size(), 2u);
  EXPECT_EQ(calls_[1].tag, 1);
}

TEST_F(pipeline_test, expire_skips_abandoned_slots_when_finding_the_oldest) {
  push(1, t0_ + 1s);
  push(2, t0_ + 5s);
  take_writes();
  EXPECT_TRUE(pipe_.expire(t0_ + 2s, true, errc::timeout));  // 1 is late
  // 1 is abandoned; 2 is now the oldest waiting and is not late.
  EXPECT_FALSE(pipe_.expire(t0_ + 3s, true, errc::timeout));
  EXPECT_TRUE(pipe_.expire(t0_ + 6s, true, errc::timeout));
  EXPECT_EQ(tags(), (std::vector<int>{1, 2}));
}

TEST_F(pipeline_test, expire_with_only_queued_requests_is_never_stuck) {
  push(1, t0_ + 1s);
  EXPECT_FALSE(pipe_.expire(t0_ + 2s, true, errc::timeout));
  EXPECT_EQ(calls_.size(), 1u);
}

TEST_F(pipeline_test, next_deadline_of_queued_depends_on_link) {
  push(1, t0_ + 10s, t0_ + 2s);
  push(2, t0_ + 8s);
  EXPECT_EQ(pipe_.next_deadline(true), t0_ + 8s);
  EXPECT_EQ(pipe_.next_deadline(false), t0_ + 2s);
}

TEST_F(pipeline_test, next_deadline_of_in_flight_ignores_link_deadline) {
  push(1, t0_ + 10s, t0_ + 2s);
  take_writes();
  EXPECT_EQ(pipe_.next_deadline(true), t0_ + 10s);
  EXPECT_EQ(pipe_.next_deadline(false), t0_ + 10s);
  push(2, t0_ + 20s, t0_ + 3s);
  EXPECT_EQ(pipe_.next_deadline(true), t0_ + 10s);
  EXPECT_EQ(pipe_.next_deadline(false), t0_ + 3s);
}

TEST_F(pipeline_test, next_deadline_ignores_completed_slots) {
  push(1, t0_ + 1s);
  push(2, t0_ + 5s);
  take_writes();
  pipe_.expire(t0_ + 2s, true, errc::timeout);
  EXPECT_EQ(pipe_.next_deadline(true), t0_ + 5s);
  pipe_.expire(t0_ + 6s, true, errc::timeout);
  EXPECT_EQ(pipe_.in_flight(), 2u);
  EXPECT_FALSE(pipe_.next_deadline(true).has_value());
  EXPECT_FALSE(pipe_.next_deadline(false).has_value());
}

}  // namespace
