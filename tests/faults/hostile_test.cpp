// Hostile replies and bad input (issue 6, part 3), through dlock::mutex against real servers.
// Every case asserts three things: the typed errc the caller sees, that the call returns within
// its deadline (try_lock_for(wait): wait + slop; lock() without a deadline: a bound stated per
// case), and that no lock is left held afterwards (checked with an admin command, not through
// the client under test). docs/safety.md lists each case with the test that covers it.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <asio/use_future.hpp>
#include <cstdio>
#include <future>
#include <limits>
#include <thread>

#include "dlock/inspect.hpp"
#include "dlock/keys.hpp"
#include "dlock/mutex.hpp"
#include "integration/test_util.hpp"
#include "support/redis_server.hpp"

using namespace std::chrono_literals;
using dlock::errc;
using std::chrono::milliseconds;
using steady = std::chrono::steady_clock;

namespace {

using dlock::test::config_for;
using dlock::test::redis_server;
using dlock::test::redis_server_options;

// Under a sanitizer (TSan above all) handshakes and scheduling run several times slower; the
// bounds below get this much more there. The tight bounds are checked by the plain build.
#ifdef DLOCK_TEST_SANITIZED
constexpr auto sanitizer_extra = 1000ms;
#else
constexpr auto sanitizer_extra = 0ms;
#endif
// What a refusal may cost past the caller's deadline: one round trip, a 50 ms retry pause and
// scheduling on a 2-core host shared with the servers and other tests.
constexpr auto slop = 300ms + sanitizer_extra;
// A refusal "at once": one round trip plus scheduling.
constexpr auto prompt = 500ms + sanitizer_extra;

milliseconds since(steady::time_point start) {
  return std::chrono::duration_cast<milliseconds>(steady::now() - start);
}

bool exists(const redis_server& srv, const std::string& key) {
  return srv.command({"EXISTS", key}) == ":1";
}

// The fencing counter a default client's acquisitions of `name` use (one per cluster slot).
std::string counter(const std::string& name) { return dlock::keys::slot_fencing_counter_of(name); }

// One measured result, for docs/safety.md's table.
void report(const char* path, std::error_code ec, milliseconds took) {
  std::printf("[ measured ] %s: %s (%s) in %lld ms\n", path, ec ? ec.message().c_str() : "ok",
              ec ? std::to_string(ec.value()).c_str() : "-", static_cast<long long>(took.count()));
}

// The paths a caller can take to a lock, each expected to fail with `want` in time:
// try_lock(), try_lock_for(wait), async_lock_for(wait) and lock() (no deadline; within
// `lock_bound`). `held_nowhere` runs after each and checks (with ASSERTs/EXPECTs) that no lock
// was left behind.
void expect_refused_on_every_path(dlock::mutex& m, errc want, milliseconds wait,
                                  milliseconds lock_bound,
                                  const std::function<void()>& held_nowhere) {
  std::error_code ec;
  {
    SCOPED_TRACE("try_lock()");
    const auto start = steady::now();
    EXPECT_FALSE(m.try_lock(ec));
    EXPECT_EQ(ec, want) << ec.message();
    EXPECT_LT(since(start), std::max(lock_bound, wait) + slop);
    held_nowhere();
  }
  {
    SCOPED_TRACE("try_lock_for(" + std::to_string(wait.count()) + "ms)");
    const auto start = steady::now();
    EXPECT_FALSE(m.try_lock_for(wait, ec));
    EXPECT_EQ(ec, want) << ec.message();
    EXPECT_LT(since(start), wait + slop) << "the caller's deadline plus " << slop.count() << " ms";
    report("try_lock_for", ec, since(start));
    held_nowhere();
  }
  {
    SCOPED_TRACE("async_lock_for(" + std::to_string(wait.count()) + "ms)");
    const auto start = steady::now();
    auto f = m.async_lock_for(wait, asio::use_future);
    ASSERT_EQ(f.wait_for(wait + 10s), std::future_status::ready) << "hangs";
    try {
      auto l = f.get();
      ADD_FAILURE() << "acquired, expected " << make_error_code(want).message();
    } catch (const std::system_error& e) {
      EXPECT_EQ(e.code(), want) << e.what();
    }
    EXPECT_LT(since(start), wait + slop);
    held_nowhere();
  }
  {
    SCOPED_TRACE("lock()");
    const auto start = steady::now();
    m.lock(ec);
    EXPECT_EQ(ec, want) << ec.message();
    EXPECT_LT(since(start), lock_bound + sanitizer_extra) << "lock() without a deadline";
    report("lock", ec, since(start));
    EXPECT_FALSE(m.lease_lost().stop_requested());
    EXPECT_EQ(m.fencing_token(), 0u) << "no hold";
    held_nowhere();
  }
}

// ---- WRONGTYPE -----------------------------------------------------------------------------

TEST(hostile, wrong_type_lock_key_is_refused_at_once_on_every_path_and_left_untouched) {
  redis_server srv;
  dlock::client c{config_for(srv)};
  const auto name = dlock::test::unique_name("lock");
  srv.command({"SET", name, "not a lock"});
  dlock::mutex m{c, name};
  expect_refused_on_every_path(m, errc::wrong_type, 500ms, prompt, [&] {
    EXPECT_EQ(srv.command({"GET", name}), "not a lock");
    EXPECT_FALSE(exists(srv, counter(name))) << "no fencing token was drawn";
  });
  EXPECT_THROW(m.lock(), dlock::lock_error);
  std::error_code ec;
  m.unlock(ec);
  EXPECT_EQ(ec, errc::not_owner) << "nothing was acquired";
}

// The key is replaced by another type while held (another application reuses the name): the
// holder is told its lease is gone and its unlock touches nothing.
TEST(hostile, wrong_type_replacing_a_held_lock_signals_lease_lost_and_unlock_touches_nothing) {
  redis_server srv;
  dlock::client c{config_for(srv, "watchdog=900ms")};
  const auto name = dlock::test::unique_name("lock");
  dlock::mutex m{c, name};
  m.lock();
  auto lost = m.lease_lost();
  srv.command({"DEL", name});
  srv.command({"SET", name, "someone else's"});
  EXPECT_TRUE(dlock::test::wait_until([&] { return lost.stop_requested(); }, 2s))
      << "the next renewal (every 300 ms) finds no hold: lease lost";
  std::error_code ec;
  const auto start = steady::now();
  m.unlock(ec);
  EXPECT_LT(since(start), prompt);
  EXPECT_EQ(ec, errc::lease_lost) << ec.message()
                                  << ": the hold was already lost, and nothing "
                                     "of this owner's is left to release";
  EXPECT_EQ(srv.command({"GET", name}), "someone else's");
  m.unlock(ec);
  EXPECT_EQ(ec, errc::not_owner) << ec.message()
                                 << ": the lost hold is dropped by the first unlock";
  // The name's next user in this thread is told about the key, not about the old hold.
  m.lock(ec);
  EXPECT_EQ(ec, errc::wrong_type) << ec.message();
  EXPECT_EQ(srv.command({"GET", name}), "someone else's");
}

// The fencing counter of the lock's slot (dlock_fencing:{<tag>}) holds another type, or a string
// that is not a number. The acquire script writes the lock before it sets the counter, and Redis
// does not roll a script back: the refusal must not leave the lock held.
TEST(hostile, wrong_type_fencing_counter_is_refused_and_leaves_no_lock_held) {
  redis_server srv;
  dlock::client c{config_for(srv)};
  const auto name = dlock::test::unique_name("lock");
  srv.command({"HSET", counter(name), "f", "v"});
  dlock::mutex m{c, name};
  std::error_code ec;
  const auto start = steady::now();
  EXPECT_FALSE(m.try_lock_for(500ms, ec));
  EXPECT_LT(since(start), 500ms + slop);
  EXPECT_EQ(ec, errc::wrong_type) << ec.message();
  EXPECT_FALSE(exists(srv, name)) << "lock left held after a refused acquire: PTTL "
                                  << srv.command({"PTTL", name});
}

TEST(hostile, non_numeric_fencing_counter_is_refused_and_leaves_no_lock_held) {
  redis_server srv;
  auto c = std::make_unique<dlock::client>(config_for(srv));
  const auto name = dlock::test::unique_name("lock");
  srv.command({"SET", counter(name), "abc"});
  dlock::mutex m{*c, name};
  std::error_code ec;
  const auto start = steady::now();
  EXPECT_FALSE(m.try_lock_for(500ms, ec));
  EXPECT_LT(since(start), 500ms + slop);
  EXPECT_TRUE(ec == errc::server_error || ec == errc::wrong_type) << ec.message();
  EXPECT_FALSE(exists(srv, name)) << "lock left held after a refused acquire: PTTL "
                                  << srv.command({"PTTL", name});
  // lock() without a deadline must report too, not spin on the half-written lock.
  auto t = std::async(std::launch::async, [&] {
    std::error_code e;
    m.lock(e);
    return e;
  });
  const bool returned = t.wait_for(3s) == std::future_status::ready;
  EXPECT_TRUE(returned) << "lock() did not return within 3 s";
  if (!returned) c->shutdown();  // ends the wait with errc::shutdown
  const auto e = t.get();
  EXPECT_TRUE(e == errc::server_error || e == errc::wrong_type) << e.message();
  srv.command({"DEL", name});
}

// The caller's own field in the lock hash holds something that is not a hold count (written by
// hand): reported at once as a server error, not taken for "held" and waited on.
TEST(hostile, a_non_numeric_own_field_is_reported_not_waited_on) {
  redis_server srv;
  dlock::client c{config_for(srv)};
  const auto name = dlock::test::unique_name("lock");
  dlock::mutex m{c, name};
  m.lock();
  const auto fields = srv.command({"HGETALL", name});  // "[<owner>, 1]"
  const auto owner = fields.substr(1, fields.find(',') - 1);
  m.unlock();
  srv.command({"HSET", name, owner, "abc"});
  std::error_code ec;
  const auto start = steady::now();
  EXPECT_FALSE(m.try_lock_for(2s, ec));
  EXPECT_EQ(ec, errc::server_error) << ec.message();
  EXPECT_LT(since(start), prompt) << "answered at once, not waited on";
  EXPECT_EQ(srv.command({"HGET", name, owner}), "abc") << "nothing written";
}

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
    expect_refused_on_every_path(m, errc::auth_failed, 500ms, prompt,
                                 [&] { EXPECT_FALSE(exists(srv, name)); });
  }
}

