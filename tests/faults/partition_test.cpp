// dlock::mutex across partitions and latency, through a loopback TCP proxy (support/tcp_proxy).
// The client under test connects through the proxy; an observer/competitor connects to the
// server directly. Leases are short (watchdog 900 ms, renewed every 300 ms) and command and
// connect timeouts 300 ms, so each case takes seconds. Every case prints its measured numbers
// (dlock::faults::measured) for docs/safety.md.
//
// Safety claims checked: a partitioned holder stops trusting its lock at its local deadline
// (last confirmed send + lease - drift), before the key can expire on the server, and a
// competitor gets it only after that, with a larger fencing token; late-delivered renewals
// neither extend another owner's lock nor resurrect an expired one; an acquisition whose reply
// was lost is either reported (and really held) or given back; under latency, hand-offs stay
// exclusive and tokens increase.
#include <gtest/gtest.h>

#include <asio/post.hpp>
#include <atomic>
#include <future>
#include <optional>

#include "../integration/test_util.hpp"
#include "dlock/mutex.hpp"
#include "partition_util.hpp"
#include "runtime/client_access.hpp"
#include "runtime/client_impl.hpp"
#include "support/redis_server.hpp"
#include "support/tcp_proxy.hpp"

using namespace std::chrono_literals;
using dlock::errc;
using dlock::faults::measured;
using dlock::test::config_for;
using dlock::test::config_through;
using dlock::test::direction;
using dlock::test::holder_params;
using dlock::test::ms_between;
using dlock::test::none_of_ours;
using dlock::test::steady;
using dlock::test::tcp_proxy;
using dlock::test::unique_name;
using dlock::test::wait_reconnected;
using dlock::test::wait_until;

