// The loopback TCP proxy itself (support/tcp_proxy), against a real redis-server: it forwards,
// a blackhole drops (and does not hold), a pause holds and then delivers in order (even after
// the sender left), a delay delays by at least the set time, reset_all cuts connections, and
// the destructor is prompt. Inline Redis commands keep the bytes readable: "PING\r\n" answers
// "+PONG\r\n".
#include <gtest/gtest.h>

#include "partition_util.hpp"
#include "support/redis_server.hpp"
#include "support/tcp_proxy.hpp"

using namespace std::chrono_literals;
using dlock::test::direction;
using dlock::test::raw_client;
using dlock::test::steady;
using dlock::test::tcp_proxy;
using dlock::test::wait_until;

namespace {

const std::string ping = "PING\r\n", pong = "+PONG\r\n";

TEST(tcp_proxy, forwards_both_ways_and_closes_with_its_client) {
  dlock::test::redis_server srv;
  tcp_proxy proxy{srv.port()};
  EXPECT_NE(proxy.port(), srv.port());
  EXPECT_EQ(proxy.target_port(), srv.port());
  {
    raw_client c{proxy.port()};
    c.send(ping);
    EXPECT_EQ(c.read_exact(pong.size(), 2s), pong);
    EXPECT_TRUE(wait_until([&] { return proxy.connections() == 1; }, 2s));
    // A megabyte each way: partial writes and flow control.
    const std::string big(1 << 20, 'x');
    c.send("*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n$" + std::to_string(big.size()) + "\r\n" + big +
           "\r\n");
    EXPECT_EQ(c.read_exact(5, 5s), "+OK\r\n");
    c.send("GET big\r\n");
    const auto header = "$" + std::to_string(big.size()) + "\r\n";
    EXPECT_EQ(c.read_exact(header.size() + big.size() + 2, 5s), header + big + "\r\n");
    EXPECT_EQ(proxy.bytes_forwarded(direction::server_to_client),
              pong.size() + 5 + header.size() + big.size() + 2);
    EXPECT_EQ(proxy.bytes_dropped(), 0u);
  }
  EXPECT_TRUE(wait_until([&] { return proxy.connections() == 0; }, 2s))
      << "the client's close reaches the server, whose close ends the connection";
  EXPECT_EQ(proxy.accepted(), 1u);
  EXPECT_EQ(srv.command({"GET", "big"}).size(), 1u << 20);
}

TEST(tcp_proxy, blackhole_drops_bytes_and_keeps_connections_open) {
  dlock::test::redis_server srv;
  tcp_proxy proxy{srv.port()};
  raw_client c{proxy.port()};
  c.send(ping);
  ASSERT_EQ(c.read_exact(pong.size(), 2s), pong);
  for (auto d : {direction::client_to_server, direction::server_to_client, direction::both}) {
    const auto dropped = proxy.bytes_dropped();
    proxy.blackhole(d);
    c.send(ping);
    EXPECT_EQ(c.read_for(300ms), "") << "nothing comes back through a blackhole";
    EXPECT_EQ(proxy.connections(), 1u);
    EXPECT_GE(proxy.bytes_dropped() - dropped,
              d == direction::server_to_client ? pong.size() : ping.size());
    EXPECT_EQ(proxy.bytes_held(), 0u) << "dropped, not held";
    proxy.pass();
    c.send(ping);
    EXPECT_EQ(c.read_exact(pong.size(), 2s), pong);
    EXPECT_EQ(c.read_for(150ms), "") << "exactly one reply: the blackholed one is gone";
  }
}

TEST(tcp_proxy, pause_holds_bytes_and_delivers_them_in_order) {
  dlock::test::redis_server srv;
  tcp_proxy proxy{srv.port()};
  raw_client c{proxy.port()};
  std::string expected;
  for (auto d : {direction::client_to_server, direction::server_to_client, direction::both}) {
    proxy.pause(d);
    expected.clear();
    for (int i = 0; i < 10; ++i) {
      c.send("ECHO " + std::to_string(i) + "\r\n");
      expected += "$1\r\n" + std::to_string(i) + "\r\n";
    }
    EXPECT_EQ(c.read_for(300ms), "");
    EXPECT_GT(proxy.bytes_held(d), 0u);
    proxy.resume(d);
    EXPECT_EQ(c.read_exact(expected.size(), 2s), expected);
    EXPECT_EQ(proxy.bytes_held(), 0u);
  }
  EXPECT_EQ(proxy.bytes_dropped(), 0u);
}

// TCP delivers what was sent before a FIN: so does the proxy, after a pause, even though the
// sender is gone by then. This is what makes a late-delivered request possible in the tests.
TEST(tcp_proxy, paused_bytes_of_a_closed_client_still_arrive_on_resume) {
  dlock::test::redis_server srv;
  tcp_proxy proxy{srv.port()};
  proxy.pause(direction::client_to_server);
  {
    raw_client c{proxy.port()};
    c.send("SET late 1\r\n");
    ASSERT_TRUE(wait_until([&] { return proxy.bytes_held() > 0; }, 2s));
  }
  EXPECT_EQ(srv.command({"GET", "late"}), "$-1");
  EXPECT_EQ(proxy.connections(), 1u) << "held, with the client's end of stream behind the bytes";
  proxy.resume(direction::client_to_server);
  EXPECT_TRUE(wait_until([&] { return srv.command({"GET", "late"}) == "1"; }, 2s));
  EXPECT_TRUE(wait_until([&] { return proxy.connections() == 0; }, 2s))
      << "open " << proxy.connections() << ", held " << proxy.bytes_held();
}

TEST(tcp_proxy, freeze_holds_the_connections_open_now_and_lets_new_ones_pass) {
  dlock::test::redis_server srv;
  tcp_proxy proxy{srv.port()};
  {
    raw_client old{proxy.port()};
    // Accepted by the proxy (connect() returns once the kernel has it): freeze() sees it.
    ASSERT_TRUE(wait_until([&] { return proxy.connections() == 1; }, 2s));
    proxy.freeze(direction::client_to_server);
    old.send("SET late old\r\n");
    ASSERT_TRUE(wait_until([&] { return proxy.bytes_held() > 0; }, 2s));
  }  // its client gives up on it: the bytes and the end of stream wait in the proxy
  raw_client next{proxy.port()};
  next.send("SET late new\r\n");
  EXPECT_EQ(next.read_exact(5, 2s), "+OK\r\n") << "a connection accepted after the freeze passes";
  EXPECT_EQ(srv.command({"GET", "late"}), "new");
  proxy.thaw();
  EXPECT_TRUE(wait_until(
      [&] {
        return srv.command({"GET", "late"}) == "old";
      },
      2s))
      << "thawed, the old connection's request arrives after the new one's";
  EXPECT_TRUE(wait_until([&] { return proxy.connections() == 1; }, 2s));
  EXPECT_EQ(proxy.bytes_held(), 0u);
}

TEST(tcp_proxy, freeze_by_what_the_client_said_holds_only_the_matching_connections) {
  dlock::test::redis_server srv;
  tcp_proxy proxy{srv.port()};
  raw_client a{proxy.port()}, b{proxy.port()};
  a.send("CLIENT SETNAME alpha\r\n");
  b.send("CLIENT SETNAME beta\r\n");
  EXPECT_EQ(a.read_exact(5, 2s), "+OK\r\n");
  EXPECT_EQ(b.read_exact(5, 2s), "+OK\r\n");
  proxy.freeze(direction::server_to_client, "alpha");
  a.send(ping);
  b.send(ping);
  EXPECT_EQ(b.read_exact(pong.size(), 2s), pong) << "beta passes";
  ASSERT_TRUE(
      wait_until([&] { return proxy.bytes_held(direction::server_to_client) == pong.size(); }, 2s))
      << "alpha's reply is held";
  proxy.thaw();
  EXPECT_EQ(a.read_exact(pong.size(), 2s), pong);
  EXPECT_EQ(proxy.bytes_held(), 0u);
}

TEST(tcp_proxy, delay_delivers_each_chunk_at_least_that_late_in_order) {
  dlock::test::redis_server srv;
  tcp_proxy proxy{srv.port()};
  raw_client c{proxy.port()};
  auto round_trip = [&] {
    const auto start = steady::now();
    c.send(ping);
    EXPECT_EQ(c.read_exact(pong.size(), 3s), pong);
    return steady::now() - start;
  };
  proxy.delay(direction::both, 100ms);
  const auto both = round_trip();
  EXPECT_GE(both, 200ms);
  EXPECT_LT(both, 200ms + 150ms) << "slop 150 ms";
  proxy.delay(direction::server_to_client, 0ms);
  const auto one = round_trip();
  EXPECT_GE(one, 100ms);
  EXPECT_LT(one, 100ms + 150ms);
  // Chunks sent apart keep their order, and the delay is measured per chunk.
  proxy.delay(direction::both, 60ms);
  std::string expected;
  for (int i = 0; i < 5; ++i) {
    c.send("ECHO " + std::to_string(i) + "\r\n");
    expected += "$1\r\n" + std::to_string(i) + "\r\n";
  }
  EXPECT_EQ(c.read_exact(expected.size(), 3s), expected);
  proxy.pass();
  EXPECT_LT(round_trip(), 50ms);
  dlock::faults::measured(
      "proxy delay 100 ms each way: PING round trip " +
      std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(both).count()) +
      " ms; 100 ms one way: " +
      std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(one).count()) + " ms");
}