// ---- ACL: keys ---------------------------------------------------------------------------------

// The user may write the lock key and dlock's other keys (the queue and records `dlock_lock_*`,
// the yield marker `{app:...}:dlock_yield`, RFencedLock's counter) but not the fencing counter
// (a common ACL mistake: the slot's counter is `dlock_fencing:{<tag>}`, outside `~app:*`).
TEST(hostile, no_permission_on_the_fencing_counter_leaves_no_lock_held) {
  auto o = redis_server_options::with_app_user(
      "pw", "~app:* ~{app:* ~dlock_lock_* ~redisson_lock_token:* &* +@all");
  redis_server srv{o};
  dlock::client c{
      dlock::config::from_uri("redis://app:pw@127.0.0.1:" + std::to_string(srv.port()))};
  const auto name = dlock::test::unique_name("app:lock");
  dlock::mutex m{c, name};
  expect_refused_on_every_path(m, errc::no_permission, 500ms, prompt, [&] {
    EXPECT_FALSE(exists(srv, name));
    EXPECT_FALSE(exists(srv, counter(name)));
  });
}

// With fencing off no counter is declared, so a user without a right to one can lock, unlock
// and inspect (dlock status) — and the same user is refused with fencing on.
TEST(hostile, fencing_off_needs_no_right_to_a_counter) {
  auto o = redis_server_options::with_app_user("pw", "~app:* ~{app:* ~dlock_lock_* &* +@all");
  redis_server srv{o};
  const auto url = "redis://app:pw@127.0.0.1:" + std::to_string(srv.port());
  const auto name = dlock::test::unique_name("app:lock");
  {
    dlock::client c{dlock::config::from_uri(url + "?fencing=off")};
    dlock::mutex m{c, name};
    std::error_code ec;
    EXPECT_TRUE(m.try_lock_for(500ms, ec)) << ec.message();
    EXPECT_EQ(m.fencing_token(), 0u);
    const auto status = dlock::inspect(c, name, ec);
    EXPECT_FALSE(ec) << ec.message();
    EXPECT_TRUE(status.held);
    EXPECT_EQ(status.fencing_counter, 0u);
    m.unlock(ec);
    EXPECT_FALSE(ec) << ec.message();
    EXPECT_FALSE(exists(srv, name));
  }
  dlock::client fenced{dlock::config::from_uri(url)};
  dlock::mutex m{fenced, name};
  std::error_code ec;
  EXPECT_FALSE(m.try_lock_for(500ms, ec));
  EXPECT_EQ(ec, errc::no_permission) << ec.message();
  EXPECT_FALSE(exists(srv, name));
}

