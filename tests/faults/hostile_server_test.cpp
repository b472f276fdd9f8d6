// Hostile servers, through dlock::mutex against real ones: refusals of the connection or of
// every command (NOAUTH, WRONGPASS, READONLY), transient states (LOADING, BUSY, max clients),
// hosts that refuse or never answer, and TLS peers that fail verification. Every case asserts
// the typed errc the caller sees, that the call returns within its deadline (try_lock_for(wait):
// wait + slop; lock() without a deadline: a bound stated per case), and that no lock is left
// held afterwards (checked with an admin command, not through the client under test).
// docs/safety.md lists each case with the test that covers it.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <future>
#include <memory>
#include <string>

#include "dlock/mutex.hpp"
#include "hostile_util.hpp"
#include "integration/test_util.hpp"
#include "support/redis_server.hpp"

using dlock::errc;

namespace {

using dlock::test::config_for;
using dlock::test::redis_server;
using dlock::test::redis_server_options;
using namespace dlock::test::hostile;  // since, exists, counter, slop, prompt, steady, ...

// ---- Authentication --------------------------------------------------------------------------

TEST(hostile, no_auth_is_refused_at_once_on_every_path) {
  redis_server srv{{.requirepass = "s3cret"}};
  dlock::client c{config_for(srv)};  // no password
  const auto name = dlock::test::unique_name("lock");
  dlock::mutex m{c, name};
  expect_refused_on_every_path(m, errc::no_auth, 500ms, prompt,
                               [&] { EXPECT_FALSE(exists(srv, name)); });
}

TEST(hostile, wrong_password_or_user_is_refused_at_once_on_every_path) {
  auto o = redis_server_options::with_app_user("app-pass", "~* &* +@all");
  redis_server srv{o};
  const auto port = std::to_string(srv.port());
  for (const std::string who : {"app:wrong", "ghost:app-pass"}) {
    SCOPED_TRACE(who);
    dlock::client c{dlock::config::from_uri("redis://" + who + "@127.0.0.1:" + port)};
    const auto name = dlock::test::unique_name("lock");
    dlock::mutex m{c, name};
    expect_refused_on_every_path(
        m, errc::auth_failed, 500ms, prompt, [&] { EXPECT_FALSE(exists(srv, name)); }, who);
  }
}

// ---- READONLY ----------------------------------------------------------------------------------

TEST(hostile, read_only_replica_is_refused_at_once_on_every_path) {
  redis_server master;
  redis_server replica{{.extra_args = {"--replicaof", "127.0.0.1", std::to_string(master.port())}}};
  dlock::client c{config_for(replica)};
  const auto name = dlock::test::unique_name("lock");
  dlock::mutex m{c, name};
  expect_refused_on_every_path(m, errc::read_only, 500ms, prompt, [&] {
    EXPECT_FALSE(exists(replica, name));
    EXPECT_FALSE(exists(master, name));
  });
}

// ---- LOADING -----------------------------------------------------------------------------------

// A server reloading its dataset (DEBUG RELOAD; a restart from an RDB or AOF answers the same):
// LOADING is waited out for up to one command timeout within the caller's deadline, then
// reported as errc::loading; a load shorter than that is simply waited out.
class reloading {
 public:
  // Loading `keys` keys takes about keys x 1 ms (key-load-delay), answering clients between
  // keys (loading-process-events-interval-bytes).
  reloading(redis_server& srv, int keys) : srv_{srv} {
    srv.command({"CONFIG", "SET", "loading-process-events-interval-bytes", "1024"});
    srv.command({"CONFIG", "SET", "key-load-delay", "1000"});
    srv.command({"DEBUG", "POPULATE", std::to_string(keys), "filler", "100"});
    reload_ = std::async(std::launch::async, [&srv] {
      return srv.command({"DEBUG", "RELOAD"}, {.timeout = 20s});
    });
    loading_ = dlock::test::wait_until(
        [&] {
          return dlock::test::send_command(srv.port(), {"PING"}, {.timeout = 1s})
                     .rfind("-LOADING", 0) == 0;
        },
        5s);
  }
  ~reloading() { finish(); }
  bool loading() const { return loading_; }
  std::string finish() { return reload_.valid() ? reload_.get() : std::string{}; }