TEST(tcp_proxy, reset_all_cuts_every_connection_and_accepts_new_ones) {
  dlock::test::redis_server srv;
  tcp_proxy proxy{srv.port()};
  raw_client a{proxy.port()}, b{proxy.port()};
  ASSERT_TRUE(wait_until([&] { return proxy.connections() == 2; }, 2s));
  proxy.pause();  // held bytes are dropped with their connection
  a.send(ping);
  ASSERT_TRUE(wait_until([&] { return proxy.bytes_held() > 0; }, 2s));
  proxy.reset_all();
  EXPECT_EQ(proxy.connections(), 0u);
  EXPECT_TRUE(a.closed_within(2s));
  EXPECT_TRUE(b.closed_within(2s));
  proxy.pass();
  raw_client c{proxy.port()};
  c.send(ping);
  EXPECT_EQ(c.read_exact(pong.size(), 2s), pong);
  EXPECT_EQ(proxy.accepted(), 3u);
}

TEST(tcp_proxy, refuses_clients_when_nothing_listens_behind_it) {
  tcp_proxy proxy{dlock::test::free_port()};
  raw_client c{proxy.port()};
  EXPECT_TRUE(c.closed_within(2s));
  EXPECT_EQ(proxy.connections(), 0u);
}

TEST(tcp_proxy, destructor_is_prompt_with_connections_open_and_bytes_held) {
  dlock::test::redis_server srv;
  auto proxy = std::make_unique<tcp_proxy>(srv.port());
  raw_client a{proxy->port()};
  proxy->pause();
  a.send(ping);
  ASSERT_TRUE(wait_until([&] { return proxy->bytes_held() > 0; }, 2s));
  const auto start = steady::now();
  proxy.reset();
  EXPECT_LT(steady::now() - start, 500ms);
  EXPECT_TRUE(a.closed_within(2s));
}

}  // namespace