// ---- OOM ---------------------------------------------------------------------------------------

// Over maxmemory under noeviction: acquiring is refused with out_of_memory on every path, and a
// holder can still release (Redis allows DEL over maxmemory): an unlock that fails would leave
// the lock held, renewed by the watchdog, for as long as the holder lives.
TEST(hostile, out_of_memory_refuses_acquire_and_lets_a_holder_release) {
  redis_server srv{{.extra_args = {"--maxmemory-policy", "noeviction"}}};
  dlock::client c{config_for(srv)};
  const auto held_name = dlock::test::unique_name("lock");
  dlock::mutex held{c, held_name};
  held.lock();
  srv.command({"DEBUG", "POPULATE", "4000", "filler", "1000"});  // ~4 MB
  srv.command({"CONFIG", "SET", "maxmemory", "1mb"});
  ASSERT_EQ(srv.command({"SET", "probe", "x"}).rfind("-OOM", 0), 0u)
      << "the server is over maxmemory";

  const auto name = dlock::test::unique_name("lock");
  dlock::mutex m{c, name};
  const auto last_token = srv.command({"GET", counter(name)});
  expect_refused_on_every_path(m, errc::out_of_memory, 500ms, prompt, [&] {
    EXPECT_FALSE(exists(srv, name));
    EXPECT_EQ(srv.command({"GET", counter(name)}), last_token) << "no token issued";
  });

  std::error_code ec;
  const auto start = steady::now();
  held.unlock(ec);
  EXPECT_LT(since(start), prompt);
  EXPECT_FALSE(ec) << "unlock over maxmemory: " << ec.message();
  EXPECT_FALSE(exists(srv, held_name)) << "the holder could not release: the lock stays held";
  if (ec) {  // leave the server usable for the destructor's checks
    srv.command({"CONFIG", "SET", "maxmemory", "0"});
    held.unlock(ec);
    EXPECT_FALSE(ec) << ec.message();
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
  EXPECT_EQ(r.finish(), "+OK");
  EXPECT_TRUE(exists(srv, name));
  m.unlock();
  EXPECT_FALSE(exists(srv, name));
}

// ---- BUSY
// ----------------------------------------------------------------------------------------

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
  } cases[] = {
      {uri(tls.wrong_ca_cert, "&sni=elsewhere.invalid"), errc::tls_verify_failed},
      {uri(tls.ca_cert, ""), errc::tls_host_mismatch},
  };
  for (const auto& k : cases) {
    SCOPED_TRACE(k.uri);
    dlock::client c{dlock::config::from_uri(k.uri)};
    const auto name = dlock::test::unique_name("lock");
    dlock::mutex m{c, name};
    expect_refused_on_every_path(m, k.want, 500ms, prompt,
                                 [&] { EXPECT_FALSE(exists(srv, name)); });
  }
  // The same server with the right CA and the name its certificate carries: locks work.
  dlock::client ok{dlock::config::from_uri(uri(tls.ca_cert, "&sni=elsewhere.invalid"))};
  dlock::mutex m{ok, dlock::test::unique_name("lock")};
  m.lock();
  m.unlock();
}

