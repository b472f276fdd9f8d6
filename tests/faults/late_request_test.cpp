// Requests that a broken connection delivers late — after the client gave up on it, reconnected
// and went on — through the proxy's freeze (support/tcp_proxy): the connection open at the freeze
// keeps its bytes, the next one passes; the thaw delivers the old bytes after everything the
// client sent since, as a network that heals would. The command connection's next handshake
// kills the old connection (transport/link.hpp, "Fencing"), so what it had not delivered never
// runs: a late release cannot free this owner's newer hold (two holders), nor a late acquire take
// the lock again after its resend was released (a lock held by nobody until its lease ends).
//
// The holder's calls all go over the command connection (the only one a client has for commands);
// command and connect timeouts 300 ms, watchdog lease 900 ms.
#include <gtest/gtest.h>

#include <future>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "../integration/test_util.hpp"
#include "dlock/mutex.hpp"
#include "partition_util.hpp"
#include "runtime/client_access.hpp"
#include "runtime/client_impl.hpp"
#include "support/redis_server.hpp"
#include "support/tcp_proxy.hpp"

using namespace std::chrono_literals;
using dlock::test::direction;
using dlock::test::holder_params;
using dlock::test::wait_until;

namespace {

// A server, the holder's client through the proxy, an observer connected directly.
struct late_lab {
  dlock::test::redis_server srv;
  dlock::test::tcp_proxy proxy{srv.port()};
  dlock::client holder{dlock::test::config_through(proxy, holder_params)};
  dlock::client observer{dlock::test::config_for(srv)};
  std::string name = dlock::test::unique_name("late");
  dlock::mutex h{holder, name};

  std::uint64_t held() const { return proxy.bytes_held(direction::client_to_server); }
  long long exists() { return observer.execute({"EXISTS", name}).integer(); }
  // Thaws the proxy and waits until the server has done with the old connection: it ran the
  // late bytes and then read their end of stream — or had killed it before they came. Two
  // command connections stay: the holder's new one and the observer's.
  void thaw_and_settle() {
    proxy.thaw();
    auto named = [&] {
      const auto list = srv.command({"CLIENT", "LIST"});
      std::size_t n = 0;
      for (auto at = list.find(" name=dlock "); at != std::string::npos;
           at = list.find(" name=dlock ", at + 1))
        ++n;
      return n;
    };
    EXPECT_TRUE(wait_until([&] { return held() == 0 && named() == 2; }, 5s))
        << "held " << held() << ", command connections " << named();
  }
};

TEST(late_request, a_release_left_on_an_abandoned_connection_never_frees_a_newer_hold) {
  late_lab lab;
  lab.h.lock();
  lab.proxy.freeze(direction::client_to_server);
  const auto t0 = dlock::test::steady::now();
  std::error_code ec;
  lab.h.unlock(ec);  // held in the proxy; after the command timeout: a new connection, the resend
  const auto released = dlock::test::steady::now();
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(lab.exists(), 0) << "the resend released it";
  const auto late_bytes = lab.held();
  ASSERT_GT(late_bytes, 0u) << "the first release still waits in the proxy";

  lab.h.lock();  // the same owner field, a new hold
  const auto ours = lab.observer.execute({"HGETALL", lab.name});
  lab.thaw_and_settle();
  const bool kept = lab.observer.execute({"HGETALL", lab.name}) == ours;
  EXPECT_TRUE(kept) << "the late release ran on the newer hold";
  EXPECT_GT(lab.observer.execute({"PTTL", lab.name}).integer(), 0);
  EXPECT_TRUE(lab.h.is_held_by_current_thread());
  lab.h.unlock(ec);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_EQ(lab.exists(), 0);
  dlock::faults::measured("release held in the proxy: unlock returned after " +
                          std::to_string(dlock::test::ms_between(t0, released)) +
                          " ms (resent on a new connection); " + std::to_string(late_bytes) +
                          " late bytes delivered at the thaw; the newer hold " +
                          (kept ? "kept" : "deleted"));
}

TEST(late_request, an_acquire_left_on_an_abandoned_connection_never_takes_the_lock_again) {
  late_lab lab;
  lab.holder.ping();  // connected before the freeze: the acquire goes out on this connection
  lab.proxy.freeze(direction::client_to_server);
  const auto t0 = dlock::test::steady::now();
  std::error_code ec;
  ASSERT_TRUE(lab.h.try_lock_for(5s, ec)) << ec.message();  // the resend, on a new connection
  const auto acquired = dlock::test::steady::now();
  const auto late_bytes = lab.held();
  ASSERT_GT(late_bytes, 0u) << "the first acquire still waits in the proxy";
  lab.h.unlock(ec);
  ASSERT_FALSE(ec) << ec.message();
  ASSERT_EQ(lab.exists(), 0);

  lab.thaw_and_settle();
  const bool free_after = lab.exists() == 0;
  EXPECT_TRUE(free_after) << "the late acquire took the lock for nobody";
  dlock::mutex o{lab.observer, lab.name};
  EXPECT_TRUE(o.try_lock(ec)) << "free for the next owner at once";
  o.unlock();
  dlock::faults::measured("acquire held in the proxy: try_lock_for acquired after " +
                          std::to_string(dlock::test::ms_between(t0, acquired)) +
                          " ms (resent on a new connection); " + std::to_string(late_bytes) +
                          " late bytes delivered at the thaw, after the release; the lock " +
                          (free_after ? "stayed free" : "was taken again for nobody"));
}

// An ACL user refused CLIENT KILL (without @admin, say), or CLIENT INFO too, connects and
// reconnects as before: the refusals leave its connections unfenced — the client warns once
// (warning::unfenced) — they do not fail the handshake.
class late_request_rights : public testing::TestWithParam<const char*> {};
INSTANTIATE_TEST_SUITE_P(acl, late_request_rights,
                         testing::Values("-client|kill", "-client|kill -client|info"));

TEST_P(late_request_rights, a_user_refused_the_fence_still_connects_and_reconnects) {
  auto o = dlock::test::redis_server_options::with_app_user(
      "pw", std::string{"~* &* +@all "} + GetParam());
  dlock::test::redis_server srv{o};
  dlock::test::tcp_proxy proxy{srv.port()};
  auto cfg = dlock::test::config_through(proxy, holder_params);
  cfg.username = "app";
  cfg.password = "pw";
  dlock::test::recorder<std::pair<dlock::warning, std::string>> warnings;
  cfg.on_warning = [&](dlock::warning w, std::string_view text) {
    warnings.push({w, std::string{text}});
  };
  dlock::client app{cfg};
  dlock::mutex m{app, dlock::test::unique_name("late")};
  std::error_code ec;
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(round);
    m.lock(ec);
    ASSERT_FALSE(ec) << ec.message();
    m.unlock(ec);
    ASSERT_FALSE(ec) << ec.message();
    const auto before = dlock::detail::client_access::impl(app).connection().connects();
    proxy.reset_all();
    ASSERT_TRUE(wait_until(
        [&] { return dlock::detail::client_access::impl(app).connection().connects() > before; },
        5s))
        << "reconnected past the refused commands";
  }
  const auto refused = std::string{GetParam()}.find("client|info") != std::string::npos
                           ? "client|info"
                           : "client|kill";
  EXPECT_NE(srv.command({"ACL", "LOG"}).find(refused), std::string::npos) << "asked, and refused";
  const auto got = warnings.items();
  ASSERT_EQ(got.size(), 1u) << "warned once";
  EXPECT_EQ(got[0].first, dlock::warning::unfenced);
  EXPECT_NE(
      got[0].second.find(refused == std::string{"client|info"} ? "CLIENT INFO" : "CLIENT KILL"),
      std::string::npos)
      << got[0].second;
}

