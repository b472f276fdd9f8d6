// dlock::script through client::eval on a real redis-server: EVALSHA by the text's SHA1, the
// NOSCRIPT reload after SCRIPT FLUSH, Lua errors as typed errors, the async form.
#include <gtest/gtest.h>

#include <asio/use_future.hpp>
#include <string>

#include "dlock/client.hpp"
#include "dlock/script.hpp"
#include "support/redis_server.hpp"
#include "test_util.hpp"

using dlock::errc;

namespace user_script {

// A flash sale's step: one purchase per user while stock lasts.
const dlock::script buy{R"(
if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1 then return -1 end
if tonumber(redis.call('GET', KEYS[1]) or '0') <= 0 then return 0 end
redis.call('DECR', KEYS[1])
redis.call('SADD', KEYS[2], ARGV[1])
return 1)"};

TEST(user_script, runs_by_sha1_the_server_agrees_on) {
  dlock::test::redis_server srv;
  dlock::client c{dlock::test::config_for(srv)};
  EXPECT_EQ(c.execute({"SCRIPT", "LOAD", buy.text()}).str(), buy.sha1());
  EXPECT_EQ(dlock::script{"return 1"}.sha1(), "e0e1f9fabfc9d4800c877a703b823ac0578ff8db");

  const auto stock = dlock::test::unique_name("{sale}:stock"), buyers = stock + ":buyers";
  c.execute({"SET", stock, "2"});
  EXPECT_EQ(c.eval(buy, {stock, buyers}, {"ann"}).integer(), 1);
  EXPECT_EQ(c.eval(buy, {stock, buyers}, {"ann"}).integer(), -1);  // once per user
  EXPECT_EQ(c.eval(buy, {stock, buyers}, {"bob"}).integer(), 1);
  EXPECT_EQ(c.eval(buy, {stock, buyers}, {"cid"}).integer(), 0);  // sold out
  EXPECT_EQ(c.execute({"GET", stock}).str(), "0");
}

TEST(user_script, reloads_the_text_once_after_the_server_forgot_it) {
  dlock::test::redis_server srv;
  dlock::client c{dlock::test::config_for(srv)};
  const dlock::script echo{"return ARGV[1] .. KEYS[1]"};
  EXPECT_EQ(c.eval(echo, {"k"}, {"a"}).str(), "ak");
  c.execute({"SCRIPT", "FLUSH"});
  EXPECT_EQ(c.execute({"SCRIPT", "EXISTS", echo.sha1()}).elements()[0].integer(), 0);
  EXPECT_EQ(c.eval(echo, {"k"}, {"b"}).str(), "bk");  // NOSCRIPT, then EVAL
  EXPECT_EQ(c.execute({"SCRIPT", "EXISTS", echo.sha1()}).elements()[0].integer(), 1);
  EXPECT_EQ(c.eval(echo, {"k"}, {"c"}).str(), "ck");
}

TEST(user_script, a_lua_error_is_a_typed_error_with_the_servers_text) {
  dlock::test::redis_server srv;
  dlock::client c{dlock::test::config_for(srv)};
  std::error_code ec;
  auto r = c.eval(dlock::script{"return redis.call('NOSUCHCOMMAND')"}, {}, {}, ec);
  EXPECT_EQ(ec, errc::server_error);
  EXPECT_NE(r.str().find("Unknown Redis command"), std::string::npos) << r.str();

  r = c.eval(dlock::script{"this is not lua"}, {}, {}, ec);
  EXPECT_EQ(ec, errc::server_error);
  EXPECT_NE(r.str().find("Error compiling script"), std::string::npos) << r.str();

  const auto key = dlock::test::unique_name("h");
  c.execute({"HSET", key, "f", "1"});
  c.eval(dlock::script{"return redis.call('INCR', KEYS[1])"}, {key}, {}, ec);
  EXPECT_EQ(ec, errc::wrong_type);
  try {
    c.eval(dlock::script{"return redis.error_reply('sold out')"}, {}, {});
    ADD_FAILURE() << "no exception";
  } catch (const dlock::lock_error& e) {
    EXPECT_EQ(e.code(), errc::server_error);
    EXPECT_NE(std::string{e.what()}.find("sold out"), std::string::npos) << e.what();
  }
}

TEST(user_script, async_eval_completes_through_a_future) {
  dlock::test::redis_server srv;
  dlock::client c{dlock::test::config_for(srv)};
  const auto key = dlock::test::unique_name("n");
  auto f = c.async_eval(dlock::script{"return redis.call('INCRBY', KEYS[1], ARGV[1])"}, {key},
                        {"5"}, asio::use_future);
  EXPECT_EQ(f.get().integer(), 5);
  c.shutdown();
  std::error_code ec;
  c.eval(buy, {key}, {"x"}, ec);
  EXPECT_EQ(ec, errc::shutdown);
}

}  // namespace user_script