// ---- An evicting maxmemory-policy
// ----------------------------------------------------------------

// The user is warned once (here by an ACL user denied CONFIG, so the policy is read from INFO);
// when the policy then evicts the lock key, the holder is told by lease_lost(), and its unlock
// reports lease_lost without touching anything.
TEST(hostile, evicting_policy_is_warned_once_and_an_evicted_lock_is_reported_lost) {
  auto o = redis_server_options::with_app_user("pw", "~* &* +@all -config");
  o.extra_args = {"--maxmemory-policy", "volatile-ttl"};
  redis_server srv{o};
  std::mutex mu;
  std::vector<std::pair<dlock::warning, std::string>> warnings;
  auto cfg = dlock::config::from_uri("redis://app:pw@127.0.0.1:" + std::to_string(srv.port()) +
                                     "?watchdog=900ms");
  cfg.on_warning = [&](dlock::warning w, std::string_view text) {
    std::lock_guard lock{mu};
    warnings.emplace_back(w, std::string{text});
  };
  dlock::client c{cfg};
  const auto name = dlock::test::unique_name("lock");
  dlock::mutex m{c, name};
  m.lock();
  auto lost = m.lease_lost();
  c.ping();  // after the policy check's replies
  {
    std::lock_guard lock{mu};
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_EQ(warnings[0].first, dlock::warning::evicting_policy);
    EXPECT_NE(warnings[0].second.find("volatile-ttl"), std::string::npos) << warnings[0].second;
  }
  // The lock key is the only key with a TTL: volatile-ttl evicts it first.
  srv.command({"DEBUG", "POPULATE", "4000", "filler", "1000"});
  srv.command({"CONFIG", "SET", "maxmemory", "1mb"});
  srv.command({"SET", "probe", "x"});  // runs the eviction
  EXPECT_FALSE(exists(srv, name)) << "evicted";
  EXPECT_TRUE(dlock::test::wait_until([&] { return lost.stop_requested(); }, 2s))
      << "the next renewal (every 300 ms) finds the key gone";
  std::error_code ec;
  m.unlock(ec);
  EXPECT_EQ(ec, errc::lease_lost);
  srv.command({"CONFIG", "SET", "maxmemory", "0"});
  dlock::mutex again{c, dlock::test::unique_name("lock")};
  again.lock();
  again.unlock();
  std::lock_guard lock{mu};
  EXPECT_EQ(warnings.size(), 1u) << "once per client";
}