// While a script runs past busy-reply-threshold, Redis answers BUSY: a fence refused so is sent
// again on the next connection (the old one may deliver once the script ends), not given up.
TEST(late_request, a_fence_refused_while_a_script_runs_is_sent_again_on_the_next_connection) {
  dlock::test::redis_server srv;
  srv.command({"CONFIG", "SET", "busy-reply-threshold", "100"});
  dlock::test::tcp_proxy proxy{srv.port()};
  auto cfg = dlock::test::config_through(proxy, holder_params);
  cfg.client_name.clear();  // else CLIENT SETNAME, first in the handshake, is refused first
  dlock::client holder{cfg};
  holder.ping();  // connected: its identity is known
  ASSERT_EQ(dlock::test::command_stat(srv, "client|kill"), 0);
  auto busy = std::async(std::launch::async, [&] {
    return srv.command({"EVAL",
                        "local t = redis.call('TIME') local s = t[1] * 1000000 + t[2] "
                        "while true do local n = redis.call('TIME') "
                        "if n[1] * 1000000 + n[2] - s > 1200000 then return 1 end end",
                        "0"});
  });
  std::this_thread::sleep_for(300ms);  // past the threshold: others get BUSY now
  const auto before = dlock::detail::client_access::impl(holder).connection().connects();
  proxy.reset_all();
  ASSERT_EQ(busy.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(busy.get(), ":1");
  ASSERT_TRUE(wait_until(
      [&] { return dlock::detail::client_access::impl(holder).connection().connects() > before; },
      5s));
  EXPECT_GE(dlock::test::command_stat(srv, "client|kill", "rejected_calls"), 1)
      << "refused (BUSY) while the script ran";
  EXPECT_EQ(dlock::test::command_stat(srv, "client|kill"), 1)
      << "then sent again, and run before the connection came up";
  std::error_code ec;
  holder.ping(ec);
  EXPECT_FALSE(ec) << ec.message();
}

}  // namespace
