// transport::pipeline, the request/reply state machine of a command connection, step by step:
// writes in order, replies completing requests in order, error replies, disconnects (a request
// bound to a connection is never written on another), failing what is queued or in flight, and
// handlers that push from their completions. (Fixture: pipeline_fixture.hpp.)
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

TEST_F(pipeline_test, starts_empty) {
  EXPECT_FALSE(pipe_.has_queued());
  EXPECT_EQ(pipe_.queued(), 0u);
  EXPECT_EQ(pipe_.in_flight(), 0u);
  EXPECT_EQ(take_writes(), "");
  EXPECT_FALSE(pipe_.next_deadline(true).has_value());
  EXPECT_FALSE(pipe_.next_deadline(false).has_value());
}

TEST_F(pipeline_test, take_writes_concatenates_in_order_and_moves_in_flight) {
  push(1, far_);
  push(2, far_);
  push(3, far_);
  EXPECT_TRUE(pipe_.has_queued());
  EXPECT_EQ(pipe_.queued(), 3u);
  EXPECT_EQ(pipe_.in_flight(), 0u);

  std::string out = "already;";
  pipe_.take_writes(out);
  EXPECT_EQ(out, "already;1;2;3;");
  EXPECT_FALSE(pipe_.has_queued());
  EXPECT_EQ(pipe_.queued(), 0u);
  EXPECT_EQ(pipe_.in_flight(), 3u);
  EXPECT_TRUE(calls_.empty());
  EXPECT_EQ(take_writes(), "");  // nothing is written twice
}

TEST_F(pipeline_test, later_pushes_go_in_the_next_write) {
  push(1, far_);
  EXPECT_EQ(take_writes(), "1;");
  push(2, far_);
  push(3, far_);
  EXPECT_EQ(take_writes(), "2;3;");
  EXPECT_EQ(pipe_.in_flight(), 3u);
}