// ---- Bad input ---------------------------------------------------------------------------------

TEST(hostile, empty_and_too_long_names_are_refused_at_once_everywhere) {
  redis_server srv;
  dlock::client c{config_for(srv, "max_name=64")};
  for (const auto& name : {std::string{}, std::string(65, 'x')}) {
    SCOPED_TRACE("name of " + std::to_string(name.size()) + " bytes");
    dlock::mutex m{c, name};
    expect_refused_on_every_path(m, errc::invalid_argument, 500ms, 100ms, [&] {
      if (!name.empty()) {
        EXPECT_FALSE(exists(srv, name));
      }
      EXPECT_EQ(srv.command({"DBSIZE"}), ":0");
    });
    std::error_code ec;
    m.force_unlock(ec);
    EXPECT_EQ(ec, errc::invalid_argument);
    m.is_locked(ec);
    EXPECT_EQ(ec, errc::invalid_argument);
    m.remaining_lease(ec);
    EXPECT_EQ(ec, errc::invalid_argument);
  }
  dlock::mutex longest{c, std::string(64, 'x')};
  EXPECT_TRUE(longest.try_lock());
  longest.unlock();
  EXPECT_EQ(srv.command({"DBSIZE"}), ":1") << "only the fencing counter remains";
}

// Names are bytes, as Redis keys are: invalid UTF-8, NUL, CR LF, spaces and a hash tag are
// accepted and name exactly that key (Redisson's names are Java strings sent as UTF-8). A name
// whose derived keys cannot share its cluster slot (keys::same_slot: `a{b`, `x{}y`, `a}b`) is
// refused at once with invalid_argument, and nothing is written.
TEST(hostile, names_are_bytes_and_any_bytes_lock_their_own_key) {
  redis_server srv;
  dlock::client c{config_for(srv)};
  using namespace std::string_literals;
  for (const auto& name : {"\xff\xfe bad utf-8"s, "nul\0inside"s, "crlf\r\n*1\r\n$4\r\nPING"s,
                           "with space"s, "{tag}rest"s, "\xc3\xa9t\xc3\xa9"s}) {
    SCOPED_TRACE(::testing::PrintToString(name));
    dlock::mutex m{c, name};
    std::error_code ec;
    EXPECT_TRUE(m.try_lock_for(1s, ec)) << ec.message();
    EXPECT_TRUE(exists(srv, name));
    EXPECT_EQ(srv.command({"TYPE", name}), "+hash");
    m.unlock(ec);
    EXPECT_FALSE(ec) << ec.message();
    EXPECT_FALSE(exists(srv, name));
  }
  const auto keys_before = srv.command({"DBSIZE"});
  for (const auto& name : {"close}only"s, "open{only"s, "x{}y"s}) {
    SCOPED_TRACE(::testing::PrintToString(name));
    dlock::mutex m{c, name};
    expect_refused_on_every_path(m, errc::invalid_argument, 500ms, 100ms, [&] {
      EXPECT_FALSE(exists(srv, name));
      EXPECT_EQ(srv.command({"DBSIZE"}), keys_before);
    });
  }
}

