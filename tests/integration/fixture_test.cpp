// The real-server fixture itself: start, admin commands, pause/resume, restart, kill, TLS
// material and servers, password and ACL servers, several servers at once.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>

#include "support/redis_server.hpp"

using namespace std::chrono_literals;
using dlock::test::command_options;
using dlock::test::redis_server;
using dlock::test::redis_server_options;

namespace {

// True once `pid` no longer exists (it was reaped, not merely a zombie).
bool process_gone(pid_t pid) { return ::kill(pid, 0) != 0 && errno == ESRCH; }

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

// `openssl s_client` against the server; true when the handshake (and verification) succeeds.
bool s_client_ok(std::uint16_t port, std::vector<std::string> extra, std::string* out = nullptr) {
  std::vector<std::string> argv{"openssl",
                                "s_client",
                                "-connect",
                                "127.0.0.1:" + std::to_string(port),
                                "-verify_return_error",
                                "-brief"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return dlock::test::run_program(argv, 20s, out) == 0;
}

std::string read_text(const std::string& path) {
  std::ifstream in{path};
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A listening socket on 127.0.0.1:port, closed on destruction.
class port_holder {
 public:
  explicit port_holder(std::uint16_t port) : fd_{::socket(AF_INET, SOCK_STREAM, 0)} {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ok_ = fd_ >= 0 && ::bind(fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0 &&
          ::listen(fd_, 1) == 0;
  }
  ~port_holder() { release(); }
  port_holder(const port_holder&) = delete;
  port_holder& operator=(const port_holder&) = delete;
  bool ok() const { return ok_; }
  void release() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
  bool ok_ = false;
};

}  // namespace

TEST(fixture, starts_and_answers_ping) {
  redis_server srv;
  EXPECT_NE(srv.port(), 0);
  EXPECT_EQ(srv.plain_port(), srv.port());
  EXPECT_GT(srv.pid(), 0);
  EXPECT_TRUE(srv.running());
  EXPECT_EQ(srv.url(), "redis://127.0.0.1:" + std::to_string(srv.port()));
  EXPECT_EQ(srv.command({"PING"}), "+PONG");
  EXPECT_NE(srv.log().find("Ready to accept connections"), std::string::npos);
  EXPECT_EQ(srv.command({"CONFIG", "GET", "save"}), "[save, ]");
  EXPECT_EQ(srv.command({"CONFIG", "GET", "bind"}), "[bind, 127.0.0.1]");
  EXPECT_EQ(srv.command({"DEBUG", "SLEEP", "0"}), "+OK");  // enable-debug-command local
}

TEST(fixture, command_renders_every_reply_type) {
  redis_server srv;
  EXPECT_EQ(srv.command({"SET", "k", "v"}), "+OK");
  EXPECT_EQ(srv.command({"GET", "k"}), "v");
  EXPECT_EQ(srv.command({"GET", "missing"}), "$-1");
  EXPECT_EQ(srv.command({"INCR", "n"}), ":1");
  EXPECT_EQ(srv.command({"SET", "empty", ""}), "+OK");
  EXPECT_EQ(srv.command({"GET", "empty"}), "");
  EXPECT_EQ(srv.command({"SET", "bin", std::string{"a\r\nb\0c", 6}}), "+OK");
  EXPECT_EQ(srv.command({"GET", "bin"}), std::string("a\r\nb\0c", 6));
  EXPECT_EQ(srv.command({"RPUSH", "l", "a", "b"}), ":2");
  EXPECT_EQ(srv.command({"LRANGE", "l", "0", "-1"}), "[a, b]");
  EXPECT_EQ(srv.command({"LRANGE", "none", "0", "-1"}), "[]");
  EXPECT_EQ(srv.command({"EVAL", "return {1, {'x', false}, 'y'}", "0"}), "[:1, [x, $-1], y]");
  EXPECT_EQ(srv.command({"BLPOP", "none", "0.01"}), "*-1");
  EXPECT_TRUE(starts_with(srv.command({"NO_SUCH_COMMAND"}), "-ERR unknown command"));
  EXPECT_TRUE(starts_with(srv.command({"INCR", "k"}), "-ERR value is not an integer"));
}

TEST(fixture, pause_makes_commands_time_out_and_resume_recovers) {
  redis_server srv;
  srv.pause();
  EXPECT_TRUE(srv.paused());
  EXPECT_TRUE(srv.running());
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(srv.command({"PING"}, {.timeout = 200ms}), std::runtime_error);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  srv.resume();
  EXPECT_FALSE(srv.paused());
  EXPECT_EQ(srv.command({"PING"}), "+PONG");
  srv.resume();  // no-op when not paused
  EXPECT_EQ(srv.command({"PING"}), "+PONG");
}

TEST(fixture, restart_keeps_the_port_and_loses_the_data) {
  redis_server srv;
  const auto port = srv.port();
  const auto old_pid = srv.pid();
  EXPECT_EQ(srv.command({"SET", "k", "v"}), "+OK");
  EXPECT_EQ(srv.command({"SAVE"}), "+OK");  // even a dump.rdb does not survive a restart
  srv.restart();
  EXPECT_EQ(srv.port(), port);
  EXPECT_NE(srv.pid(), old_pid);
  EXPECT_TRUE(process_gone(old_pid));
  EXPECT_EQ(srv.command({"GET", "k"}), "$-1");
  EXPECT_EQ(srv.command({"DBSIZE"}), ":0");
}

TEST(fixture, restart_of_a_paused_server) {
  redis_server srv;
  srv.pause();
  srv.restart();
  EXPECT_FALSE(srv.paused());
  EXPECT_EQ(srv.command({"PING"}), "+PONG");
}

// start() on a taken port retries (bounded by start_timeout) until the port is free again.
TEST(fixture, start_waits_for_its_port_to_be_released) {
  redis_server srv;
  const auto port = srv.port();
  srv.stop();
  port_holder holder{port};
  ASSERT_TRUE(holder.ok());
  std::thread starter{[&] { srv.start(); }};
  const auto saw_conflict = dlock::test::wait_until(
      [&] {
        const auto text =
            read_text(srv.dir() + "/redis.log") + read_text(srv.dir() + "/redis.log.1");
        return text.find("Address already in use") != std::string::npos;
      },
      5s);
  holder.release();
  starter.join();
  EXPECT_TRUE(saw_conflict);
  EXPECT_EQ(srv.port(), port);
  EXPECT_EQ(srv.command({"PING"}), "+PONG");
}

TEST(fixture, kill9_then_start_again_and_destructor_is_safe) {
  std::string dir;
  pid_t pid = -1;
  {
    redis_server srv;
    dir = srv.dir();
    const auto port = srv.port();
    const auto first_pid = srv.pid();
    srv.kill9();
    EXPECT_FALSE(srv.running());
    EXPECT_EQ(srv.pid(), -1);
    EXPECT_TRUE(process_gone(first_pid));
    EXPECT_THROW(srv.command({"PING"}, {.timeout = 500ms}), std::runtime_error);
    srv.kill9();  // idempotent
    srv.stop();
    srv.start();
    EXPECT_EQ(srv.port(), port);
    EXPECT_EQ(srv.command({"PING"}), "+PONG");
    srv.kill9();
    EXPECT_TRUE(std::filesystem::exists(dir));
    srv.start();
    pid = srv.pid();
  }
  EXPECT_TRUE(process_gone(pid));
  EXPECT_FALSE(std::filesystem::exists(dir));
}

TEST(fixture, destructor_stops_a_paused_server_and_removes_its_directory) {
  std::string dir;
  pid_t pid = -1;
  const auto start = std::chrono::steady_clock::now();
  {
    redis_server srv;
    dir = srv.dir();
    pid = srv.pid();
    srv.pause();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_TRUE(process_gone(pid));
  EXPECT_FALSE(std::filesystem::exists(dir));
}

TEST(fixture, stop_is_graceful) {
  redis_server srv;
  const auto pid = srv.pid();
  srv.stop();
  EXPECT_FALSE(srv.running());
  EXPECT_TRUE(process_gone(pid));
  EXPECT_NE(srv.log().find("Redis is now ready to exit"), std::string::npos) << srv.log_tail();
}

TEST(fixture, a_bad_option_fails_with_the_server_output) {
  try {
    redis_server srv{{.extra_args = {"--no-such-directive", "x"}}};
    FAIL() << "started with a bad directive";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string{e.what()}.find("Bad directive"), std::string::npos) << e.what();
  }
}

TEST(fixture, config_lines_are_applied) {
  redis_server srv{{.config_lines = {"maxmemory 7mb", "notify-keyspace-events Ex"}}};
  EXPECT_EQ(srv.command({"CONFIG", "GET", "maxmemory"}), "[maxmemory, 7340032]");
  EXPECT_EQ(srv.command({"CONFIG", "GET", "notify-keyspace-events"}),
            "[notify-keyspace-events, xE]");
}

TEST(fixture, password_server_needs_auth) {
  redis_server srv{{.requirepass = "s3cret"}};
  EXPECT_TRUE(starts_with(srv.command({"PING"}, {.authenticate = false}), "-NOAUTH"));
  EXPECT_EQ(srv.command({"PING"}), "+PONG");
  EXPECT_EQ(srv.command({"CLIENT", "KILL", "TYPE", "pubsub"}), ":0");
  EXPECT_EQ(srv.command({"SCRIPT", "FLUSH"}), "+OK");
  try {
    srv.command({"PING"}, {.password = "wrong"});
    FAIL() << "AUTH with a wrong password succeeded";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string{e.what()}.find("WRONGPASS"), std::string::npos) << e.what();
  }
  // Surviving a restart: the same arguments, so the same password.
  srv.restart();
  EXPECT_TRUE(starts_with(srv.command({"PING"}, {.authenticate = false}), "-NOAUTH"));
  EXPECT_EQ(srv.command({"PING"}), "+PONG");
}

TEST(fixture, acl_file_server_uses_the_admin_user) {
  redis_server srv{{.acl_file_contents = "user default off\n"
                                         "user admin on >adminpw ~* &* +@all\n",
                    .admin_username = "admin",
                    .admin_password = "adminpw"}};
  EXPECT_TRUE(starts_with(srv.command({"PING"}, {.authenticate = false}), "-NOAUTH"));
  EXPECT_EQ(srv.command({"ACL", "WHOAMI"}), "admin");
  EXPECT_EQ(srv.command({"ACL", "SETUSER", "app", "on", ">apppw", "~lock:*", "+@all"}), "+OK");
  EXPECT_EQ(srv.command({"SET", "lock:a", "1"}, {.username = "app", .password = "apppw"}), "+OK");
  EXPECT_TRUE(starts_with(
      srv.command({"SET", "other", "1"}, {.username = "app", .password = "apppw"}), "-NOPERM"));
  // A restart rewrites the ACL file from the options: the user made at run time is gone.
  srv.restart();
  EXPECT_THROW(srv.command({"PING"}, {.username = "app", .password = "apppw"}), std::runtime_error);
  EXPECT_EQ(srv.command({"ACL", "WHOAMI"}), "admin");
}

TEST(fixture, two_servers_at_once_are_independent) {
  redis_server a;
  redis_server b;
  EXPECT_NE(a.port(), b.port());
  EXPECT_NE(a.dir(), b.dir());
  EXPECT_EQ(a.command({"SET", "k", "a"}), "+OK");
  EXPECT_EQ(b.command({"GET", "k"}), "$-1");
  b.kill9();
  EXPECT_EQ(a.command({"GET", "k"}), "a");
}

TEST(fixture, tls_server_with_generated_material) {
  dlock::test::temp_dir td;
  const auto m = dlock::test::make_tls_material(td.path());
  for (const auto* f : {&m.ca_cert, &m.ca_key, &m.server_cert, &m.server_key, &m.other_host_cert,
                        &m.other_host_key, &m.client_cert, &m.client_key, &m.wrong_ca_cert,
                        &m.wrong_ca_key, &m.wrong_client_cert, &m.wrong_client_key}) {
    EXPECT_TRUE(std::filesystem::exists(*f)) << *f;
  }

  redis_server srv{{.tls = true,
                    .tls_cert_file = m.server_cert,
                    .tls_key_file = m.server_key,
                    .tls_ca_file = m.ca_cert}};
  EXPECT_EQ(srv.url(), "rediss://127.0.0.1:" + std::to_string(srv.port()));
  EXPECT_EQ(srv.plain_port(), 0);
  EXPECT_NE(srv.log().find("Ready to accept connections"), std::string::npos);
  EXPECT_THROW(srv.command({"PING"}), std::runtime_error);  // no plain admin port

  std::string out;
  EXPECT_TRUE(s_client_ok(srv.port(), {"-CAfile", m.ca_cert, "-verify_ip", "127.0.0.1"}, &out))
      << out;
  EXPECT_TRUE(
      s_client_ok(srv.port(), {"-CAfile", m.ca_cert, "-verify_hostname", "localhost"}, &out))
      << out;
  EXPECT_FALSE(s_client_ok(srv.port(), {"-CAfile", m.wrong_ca_cert}, &out)) << out;
  EXPECT_FALSE(s_client_ok(srv.port(),
                           {"-CAfile", m.ca_cert, "-verify_hostname", "elsewhere.invalid"}, &out))
      << out;

  // The other-host certificate chains to the CA but names only elsewhere.invalid.
  redis_server other{{.tls = true,
                      .tls_cert_file = m.other_host_cert,
                      .tls_key_file = m.other_host_key,
                      .tls_ca_file = m.ca_cert}};
  EXPECT_TRUE(s_client_ok(other.port(), {"-CAfile", m.ca_cert}, &out)) << out;
  EXPECT_TRUE(s_client_ok(other.port(),
                          {"-CAfile", m.ca_cert, "-verify_hostname", "elsewhere.invalid"}, &out))
      << out;
  EXPECT_FALSE(s_client_ok(other.port(), {"-CAfile", m.ca_cert, "-verify_ip", "127.0.0.1"}, &out))
      << out;
}

TEST(fixture, tls_server_with_client_certificates_and_a_plain_admin_port) {
  dlock::test::temp_dir td;
  const auto m = dlock::test::make_tls_material(td.path());
  redis_server srv{{.requirepass = "pw",
                    .tls = true,
                    .tls_cert_file = m.server_cert,
                    .tls_key_file = m.server_key,
                    .tls_ca_file = m.ca_cert,
                    .tls_auth_clients = "yes",
                    .tls_plain_admin_port = true}};
  EXPECT_NE(srv.plain_port(), 0);
  EXPECT_NE(srv.plain_port(), srv.port());
  EXPECT_EQ(srv.command({"PING"}), "+PONG");
  EXPECT_EQ(srv.command({"CONFIG", "GET", "tls-port"}),
            "[tls-port, " + std::to_string(srv.port()) + "]");

  std::string out;
  // TLS 1.2 so that a rejected client certificate fails the handshake itself.
  EXPECT_TRUE(s_client_ok(
      srv.port(), {"-tls1_2", "-CAfile", m.ca_cert, "-cert", m.client_cert, "-key", m.client_key},
      &out))
      << out;
  EXPECT_FALSE(s_client_ok(srv.port(), {"-tls1_2", "-CAfile", m.ca_cert}, &out)) << out;
  EXPECT_FALSE(s_client_ok(
      srv.port(),
      {"-tls1_2", "-CAfile", m.ca_cert, "-cert", m.wrong_client_cert, "-key", m.wrong_client_key},
      &out))
      << out;

  const auto port = srv.port(), admin = srv.plain_port();
  srv.restart();
  EXPECT_EQ(srv.port(), port);
  EXPECT_EQ(srv.plain_port(), admin);
  EXPECT_EQ(srv.command({"PING"}), "+PONG");
}

TEST(fixture, free_port_and_wait_until) {
  const auto p = dlock::test::free_port();
  EXPECT_NE(p, 0);

  int calls = 0;
  EXPECT_TRUE(dlock::test::wait_until([&] { return ++calls >= 3; }, 5s));
  EXPECT_EQ(calls, 3);

  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(dlock::test::wait_until([] { return false; }, 50ms));
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, 50ms);
  EXPECT_LT(took, 5s);
}

TEST(fixture, send_command_to_a_closed_port_fails_fast) {
  const auto p = dlock::test::free_port();
  EXPECT_THROW(dlock::test::send_command(p, {"PING"}, {.timeout = 1s}), std::runtime_error);
}