TEST_F(pipeline_test, replies_complete_requests_in_order) {
  push(1, far_);
  push(2, far_);
  push(3, far_);
  take_writes();
  EXPECT_TRUE(pipe_.on_reply(reply::make_simple("OK")));
  ASSERT_EQ(calls_.size(), 1u);
  EXPECT_EQ(calls_[0].tag, 1);
  EXPECT_FALSE(calls_[0].ec);
  EXPECT_EQ(calls_[0].value, reply::make_simple("OK"));
  EXPECT_EQ(pipe_.in_flight(), 2u);

  EXPECT_TRUE(pipe_.on_reply(reply::make_integer(7)));
  EXPECT_TRUE(pipe_.on_reply(reply::make_bulk("v")));
  ASSERT_EQ(calls_.size(), 3u);
  EXPECT_EQ(tags(), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(calls_[1].value, reply::make_integer(7));
  EXPECT_EQ(calls_[2].value, reply::make_bulk("v"));
  EXPECT_FALSE(calls_[1].ec);
  EXPECT_FALSE(calls_[2].ec);
  EXPECT_EQ(pipe_.in_flight(), 0u);
}

TEST_F(pipeline_test, nil_and_array_replies_are_not_errors) {
  push(1, far_);
  push(2, far_);
  take_writes();
  pipe_.on_reply(reply::make_nil());
  pipe_.on_reply(reply::make_array({reply::make_error("ERR inner")}));
  ASSERT_EQ(calls_.size(), 2u);
  EXPECT_FALSE(calls_[0].ec);
  EXPECT_TRUE(calls_[0].value.is_nil());
  EXPECT_FALSE(calls_[1].ec);
  EXPECT_TRUE(calls_[1].value.is_array());
}

TEST_F(pipeline_test, error_reply_completes_with_its_code_and_text) {
  push(1, far_);
  push(2, far_);
  take_writes();
  const std::string text = "WRONGTYPE Operation against a key holding the wrong kind of value";
  EXPECT_TRUE(pipe_.on_reply(reply::make_error(text)));
  EXPECT_TRUE(pipe_.on_reply(reply::make_error("MOVED 3999 127.0.0.1:6381")));
  ASSERT_EQ(calls_.size(), 2u);
  EXPECT_EQ(calls_[0].ec, errc::wrong_type);
  EXPECT_TRUE(calls_[0].value.is_error());
  EXPECT_EQ(calls_[0].value.str(), text);
  EXPECT_EQ(calls_[1].ec, errc::moved);
  EXPECT_EQ(calls_[1].value.str(), "MOVED 3999 127.0.0.1:6381");
}

TEST_F(pipeline_test, reply_with_nothing_in_flight_is_refused) {
  EXPECT_FALSE(pipe_.on_reply(reply::make_simple("OK")));
  push(1, far_);  // queued but not written: its reply cannot have arrived
  EXPECT_FALSE(pipe_.on_reply(reply::make_simple("OK")));
  EXPECT_TRUE(calls_.empty());
  take_writes();
  EXPECT_TRUE(pipe_.on_reply(reply::make_simple("OK")));
  EXPECT_FALSE(pipe_.on_reply(reply::make_simple("OK")));
  EXPECT_EQ(calls_.size(), 1u);
}

TEST_F(pipeline_test, disconnect_loses_in_flight_and_keeps_queued) {
  push(1, far_);
  push(2, far_);
  take_writes();
  push(3, far_);
  pipe_.on_disconnect();
  ASSERT_EQ(calls_.size(), 2u);
  EXPECT_EQ(tags(), (std::vector<int>{1, 2}));
  EXPECT_EQ(calls_[0].ec, errc::connection_lost);
  EXPECT_EQ(calls_[1].ec, errc::connection_lost);
  EXPECT_EQ(pipe_.in_flight(), 0u);
  EXPECT_EQ(pipe_.queued(), 1u);

  // The next connection writes only the queued request, and its reply goes to it.
  EXPECT_EQ(take_writes(), "3;");
  EXPECT_TRUE(pipe_.on_reply(reply::make_integer(3)));
  ASSERT_EQ(calls_.size(), 3u);
  EXPECT_EQ(calls_[2].tag, 3);
  EXPECT_FALSE(calls_[2].ec);
  EXPECT_EQ(calls_[2].value, reply::make_integer(3));
}

// A request bound to one connection (WAIT, which counts that connection's writes) is written
// only on it; queued across a reconnect, it completes with connection_lost, never written, and
// unbound requests around it go out as usual.
TEST_F(pipeline_test, a_request_bound_to_a_connection_is_never_written_on_another) {
  push(1, far_);
  auto bound = make(2, far_);
  bound.generation = 7;
  pipe_.push(std::move(bound));
  std::string out;
  pipe_.take_writes(out, 7);
  EXPECT_EQ(out, "1;2;") << "its own connection: written";
  EXPECT_TRUE(calls_.empty());

  push(3, far_);
  auto late = make(4, far_);
  late.generation = 7;
  pipe_.push(std::move(late));
  push(5, far_);
  pipe_.on_disconnect();  // 1 and 2 lost; 3, 4, 5 stay queued
  ASSERT_EQ(calls_.size(), 2u);
  out.clear();
  pipe_.take_writes(out, 8);  // the next connection
  EXPECT_EQ(out, "3;5;") << "the bound request is not written on another connection";
  ASSERT_EQ(calls_.size(), 3u);
  EXPECT_EQ(calls_[2].tag, 4);
  EXPECT_EQ(calls_[2].ec, errc::connection_lost);
  EXPECT_EQ(pipe_.in_flight(), 2u);
  EXPECT_TRUE(pipe_.on_reply(reply::make_integer(3)));
  EXPECT_EQ(calls_.back().tag, 3) << "replies still match";
}

TEST_F(pipeline_test, disconnect_with_nothing_in_flight_does_nothing) {
  push(1, far_);
  pipe_.on_disconnect();
  EXPECT_TRUE(calls_.empty());
  EXPECT_EQ(pipe_.queued(), 1u);
}

TEST_F(pipeline_test, fail_all_completes_in_flight_and_queued) {
  push(1, far_);
  take_writes();
  push(2, far_);
  pipe_.fail_all(errc::shutdown);
  ASSERT_EQ(calls_.size(), 2u);
  EXPECT_EQ(tags(), (std::vector<int>{1, 2}));
  for (const auto& c : calls_) EXPECT_EQ(c.ec, errc::shutdown);
  EXPECT_EQ(pipe_.queued(), 0u);
  EXPECT_EQ(pipe_.in_flight(), 0u);
  EXPECT_EQ(take_writes(), "");
  EXPECT_FALSE(pipe_.on_reply(reply::make_simple("OK")));
}

TEST_F(pipeline_test, fail_queued_leaves_in_flight_alone) {
  push(1, far_);
  take_writes();
  push(2, far_);
  push(3, far_);
  pipe_.fail_queued(errc::auth_failed);
  ASSERT_EQ(calls_.size(), 2u);
  EXPECT_EQ(tags(), (std::vector<int>{2, 3}));
  EXPECT_EQ(calls_[0].ec, errc::auth_failed);
  EXPECT_EQ(calls_[1].ec, errc::auth_failed);
  EXPECT_EQ(pipe_.queued(), 0u);
  EXPECT_EQ(pipe_.in_flight(), 1u);
  EXPECT_EQ(take_writes(), "");

  EXPECT_TRUE(pipe_.on_reply(reply::make_simple("OK")));
  ASSERT_EQ(calls_.size(), 3u);
  EXPECT_EQ(calls_[2].tag, 1);
  EXPECT_FALSE(calls_[2].ec);
}

TEST_F(pipeline_test, handler_may_push_from_its_completion) {
  request first = make(1, far_);
  first.handler = [this](std::error_code ec, reply r) {
    calls_.push_back({1, ec, std::move(r)});
    push(2, far_);
  };
  pipe_.push(std::move(first));
  take_writes();
  EXPECT_TRUE(pipe_.on_reply(reply::make_simple("OK")));
  EXPECT_EQ(pipe_.queued(), 1u);
  EXPECT_EQ(pipe_.in_flight(), 0u);
  EXPECT_EQ(take_writes(), "2;");
  EXPECT_TRUE(pipe_.on_reply(reply::make_integer(2)));
  EXPECT_EQ(tags(), (std::vector<int>{1, 2}));
  EXPECT_EQ(calls_[1].value, reply::make_integer(2));
}

TEST_F(pipeline_test, handler_may_push_when_lost_or_expired) {
  auto resubmit = [this](int tag, int next) {
    return [this, tag, next](std::error_code ec, reply r) {
      calls_.push_back({tag, ec, std::move(r)});
      push(next, far_);
    };
  };
  request a = make(1, t0_ + 1s);
  a.handler = resubmit(1, 10);
  request b = make(2, far_);
  b.handler = resubmit(2, 20);
  request c = make(3, t0_ + 1s);
  c.handler = resubmit(3, 30);
  pipe_.push(std::move(a));
  pipe_.push(std::move(b));
  take_writes();
  pipe_.push(std::move(c));

  EXPECT_TRUE(pipe_.expire(t0_ + 2s, true, errc::connect_timeout));  // 1 in flight, 3 queued
  EXPECT_EQ(tags(), (std::vector<int>{1, 3}));
  pipe_.on_disconnect();  // 2 is lost
  EXPECT_EQ(tags(), (std::vector<int>{1, 3, 2}));
  EXPECT_EQ(calls_[2].ec, errc::connection_lost);
  // The resubmitted requests are all queued, in completion order, and written once.
  EXPECT_EQ(pipe_.queued(), 3u);
  EXPECT_EQ(take_writes(), "10;30;20;");
}

}  // namespace