TEST(hostile, non_positive_leases_are_refused_at_once_on_every_form) {
  redis_server srv;
  dlock::client c{config_for(srv)};
  const auto name = dlock::test::unique_name("lock");
  dlock::mutex m{c, name};
  for (const auto lease : {0ms, -1ms, milliseconds::min()}) {
    SCOPED_TRACE(lease.count());
    std::error_code ec;
    const auto start = steady::now();
    m.lock(lease, ec);
    EXPECT_EQ(ec, errc::invalid_argument);
    EXPECT_FALSE(m.try_lock_for(1s, lease, ec));
    EXPECT_EQ(ec, errc::invalid_argument);
    auto f = m.async_lock_for(1s, lease, asio::use_future);
    ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
    EXPECT_THROW(f.get(), std::system_error);
    EXPECT_LT(since(start), 100ms) << "no round trip";
    EXPECT_FALSE(exists(srv, name));
  }
  // A floating-point NaN lease (a division by zero upstream) is refused the same way.
  const std::chrono::duration<double> nan{std::numeric_limits<double>::quiet_NaN()};
  std::error_code ec;
  EXPECT_FALSE(m.try_lock_for(1s, nan, ec));
  EXPECT_EQ(ec, errc::invalid_argument);
  EXPECT_FALSE(exists(srv, name));
}

// A lease too long for Redis (PEXPIRE overflows its clock) or for the steady clock: refused
// before anything is written, never a lock without expiry.
TEST(hostile, a_lease_too_long_to_express_is_refused_and_leaves_no_lock_held) {
  redis_server srv;
  dlock::client c{config_for(srv)};
  const auto name = dlock::test::unique_name("lock");
  dlock::mutex m{c, name};
  std::error_code ec;
  const auto start = steady::now();
  m.lock(milliseconds::max(), ec);
  EXPECT_LT(since(start), prompt);
  EXPECT_EQ(ec, errc::invalid_argument) << ec.message();
  EXPECT_FALSE(exists(srv, name)) << "left held, PTTL " << srv.command({"PTTL", name});
  srv.command({"DEL", name});
}

