// dlock::multi_lock against real redis-servers: all members or none, one script for members of
// one client, members on several servers, the combined lease and its loss, fencing tokens,
// deadlock freedom of overlapping sets, cancellation, bad input.
#include "dlock/multi_lock.hpp"

#include <gtest/gtest.h>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "mutex_helpers.hpp"
#include "runtime/client_access.hpp"
#include "runtime/client_impl.hpp"
#include "runtime/waiters.hpp"
#include "support/redis_server.hpp"
#include "test_util.hpp"

using namespace std::chrono_literals;
using dlock::errc;

namespace multi_lock_tests {

using namespace dlock::test;

using result = std::pair<std::error_code, dlock::multi_lease>;

// Starts an async form with a callback and waits for its result.
template <class Start>
std::future<result> async_result_of(Start start) {
  auto p = std::make_shared<std::promise<result>>();
  auto f = p->get_future();
  start([p](std::error_code ec, dlock::multi_lease l) { p->set_value({ec, std::move(l)}); });
  return f;
}

std::string hget_owner_count(redis_server& srv, const std::string& name) {
  return srv.command({"HLEN", name});
}

TEST(multi_lock, takes_every_member_or_none) {
  redis_server srv;
  dlock::client c{config_for(srv)};
  const auto a = unique_name("multi"), b = unique_name("multi"), d = unique_name("multi");
  dlock::mutex ma{c, a}, mb{c, b}, md{c, d};
  dlock::multi_lock all{ma, mb, md};
  ASSERT_TRUE(all.try_lock());
  for (const auto& n : {a, b, d}) EXPECT_EQ(hget_owner_count(srv, n), ":1") << n;
  const auto tokens = all.fencing_tokens();
  ASSERT_EQ(tokens.size(), 3u);
  for (auto t : tokens) EXPECT_GT(t, 0u);
  EXPECT_GT(all.lease_time_left(), 25s);
  all.unlock();
  for (const auto& n : {a, b, d}) EXPECT_EQ(srv.command({"EXISTS", n}), ":0") << n;

  // One member held elsewhere: the others are not taken (one script, all or none).
  dlock::client other{config_for(srv)};
  dlock::mutex held{other, b};
  held.lock();
  EXPECT_FALSE(all.try_lock());
  EXPECT_EQ(srv.command({"EXISTS", a}), ":0");
  EXPECT_EQ(srv.command({"EXISTS", d}), ":0");
  held.unlock();
  EXPECT_TRUE(all.try_lock_for(2s));
  all.unlock();
}

TEST(multi_lock, members_on_several_servers_are_taken_at_once_and_all_released_on_failure) {
  redis_server s1, s2, s3;
  dlock::client c1{config_for(s1)}, c2{config_for(s2)}, c3{config_for(s3)};
  const auto name = unique_name("spread");
  dlock::mutex m1{c1, name}, m2{c2, name}, m3{c3, name};
  dlock::multi_lock all{m1, m2, m3};
  auto [ec, l] = async_result_of([&](auto cb) { all.async_lock_for(2s, cb); }).get();
  ASSERT_FALSE(ec) << ec.message();
  ASSERT_TRUE(l.owns());
  for (auto* s : {&s1, &s2, &s3}) EXPECT_EQ(s->command({"HLEN", name}), ":1");
  l.unlock();
  for (auto* s : {&s1, &s2, &s3}) EXPECT_EQ(s->command({"EXISTS", name}), ":0");

  // Held on s3 by another owner: what was taken on s1 and s2 goes back at once.
  dlock::client o3{config_for(s3)};
  dlock::mutex h3{o3, name};
  h3.lock();
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(all.try_lock_for(300ms));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  EXPECT_TRUE(wait_until(
      [&] {
        return s1.command({"EXISTS", name}) == ":0" && s2.command({"EXISTS", name}) == ":0";
      },
      2s));
  // Released on s3 while it waits: it gets all three.
  auto got = std::async(std::launch::async, [&] {
    const bool ok = all.try_lock_for(5s);
    if (ok) all.unlock();
    return ok;
  });
  std::this_thread::sleep_for(200ms);
  h3.unlock();
  EXPECT_TRUE(got.get());
}

TEST(multi_lock, a_waiting_multi_lock_listens_for_the_held_members_unlock_and_stops_after) {
  redis_server srv;
  dlock::client c{config_for(srv)}, other{config_for(srv)};
  const auto a = unique_name("listen"), b = unique_name("listen");
  dlock::mutex ma{c, a}, mb{c, b}, held{other, b};
  held.lock();
  dlock::multi_lock both{ma, mb};
  auto got = std::async(std::launch::async, [&] {
    const bool ok = both.try_lock_for(10s);
    if (ok) both.unlock();
    return ok;
  });
  auto& impl = dlock::detail::client_access::impl(c);
  ASSERT_TRUE(wait_until([&] { return impl.waiters().names() == 1; }, 5s))
      << "registered as a waiter of the held member's name";
  held.unlock();
  EXPECT_TRUE(got.get());
  EXPECT_TRUE(wait_until([&] { return impl.waiters().names() == 0; }, 2s)) << "and left after";
}

TEST(multi_lock, is_lost_when_any_member_is_lost) {
  redis_server s1, s2;
  // Renewed every second.
  dlock::client c1{config_for(s1, "watchdog=3s")}, c2{config_for(s2, "watchdog=3s")};
  const auto name = unique_name("lost");
  dlock::mutex m1{c1, name}, m2{c2, name};
  dlock::multi_lock both{m1, m2};
  auto [ec, l] = async_result_of([&](auto cb) { both.async_try_lock(cb); }).get();
  ASSERT_FALSE(ec);
  std::promise<void> fired;
  l.on_lost([&] { fired.set_value(); });
  s2.command({"DEL", name});  // as if it expired, or an admin force-unlocked it
  // The watchdog finds it gone at its next renewal.
  ASSERT_EQ(fired.get_future().wait_for(5s), std::future_status::ready);
  EXPECT_TRUE(l.lost().stop_requested());
  EXPECT_EQ(l.time_left(), 0ms);
  std::error_code uec;
  l.unlock(uec);
  EXPECT_EQ(uec, errc::lease_lost);
  EXPECT_EQ(s1.command({"EXISTS", name}), ":0") << "the member still held was released";
}

TEST(multi_lock, overlapping_sets_in_many_threads_never_deadlock_or_overlap) {
  redis_server srv;
  dlock::client c1{config_for(srv)}, c2{config_for(srv)};
  const auto x = unique_name("x"), y = unique_name("y"), z = unique_name("z");
  std::atomic<int> inside_x{0}, inside_y{0}, inside_z{0}, violations{0}, done{0};
  auto worker = [&](dlock::client& c, std::vector<std::string> names, int rounds) {
    std::vector<std::unique_ptr<dlock::mutex>> ms;
    std::vector<std::reference_wrapper<dlock::mutex>> refs;
    for (const auto& n : names) {
      ms.push_back(std::make_unique<dlock::mutex>(c, n));
      refs.emplace_back(*ms.back());
    }
    dlock::multi_lock ml{refs};
    for (int i = 0; i < rounds; ++i) {
      if (!ml.try_lock_for(20s)) {
        ++violations;
        continue;
      }
      for (const auto& n : names) {
        auto& in = n == x ? inside_x : n == y ? inside_y : inside_z;
        if (in.fetch_add(1) != 0) ++violations;
      }
      std::this_thread::sleep_for(2ms);
      for (const auto& n : names) {
        auto& in = n == x ? inside_x : n == y ? inside_y : inside_z;
        in.fetch_sub(1);
      }
      ml.unlock();
    }
    ++done;
  };
  // Opposite orders over overlapping sets, on two clients: the classic deadlock for locks taken
  // one by one.
  std::vector<std::thread> threads;
  threads.emplace_back(worker, std::ref(c1), std::vector{x, y}, 15);
  threads.emplace_back(worker, std::ref(c2), std::vector{y, x}, 15);
  threads.emplace_back(worker, std::ref(c1), std::vector{y, z}, 15);
  threads.emplace_back(worker, std::ref(c2), std::vector{z, x}, 15);
  for (auto& t : threads) t.join();
  EXPECT_EQ(done.load(), 4);
  EXPECT_EQ(violations.load(), 0);
}

TEST(multi_lock, is_reentrant_per_thread_and_refuses_a_member_the_thread_holds) {
  redis_server srv;
  dlock::client c{config_for(srv)};
  dlock::mutex a{c, unique_name("re")}, b{c, unique_name("re")};
  dlock::multi_lock both{a, b};
  both.lock();
  both.lock();
  both.unlock();
  EXPECT_EQ(srv.command({"EXISTS", a.name()}), ":1");
  both.unlock();
  EXPECT_EQ(srv.command({"EXISTS", a.name()}), ":0");
  std::error_code ec;
  both.unlock(ec);
  EXPECT_EQ(ec, errc::not_owner);
  a.lock();
  EXPECT_FALSE(both.try_lock_for(100ms, ec));
  EXPECT_EQ(ec, errc::would_deadlock);
  a.unlock();
}

TEST(multi_lock, bad_input_is_a_typed_error) {
  redis_server srv;
  dlock::client c{config_for(srv)};
  dlock::mutex a{c, unique_name("bad")}, a2{c, a.name()}, empty{c, ""};
  std::error_code ec;
  dlock::multi_lock none{std::vector<std::reference_wrapper<dlock::mutex>>{}};
  EXPECT_FALSE(none.try_lock(ec));
  EXPECT_EQ(ec, errc::invalid_argument);
  dlock::multi_lock twice{a, a2};
  EXPECT_FALSE(twice.try_lock(ec));
  EXPECT_EQ(ec, errc::invalid_argument);
  dlock::multi_lock unnamed{a, empty};
  EXPECT_FALSE(unnamed.try_lock(ec));
  EXPECT_EQ(ec, errc::invalid_argument);
  dlock::multi_lock one{a};
  EXPECT_FALSE(one.try_lock_for(1s, -5ms, ec));
  EXPECT_EQ(ec, errc::invalid_argument);
  // A member that is a read-write lock, or a string.
  srv.command({"HSET", "rw:" + a.name(), "mode", "read"});
  dlock::mutex rw{c, "rw:" + a.name()};
  dlock::multi_lock kinds{a, rw};
  EXPECT_FALSE(kinds.try_lock_for(1s, ec));
  EXPECT_EQ(ec, errc::wrong_kind);
  srv.command({"SET", "s:" + a.name(), "x"});
  dlock::mutex str{c, "s:" + a.name()};
  dlock::multi_lock types{a, str};
  EXPECT_FALSE(types.try_lock_for(1s, ec));
  EXPECT_EQ(ec, errc::wrong_type);
  EXPECT_EQ(srv.command({"EXISTS", a.name()}), ":0") << "nothing left held";
  EXPECT_THROW(types.lock(), dlock::lock_error);
}

TEST(multi_lock, cancellation_completes_at_once_and_leaves_nothing_held) {
  redis_server s1, s2;
  dlock::client c1{config_for(s1)}, c2{config_for(s2)};
  const auto name = unique_name("cancel");
  dlock::mutex m1{c1, name}, m2{c2, name};
  dlock::client o{config_for(s2)};
  dlock::mutex holder{o, name};
  holder.lock();
  dlock::multi_lock both{m1, m2};
  asio::cancellation_signal sig;
  auto f = async_result_of(
      [&](auto cb) { both.async_lock_for(10s, asio::bind_cancellation_slot(sig.slot(), cb)); });
  std::this_thread::sleep_for(150ms);
  sig.emit(asio::cancellation_type::terminal);
  ASSERT_EQ(f.wait_for(2s), std::future_status::ready);
  auto [ec, l] = f.get();
  EXPECT_EQ(ec, asio::error::operation_aborted);
  EXPECT_FALSE(l.owns());
  EXPECT_TRUE(wait_until([&] { return s1.command({"EXISTS", name}) == ":0"; }, 2s));
  // stop_token form.
  std::stop_source stop;
  auto waiting = std::async(std::launch::async, [&] {
    std::error_code e;
    both.lock(stop.get_token(), e);
    return e;
  });
  std::this_thread::sleep_for(100ms);
  stop.request_stop();
  ASSERT_EQ(waiting.wait_for(2s), std::future_status::ready);
  EXPECT_EQ(waiting.get(), asio::error::operation_aborted);
  holder.unlock();
}

}  // namespace multi_lock_tests