 private:
  redis_server& srv_;
  std::future<std::string> reload_;
  bool loading_ = false;
};

TEST(hostile, loading_is_waited_out_within_the_deadline_then_reported) {
  redis_server srv;
  const auto name = dlock::test::unique_name("lock");
  {
    dlock::client c{config_for(srv, "timeout=1s")};
    dlock::mutex m{c, name};
    c.ping();
    reloading r{srv, 4000};  // ~4 s of loading: longer than the ~2 s of waits below
    ASSERT_TRUE(r.loading());
    // lock() without a deadline: one command timeout (1 s) of retries, then loading.
    expect_refused_on_every_path(m, errc::loading, 300ms, 1s + slop,
                                 [] { /* checked after the load: EXISTS waits for it too */ });
    c.shutdown();
    EXPECT_EQ(r.finish(), "+OK");
  }
  EXPECT_FALSE(exists(srv, name));

  // A load shorter than the command timeout (3 s) is waited out.
  dlock::client c{config_for(srv)};
  dlock::mutex m{c, name};
  c.ping();
  srv.command({"FLUSHALL"});
  reloading r{srv, 800};  // ~0.8 s
  ASSERT_TRUE(r.loading());
  std::error_code ec;
  const auto start = steady::now();
  m.lock(ec);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_LT(since(start), 3s) << "within the command timeout";
  measured_call("lock() during a 0.8 s load (timeout 3 s)", ec, since(start));
  EXPECT_EQ(r.finish(), "+OK");
  EXPECT_TRUE(exists(srv, name));
  m.unlock();
  EXPECT_FALSE(exists(srv, name));
}

// ---- BUSY --------------------------------------------------------------------------------------

// A script that loops (from another application) blocks the server; past busy-reply-threshold
// every command gets BUSY. Acquire waits it out for one command timeout within the deadline and
// reports busy; a release is reported at once (the hold stays, calling again is safe).
TEST(hostile, busy_script_is_waited_out_within_the_deadline_then_reported) {
  redis_server srv;
  srv.command({"CONFIG", "SET", "busy-reply-threshold", "100"});
  dlock::client c{config_for(srv, "timeout=1s")};
  const auto held_name = dlock::test::unique_name("lock");
  dlock::mutex held{c, held_name};
  held.lock();

  auto script = std::async(std::launch::async, [&srv] {
    return srv.command({"EVAL", "while true do end", "0"}, {.timeout = 30s});
  });
  ASSERT_TRUE(dlock::test::wait_until(
      [&] { return srv.command({"PING"}, {.timeout = 1s}).rfind("-BUSY", 0) == 0; }, 5s));

  const auto name = dlock::test::unique_name("lock");
  dlock::mutex m{c, name};
  expect_refused_on_every_path(m, errc::busy, 300ms, 1s + slop, [] {});

  std::error_code ec;
  auto start = steady::now();
  held.unlock(ec);
  EXPECT_EQ(ec, errc::busy) << ec.message();
  EXPECT_LT(since(start), 1s + slop);
  measured_call("the holder's unlock() during BUSY", ec, since(start));

  EXPECT_EQ(srv.command({"SCRIPT", "KILL"}), "+OK");
  EXPECT_EQ(script.get().rfind("-ERR", 0), 0u);
  EXPECT_FALSE(exists(srv, name));
  held.unlock(ec);
  EXPECT_FALSE(ec) << "a failed release keeps the hold; calling again releases: " << ec.message();
  EXPECT_FALSE(exists(srv, held_name));
}

// ---- Max clients -------------------------------------------------------------------------------

// A plain TCP connection that has been registered by the server (it answered PING).
class raw_connection {
 public:
  explicit raw_connection(std::uint16_t port) : fd_{::socket(AF_INET, SOCK_STREAM, 0)} {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    timeval tv{2, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return;
    const char ping[] = "PING\r\n";
    if (::write(fd_, ping, sizeof ping - 1) != static_cast<ssize_t>(sizeof ping - 1)) return;
    char buf[64];
    const auto n = ::read(fd_, buf, sizeof buf);
    reply_ = n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string{};
  }
  ~raw_connection() { ::close(fd_); }
  raw_connection(const raw_connection&) = delete;
  raw_connection& operator=(const raw_connection&) = delete;
  const std::string& reply() const { return reply_; }

 private:
  int fd_;
  std::string reply_;
};

TEST(hostile, max_clients_is_reported_within_the_deadline_and_passes_when_a_slot_frees) {
  redis_server srv{{.extra_args = {"--maxclients", "2"}}};
  auto fill = std::make_unique<std::array<std::unique_ptr<raw_connection>, 2>>();
  for (auto& f : *fill) {
    f = std::make_unique<raw_connection>(srv.port());
    ASSERT_EQ(f->reply(), "+PONG\r\n");
  }
  ASSERT_EQ(raw_connection{srv.port()}.reply().rfind("-ERR max number of clients reached", 0), 0u);

  const auto name = dlock::test::unique_name("lock");
  {
    dlock::client c{config_for(srv, "connect_timeout=500ms&timeout=1s")};
    dlock::mutex m{c, name};
    // lock() without a deadline: max_clients is transient, retried for one command timeout.
    expect_refused_on_every_path(m, errc::max_clients, 300ms, 1s + 500ms + slop, [] {});
  }
  fill.reset();  // two slots free
  EXPECT_FALSE(exists(srv, name));
  dlock::client c{config_for(srv)};
  dlock::mutex m{c, name};
  std::error_code ec;
  const auto start = steady::now();
  EXPECT_TRUE(m.try_lock_for(2s, ec)) << ec.message();
  EXPECT_LT(since(start), 2s);
  measured_call("try_lock_for(2s) once slots are free", ec, since(start));
  m.unlock();
  EXPECT_FALSE(exists(srv, name));
}

// ---- Unreachable hosts -------------------------------------------------------------------------

// Nothing listens: connection_refused. The client keeps retrying in the background; a caller
// with a deadline must hear by its deadline, one without by the connect timeout.
TEST(hostile, refused_port_is_reported_within_the_deadline) {
  const auto port = dlock::test::free_port();
  dlock::client c{dlock::config::from_uri("redis://127.0.0.1:" + std::to_string(port) +
                                          "?connect_timeout=2s&timeout=3s")};
  dlock::mutex m{c, dlock::test::unique_name("lock")};
  expect_refused_on_every_path(m, errc::connection_refused, 300ms, 2s + slop, [] {});
}

// A listener that accepts TCP and never answers (a hung server, a black-holing proxy):
// connect_timeout.
TEST(hostile, silent_listener_is_reported_within_the_deadline) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(fd, 64), 0);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  {
    dlock::client c{
        dlock::config::from_uri("redis://127.0.0.1:" + std::to_string(ntohs(a.sin_port)) +
                                "?connect_timeout=1s&timeout=3s")};
    dlock::mutex m{c, dlock::test::unique_name("lock")};
    expect_refused_on_every_path(m, errc::connect_timeout, 300ms, 1s + slop, [] {});
  }
  ::close(fd);
}

