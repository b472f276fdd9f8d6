// The client's executor (transport::make_executor) and the check whether the calling thread runs
// its handlers now (transport::running_in), for both forms: the io_context's own executor (one
// I/O thread) and a strand of it (several).
#include <gtest/gtest.h>

#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/strand.hpp>
#include <future>
#include <stdexcept>
#include <thread>
#include <typeinfo>
#include <vector>

#include "transport/link.hpp"

namespace {

using dlock::transport::executor_type;
using dlock::transport::make_executor;
using dlock::transport::running_in;

// Whether a handler posted to `ex` finds running_in(ex) true, and whether a handler posted to
// `other` (running on the same io_context, outside `ex`) finds it false.
struct seen {
  bool inside = false;
  bool from_other = true;
};

seen look(asio::io_context& ioc, unsigned threads, const executor_type& ex, const executor_type& other) {
  seen s;
  std::promise<void> a, b;
  asio::post(ex, [&] {
    s.inside = running_in(ex);
    a.set_value();
  });
  asio::post(other, [&] {
    s.from_other = running_in(ex);
    b.set_value();
  });
  std::vector<std::thread> ts;
  for (unsigned i = 0; i < threads; ++i) ts.emplace_back([&] { ioc.run(); });
  a.get_future().wait();
  b.get_future().wait();
  for (auto& t : ts) t.join();
  return s;
}

TEST(executor, one_thread_gets_the_io_contexts_own_executor_and_knows_when_it_runs_it) {
  asio::io_context ioc{1};
  const auto ex = make_executor(ioc, 1);
  EXPECT_TRUE(ex.target_type() == typeid(asio::io_context::executor_type));
  EXPECT_FALSE(running_in(ex));  // this thread does not run the io_context
  const auto s = look(ioc, 1, ex, ex);
  EXPECT_TRUE(s.inside);
  EXPECT_TRUE(s.from_other);  // one thread: every handler of the io_context is in the sequence
}

TEST(executor, several_threads_get_a_strand_and_a_handler_outside_it_is_not_in_it) {
  asio::io_context ioc{2};
  const auto ex = make_executor(ioc, 2);
  EXPECT_TRUE((ex.target_type() == typeid(asio::strand<asio::io_context::executor_type>)));
  EXPECT_FALSE(running_in(ex));
  const executor_type other = ioc.get_executor();  // the io_context, not the strand
  const auto s = look(ioc, 2, ex, other);
  EXPECT_TRUE(s.inside);
  EXPECT_FALSE(s.from_other);
}

// Asio 1.22's any_executor::target<T>() casts without checking the type: an executor of a third
// kind must not be read as one of the two (a strand of a strand read as a strand reads garbage).
TEST(executor, an_executor_of_another_kind_is_not_mistaken_for_one_of_the_two) {
  asio::io_context ioc{1};
  const executor_type odd = asio::make_strand(asio::make_strand(ioc));
  EXPECT_FALSE(running_in(odd));
  std::promise<bool> inside;
  asio::post(odd, [&] { inside.set_value(running_in(odd)); });
  std::thread t{[&] { ioc.run(); }};
  EXPECT_FALSE(inside.get_future().get());
  t.join();
}

}  // namespace

// transport::deferred_starts: steps a read handler's callees ask for on its executor run at the
// handler's end; anything else is not deferred.
namespace {

using dlock::transport::deferred_starts;

TEST(deferred_starts, defers_for_its_own_executor_only_and_only_while_installed) {
  asio::io_context a, b;
  const executor_type ea = make_executor(a, 1), eb = make_executor(b, 1);
  const executor_type sa = make_executor(a, 2);  // a strand of the same io_context: another sequence
  EXPECT_EQ(deferred_starts::for_executor(ea), nullptr);
  {
    deferred_starts outer{ea};
    EXPECT_EQ(deferred_starts::for_executor(ea), &outer);
    EXPECT_EQ(deferred_starts::for_executor(eb), nullptr);
    EXPECT_EQ(deferred_starts::for_executor(sa), nullptr);
    {
      deferred_starts inner{eb};  // a handler of another client run inside this one
      EXPECT_EQ(deferred_starts::for_executor(eb), &inner);
      EXPECT_EQ(deferred_starts::for_executor(ea), nullptr);
      inner.run();
    }
    EXPECT_EQ(deferred_starts::for_executor(ea), &outer);
    outer.run();
    EXPECT_EQ(deferred_starts::for_executor(ea), nullptr);
  }
  EXPECT_EQ(deferred_starts::for_executor(ea), nullptr);
}

TEST(deferred_starts, runs_steps_in_order_and_posts_the_steps_they_ask_for) {
  asio::io_context ioc;
  const executor_type ex = make_executor(ioc, 1);
  std::vector<int> order;
  {
    deferred_starts d{ex};
    d.push([&] { order.push_back(1); });
    d.push([&] {
      order.push_back(2);
      // Asked for while the steps run: posted, not run in this loop (a step that completes at
      // once and asks again would otherwise never let the handler end).
      auto* again = deferred_starts::for_executor(ex);
      EXPECT_EQ(again, nullptr);
      asio::post(ex, [&] { order.push_back(4); });
    });
    d.push([&] { order.push_back(3); });
    d.run();
    EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
  }
  EXPECT_EQ(ioc.poll(), 1U);
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3, 4}));
}

TEST(deferred_starts, a_throwing_step_leaves_the_rest_posted_and_an_early_end_posts_them_all) {
  asio::io_context ioc;
  const executor_type ex = make_executor(ioc, 1);
  std::vector<int> ran;
  try {
    deferred_starts d{ex};
    d.push([&] { ran.push_back(1); });
    d.push([] { throw std::runtime_error("a step failed"); });
    d.push([&] { ran.push_back(3); });
    d.run();
    ADD_FAILURE() << "the step's exception did not come through run()";
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(ran, (std::vector<int>{1}));
  EXPECT_EQ(deferred_starts::for_executor(ex), nullptr);
  EXPECT_EQ(ioc.poll(), 1U);
  EXPECT_EQ(ran, (std::vector<int>{1, 3}));
  // A handler that returns before run() (a dropped connection): every step is posted, in order.
  {
    deferred_starts d{ex};
    d.push([&] { ran.push_back(4); });
    d.push([&] { ran.push_back(5); });
  }
  EXPECT_EQ(deferred_starts::for_executor(ex), nullptr);
  ioc.restart();
  EXPECT_EQ(ioc.poll(), 2U);
  EXPECT_EQ(ran, (std::vector<int>{1, 3, 4, 5}));
}

}  // namespace