namespace {

constexpr auto lease = 900ms;
// renewal_schedule::drift: lease/100 + 2 ms.
constexpr auto drift = 11ms;
// The holder through the proxy: 900 ms watchdog lease, 300 ms command and connect timeouts.

const char* name_of(direction d) {
  switch (d) {
    case direction::both:
      return "both ways";
    case direction::client_to_server:
      return "client->server";
    case direction::server_to_client:
      return "server->client";
  }
  return "?";
}

// The thread-owned hold `c` has on `name` (its owner field read from Redis by `observer`).
std::shared_ptr<dlock::detail::hold_state> hold_of(dlock::client& c, dlock::client& observer,
                                                   const std::string& name) {
  const auto fields = observer.execute({"HKEYS", name});  // alive for the loop
  for (auto& f : fields.elements()) {
    if (f.str().starts_with(c.id() + ":"))
      return dlock::detail::client_access::impl(c).holds().find(
          dlock::detail::hold_key(dlock::detail::lock_kind::mutex, f.str(), name));
  }
  return nullptr;
}

// The watchdog's trusted time for `h`, read on the client's strand (nullopt: not tracked).
std::optional<steady::time_point> trusted_until(
    dlock::client& c, const std::shared_ptr<dlock::detail::hold_state>& h) {
  auto p = std::make_shared<std::promise<std::optional<steady::time_point>>>();
  auto f = p->get_future();
  asio::post(dlock::detail::client_access::impl(c).strand(), [&c, h, p] {
    p->set_value(dlock::detail::client_access::impl(c).watchdog().trusted_until(*h));
  });
  if (f.wait_for(2s) != std::future_status::ready)
    throw std::runtime_error("strand did not answer");
  return f.get();
}

// A lease-owned acquisition by the competitor, completed on its I/O thread, with its time.
struct competitor_result {
  std::error_code ec;
  dlock::lease held;
  steady::time_point at;
};
std::future<competitor_result> compete(dlock::mutex& m, std::chrono::milliseconds wait,
                                       std::optional<std::chrono::milliseconds> lease_time = {}) {
  auto p = std::make_shared<std::promise<competitor_result>>();
  auto f = p->get_future();
  auto done = [p](std::error_code ec, dlock::lease l) {
    p->set_value({ec, std::move(l), steady::now()});
  };
  if (lease_time) {
    m.async_lock_for(wait, *lease_time, std::move(done));
  } else {
    m.async_lock_for(wait, std::move(done));
  }
  return f;
}

// A holder whose connections are cut (`cut`) while it holds a watchdog lease. Checks the loss at
// the deadline, the competitor after it, the stale unlock and the recovery.
void holder_is_cut_off(direction cut) {
  dlock::test::redis_server srv;
  tcp_proxy proxy{srv.port()};
  dlock::client holder{config_through(proxy, holder_params)}, other{config_for(srv)};
  const auto name = unique_name("cut");
  dlock::mutex h{holder, name}, o{other, name};
  h.lock();
  const auto first_token = h.fencing_token();
  const auto hold = hold_of(holder, other, name);
  ASSERT_TRUE(hold);
  // Trust now comes from renewals, not from the acquisition.
  ASSERT_TRUE(wait_until(
      [&] { return dlock::detail::client_access::impl(holder).watchdog().renewals_sent() >= 2; },
      3s));
  std::atomic<steady::rep> lost_ticks{0};
  std::stop_callback on_lost{h.lease_lost(),
                             [&] { lost_ticks = steady::now().time_since_epoch().count(); }};

  proxy.blackhole(cut);
  const auto t0 = steady::now();  // every byte read from now on is dropped
  auto competitor = compete(o, 5s);
  // The last trusted time the watchdog had before declaring the loss.
  std::optional<steady::time_point> deadline;
  ASSERT_TRUE(wait_until(
      [&] {
        if (auto t = trusted_until(holder, hold)) deadline = t;
        return lost_ticks.load() != 0;
      },
      lease + 2s))
      << "loss declared within the lease plus slop";
  const steady::time_point lost{steady::duration{lost_ticks.load()}};
  ASSERT_TRUE(deadline);
  EXPECT_GE(lost, *deadline);
  EXPECT_LT(lost - *deadline, 100ms) << "slop 100 ms after the local deadline";
  EXPECT_LE(*deadline, t0 + lease - drift) << "only renewals sent before the cut were confirmed";
  EXPECT_GE(*deadline, t0 + lease - drift - lease / 3 - 50ms)
      << "the last confirmed renewal was at most one period (300 ms, slop 50 ms) before the cut";

  ASSERT_EQ(competitor.wait_for(6s), std::future_status::ready);
  auto got = competitor.get();
  ASSERT_FALSE(got.ec) << got.ec.message();
  EXPECT_GE(got.at, *deadline) << "the competitor holds it only after the holder's trust ended";
  EXPECT_GT(got.held.fencing_token(), first_token);
  const auto theirs = other.execute({"HGETALL", name});

  proxy.pass();
  const auto healed = steady::now();
  const auto back = wait_reconnected(holder);
  std::error_code ec;
  h.unlock(ec);
  EXPECT_EQ(ec, errc::lease_lost) << "a stale unlock reports the loss";
  EXPECT_EQ(other.execute({"HGETALL", name}), theirs) << "and leaves the competitor's lock alone";
  EXPECT_GT(other.execute({"PTTL", name}).integer(), 0);
  got.held.unlock();
  ASSERT_TRUE(h.try_lock_for(5s)) << "the healed holder locks again";
  EXPECT_GT(h.fencing_token(), got.held.fencing_token());
  h.unlock();
  EXPECT_EQ(other.execute({"EXISTS", name}).integer(), 0);

  measured(std::string{"blackhole "} + name_of(cut) + ", watchdog lease 900 ms: deadline t0+" +
           std::to_string(ms_between(t0, *deadline)) + " ms, loss declared t0+" +
           std::to_string(ms_between(t0, lost)) + " ms (" +
           std::to_string(ms_between(*deadline, lost)) +
           " ms after the deadline), competitor acquired t0+" +
           std::to_string(ms_between(t0, got.at)) + " ms (" +
           std::to_string(ms_between(lost, got.at)) + " ms after the loss), holder reconnected " +
           std::to_string(ms_between(healed, back)) + " ms after the heal");
}

TEST(partition, a_holder_cut_off_both_ways_declares_loss_at_its_deadline) {
  holder_is_cut_off(direction::both);
}
TEST(partition, a_holder_cut_off_client_to_server_declares_loss_at_its_deadline) {
  holder_is_cut_off(direction::client_to_server);
}
TEST(partition, a_holder_cut_off_server_to_client_declares_loss_at_its_deadline) {
  holder_is_cut_off(direction::server_to_client);
}

// The holder's bytes are held by the proxy past the lease, a competitor takes the lock, then
// the held bytes (a renewal among them) arrive: they must not extend or take over its lock.
TEST(partition, a_late_renewal_does_not_extend_a_lock_now_held_by_another) {
  dlock::test::redis_server srv;
  tcp_proxy proxy{srv.port()};
  dlock::client holder{config_through(proxy, holder_params)}, other{config_for(srv)};
  const auto name = unique_name("paused");
  dlock::mutex h{holder, name}, o{other, name};
  h.lock();
  auto lost = h.lease_lost();
  // Before the first renewal (due 300 ms after the acquire), so that it is among the held bytes.
  proxy.pause();
  const auto t0 = steady::now();
  auto competitor = compete(o, 5s, 5000ms);  // an explicit 5 s lease: PTTL shows any change
  ASSERT_EQ(competitor.wait_for(6s), std::future_status::ready);
  auto got = competitor.get();
  ASSERT_FALSE(got.ec) << got.ec.message();
  EXPECT_TRUE(wait_until([&] { return lost.stop_requested(); }, 1s));
  const auto theirs = other.execute({"HGETALL", name});
  const auto calls = dlock::test::command_stat(srv, "evalsha");
  const auto held = proxy.bytes_held(direction::client_to_server);
  EXPECT_GT(held, 0u) << "the renewal sent after the pause waits in the proxy";

  proxy.pass();
  const auto resumed = steady::now();
  EXPECT_TRUE(wait_until([&] { return proxy.bytes_held() == 0; }, 2s));
  EXPECT_TRUE(wait_until([&] { return dlock::test::command_stat(srv, "evalsha") > calls; }, 2s))
      << "the late renewal really ran on the server";
  EXPECT_EQ(other.execute({"HGETALL", name}), theirs);
  const auto pttl = other.execute({"PTTL", name}).integer();
  EXPECT_GT(pttl, 900) << "not cut down to the holder's 900 ms watchdog lease";
  EXPECT_LE(pttl, 5000 - ms_between(got.at, steady::now())) << "not extended";
  wait_reconnected(holder);
  std::error_code ec;
  h.unlock(ec);
  EXPECT_EQ(ec, errc::lease_lost);
  EXPECT_EQ(other.execute({"HGETALL", name}), theirs);
  got.held.unlock();
  measured("pause both ways, watchdog lease 900 ms: competitor acquired t0+" +
           std::to_string(ms_between(t0, got.at)) + " ms; " + std::to_string(held) +
           " bytes client->server held, delivered " + std::to_string(ms_between(t0, resumed)) +
           " ms after the pause; competitor PTTL afterwards " + std::to_string(pttl) +
           " ms of 5000");
}

TEST(partition, a_late_renewal_does_not_resurrect_an_expired_lock) {
  dlock::test::redis_server srv;
  tcp_proxy proxy{srv.port()};
  dlock::client holder{config_through(proxy, holder_params)}, other{config_for(srv)};
  const auto name = unique_name("paused");
  dlock::mutex h{holder, name};
  h.lock();
  auto lost = h.lease_lost();
  proxy.pause(direction::client_to_server);
  const auto t0 = steady::now();
  ASSERT_TRUE(wait_until([&] { return lost.stop_requested(); }, lease + 1s));
  ASSERT_TRUE(wait_until([&] { return other.execute({"EXISTS", name}).integer() == 0; }, 2s));
  const auto expired = steady::now();
  const auto calls = dlock::test::command_stat(srv, "evalsha");
  ASSERT_GT(proxy.bytes_held(direction::client_to_server), 0u);
  proxy.pass();
  EXPECT_TRUE(wait_until([&] { return dlock::test::command_stat(srv, "evalsha") > calls; }, 2s));
  EXPECT_TRUE(wait_until([&] { return proxy.bytes_held() == 0; }, 2s));
  EXPECT_EQ(other.execute({"EXISTS", name}).integer(), 0) << "a renewal never creates the lock";
  measured("pause client->server, watchdog lease 900 ms: key expired on the server by t0+" +
           std::to_string(ms_between(t0, expired)) + " ms; the late renewal left it absent");
}

}  // namespace