// ---- TLS ---------------------------------------------------------------------------------------

TEST(hostile, tls_wrong_ca_and_wrong_host_are_refused_at_once_on_every_path) {
  dlock::test::temp_dir dir{"dlock-hostile-tls-"};
  const auto tls = dlock::test::make_tls_material(dir.path());
  redis_server srv{{.tls = true,
                    .tls_cert_file = tls.other_host_cert,  // names elsewhere.invalid only
                    .tls_key_file = tls.other_host_key,
                    .tls_ca_file = tls.ca_cert,
                    .tls_plain_admin_port = true}};
  const auto uri = [&](const std::string& ca, const std::string& extra) {
    return "rediss://127.0.0.1:" + std::to_string(srv.port()) + "?ca=" + ca + extra;
  };
  const struct {
    std::string uri;
    errc want;
    std::string what;
  } cases[] = {
      {uri(tls.wrong_ca_cert, "&sni=elsewhere.invalid"), errc::tls_verify_failed, "another CA"},
      {uri(tls.ca_cert, ""), errc::tls_host_mismatch, "another host name"},
  };
  for (const auto& k : cases) {
    SCOPED_TRACE(k.uri);
    dlock::client c{dlock::config::from_uri(k.uri)};
    const auto name = dlock::test::unique_name("lock");
    dlock::mutex m{c, name};
    expect_refused_on_every_path(
        m, k.want, 500ms, prompt, [&] { EXPECT_FALSE(exists(srv, name)); }, k.what);
  }
  // The same server with the right CA and the name its certificate carries: locks work.
  dlock::client ok{dlock::config::from_uri(uri(tls.ca_cert, "&sni=elsewhere.invalid"))};
  dlock::mutex m{ok, dlock::test::unique_name("lock")};
  m.lock();
  m.unlock();
}

}  // namespace