// Waits: zero or negative is one try (as std::timed_mutex::try_lock_for); a wait too long to
// add to the clock waits as long as lock() does, not zero.
TEST(hostile, non_positive_and_huge_waits_mean_one_try_and_forever) {
  redis_server srv;
  dlock::client holder{config_for(srv)}, waiter{config_for(srv)};
  const auto name = dlock::test::unique_name("lock");
  dlock::mutex h{holder, name}, w{waiter, name};
  for (const auto wait : {0ms, -1ms, milliseconds::min()}) {
    SCOPED_TRACE(wait.count());
    EXPECT_TRUE(w.try_lock_for(wait)) << "free: acquired";
    w.unlock();
    h.lock();
    const auto start = steady::now();
    EXPECT_FALSE(w.try_lock_for(wait)) << "held: one try";
    EXPECT_LT(since(start), prompt);
    h.unlock();
  }
  {
    // A NaN wait is one try too, not undefined behaviour in the conversion.
    const std::chrono::duration<double> nan{std::numeric_limits<double>::quiet_NaN()};
    h.lock();
    const auto start = steady::now();
    EXPECT_FALSE(w.try_lock_for(nan)) << "held: one try";
    EXPECT_LT(since(start), prompt);
    h.unlock();
  }
  h.lock();
  auto t = std::async(std::launch::async, [&] {
    std::error_code ec;
    const bool got = w.try_lock_for(milliseconds::max(), ec);
    if (got) w.unlock();
    return std::pair{got, ec};
  });
  EXPECT_EQ(t.wait_for(300ms), std::future_status::timeout) << "a huge wait returned at once";
  h.unlock();
  ASSERT_EQ(t.wait_for(5s), std::future_status::ready);
  const auto [got, ec] = t.get();
  EXPECT_TRUE(got) << ec.message();
  EXPECT_FALSE(exists(srv, name));
}

TEST(hostile, invalid_configuration_is_typed_at_construction_and_on_every_call) {
  std::error_code ec;
  std::string reason;
  for (const auto* uri :
       {"redis://127.0.0.1:0", "redis://127.0.0.1?timeout=-1s", "redis://h?timeout=1.5s",
        "redis://h?timeout=9999999999999999999ms", "http://h", "redis://h?wat=1"}) {
    SCOPED_TRACE(uri);
    dlock::config::from_uri(uri, ec, reason);
    EXPECT_EQ(ec, errc::invalid_uri);
    EXPECT_FALSE(reason.empty());
  }
  dlock::config bad;
  bad.command_timeout = 0ms;
  EXPECT_THROW(dlock::client{bad}, dlock::lock_error);
  // An unusable client: every call reports why, as ping() does.
  dlock::client c{bad, ec};
  EXPECT_EQ(ec, errc::invalid_uri);
  std::error_code ping_ec;
  c.ping(ping_ec);
  EXPECT_EQ(ping_ec, errc::invalid_uri);
  dlock::mutex m{c, "lock"};
  expect_refused_on_every_path(m, errc::invalid_uri, 500ms, 100ms, [] {});

  // TLS files that cannot be loaded.
  dlock::client tls{dlock::config::from_uri("rediss://127.0.0.1:1?ca=/nonexistent/ca.pem"), ec};
  EXPECT_EQ(ec, errc::tls_config_invalid);
  tls.ping(ping_ec);
  EXPECT_EQ(ping_ec, errc::tls_config_invalid);
  dlock::mutex t{tls, "lock"};
  expect_refused_on_every_path(t, errc::tls_config_invalid, 500ms, 100ms, [] {});
}

}  // namespace
