// dlock::errc, its category, classify_error_reply and is_retryable.
#include "dlock/error.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace {

using dlock::errc;

// Every errc value, first to last.
const std::vector<errc>& all_codes() {
  static const std::vector<errc> codes = [] {
    std::vector<errc> out;
    for (int v = static_cast<int>(errc::not_owner); v <= static_cast<int>(errc::upgrade_refused);
         ++v) {
      out.push_back(static_cast<errc>(v));
    }
    return out;
  }();
  return codes;
}

const std::set<errc>& retryable_codes() {
  static const std::set<errc> codes{
      errc::timeout,
      errc::resolve_failed,
      errc::connection_refused,
      errc::connect_timeout,
      errc::connection_lost,
      errc::moved,
      errc::ask,
      errc::try_again,
      errc::cluster_down,
      errc::loading,
      errc::busy,
      errc::master_down,
      errc::no_replicas,
      errc::read_only,
      errc::no_script,
      errc::max_clients,
  };
  return codes;
}

struct reply_case {
  std::string_view text;
  errc expected;
};

// Verbatim Redis 7.0.15 error replies (without the leading '-').
constexpr reply_case redis_replies[] = {
    {"NOSCRIPT No matching script. Please use EVAL.", errc::no_script},
    {"WRONGTYPE Operation against a key holding the wrong kind of value", errc::wrong_type},
    {"WRONGTYPE Operation against a key holding the wrong kind of value script: 0123abcd, on "
     "@user_script:1.",
     errc::wrong_type},
    {"OOM command not allowed when used memory > 'maxmemory'.", errc::out_of_memory},
    {"BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.",
     errc::busy},
    {"UNKILLABLE Sorry the script already executed write commands against the dataset.",
     errc::unkillable},
    {"READONLY You can't write against a read only replica.", errc::read_only},
    {"MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
     errc::master_down},
    {"NOREPLICAS Not enough good replicas to write.", errc::no_replicas},
    {"LOADING Redis is loading the dataset in memory", errc::loading},
    {"ERR max number of clients reached", errc::max_clients},
    {"MOVED 3999 127.0.0.1:6381", errc::moved},
    {"ASK 3999 127.0.0.1:6381", errc::ask},
    {"TRYAGAIN Multiple keys request during rehashing of slot", errc::try_again},
    {"CROSSSLOT Keys in request don't hash to the same slot", errc::cross_slot},
    {"CLUSTERDOWN The cluster is down", errc::cluster_down},
    {"NOAUTH Authentication required.", errc::no_auth},
    {"WRONGPASS invalid username-password pair or user is disabled.", errc::auth_failed},
    {"NOPERM this user has no permissions to run the 'get' command", errc::no_permission},
    {"NOPERM this user has no permissions to access one of the channels used as arguments",
     errc::no_permission},
    {"ERR The user executing the script can't publish to the channel mentioned in the command "
     "script: 33c1b5b00ea684c0118656851ad8206f1064f6bf, on @user_script:1.",
     errc::no_permission},
    {"ERR unknown command 'FOO'", errc::server_error},
};

TEST(classify_error_reply, maps_every_redis_reply_to_its_code) {
  for (const auto& c : redis_replies) {
    EXPECT_EQ(dlock::classify_error_reply(c.text), c.expected) << c.text;
  }
}

TEST(classify_error_reply, retryability_of_every_redis_reply) {
  for (const auto& c : redis_replies) {
    const std::error_code ec = dlock::classify_error_reply(c.text);
    EXPECT_EQ(dlock::is_retryable(ec), retryable_codes().count(c.expected) == 1) << c.text;
  }
}

TEST(classify_error_reply, transient_replies_are_retryable) {
  for (std::string_view text :
       {"MOVED 3999 127.0.0.1:6381", "ASK 3999 127.0.0.1:6381",
        "TRYAGAIN Multiple keys request during rehashing of slot",
        "CLUSTERDOWN The cluster is down", "LOADING Redis is loading the dataset in memory",
        "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.",
        "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
        "NOREPLICAS Not enough good replicas to write.",
        "READONLY You can't write against a read only replica.",
        "NOSCRIPT No matching script. Please use EVAL.", "ERR max number of clients reached"}) {
    EXPECT_TRUE(dlock::is_retryable(dlock::classify_error_reply(text))) << text;
  }
}

TEST(classify_error_reply, permanent_replies_are_not_retryable) {
  for (std::string_view text :
       {"WRONGTYPE Operation against a key holding the wrong kind of value",
        "OOM command not allowed when used memory > 'maxmemory'.",
        "UNKILLABLE Sorry the script already executed write commands against the dataset.",
        "CROSSSLOT Keys in request don't hash to the same slot", "NOAUTH Authentication required.",
        "WRONGPASS invalid username-password pair or user is disabled.",
        "NOPERM this user has no permissions to run the 'get' command",
        "ERR unknown command 'FOO'"}) {
    EXPECT_FALSE(dlock::is_retryable(dlock::classify_error_reply(text))) << text;
  }
}

TEST(classify_error_reply, garbage_is_a_server_error) {
  for (std::string_view text : {"", " ", "garbage", "moved 1 2", "MOVEDX 1 2", "NOPERMISSION x",
                                "-ERR x", "\r\n", "ERRx max number of clients reached"}) {
    EXPECT_EQ(dlock::classify_error_reply(text), errc::server_error) << '"' << text << '"';
  }
}

TEST(classify_error_reply, similar_code_words_are_not_confused) {
  EXPECT_EQ(dlock::classify_error_reply("BUSYKEY Target key name already exists."),
            errc::server_error);
  EXPECT_EQ(dlock::classify_error_reply("BUSYGROUP Consumer Group name already exists"),
            errc::server_error);
  EXPECT_EQ(dlock::classify_error_reply("NOTBUSY No scripts in execution right now."),
            errc::server_error);
  EXPECT_EQ(dlock::classify_error_reply("EXECABORT Transaction discarded because of previous "
                                        "errors."),
            errc::server_error);
  EXPECT_EQ(dlock::classify_error_reply("ERR Error running script (call to f_0123): "
                                        "@user_script:1: WRONGTYPE Operation against a key"),
            errc::server_error);
  EXPECT_FALSE(dlock::is_retryable(dlock::classify_error_reply("NOTBUSY No scripts")));
}

TEST(classify_error_reply, code_word_alone_is_classified) {
  EXPECT_EQ(dlock::classify_error_reply("MOVED"), errc::moved);
  EXPECT_EQ(dlock::classify_error_reply("NOSCRIPT"), errc::no_script);
  EXPECT_EQ(dlock::classify_error_reply("ERR"), errc::server_error);
}

TEST(is_retryable, matches_the_documented_set_for_every_code) {
  for (errc e : all_codes()) {
    EXPECT_EQ(dlock::is_retryable(e), retryable_codes().count(e) == 1)
        << dlock::make_error_code(e).message();
  }
}

TEST(is_retryable, lock_outcomes_and_bad_input_are_not_retryable) {
  for (errc e : {errc::not_owner, errc::lease_lost, errc::invalid_argument, errc::invalid_uri,
                 errc::wrong_type, errc::out_of_memory, errc::no_auth, errc::auth_failed,
                 errc::no_permission, errc::cross_slot, errc::unkillable, errc::server_error}) {
    EXPECT_FALSE(dlock::is_retryable(e)) << dlock::make_error_code(e).message();
  }
}

TEST(is_retryable, non_dlock_codes_are_not_retryable) {
  EXPECT_FALSE(dlock::is_retryable(std::error_code{}));
  EXPECT_FALSE(dlock::is_retryable(std::make_error_code(std::errc::timed_out)));
  EXPECT_FALSE(dlock::is_retryable(std::make_error_code(std::errc::connection_refused)));
  // Same numeric value as errc::timeout, other category.
  EXPECT_FALSE(dlock::is_retryable(
      std::error_code{static_cast<int>(errc::timeout), std::generic_category()}));
}

TEST(error_category, is_named_dlock) {
  EXPECT_STREQ(dlock::error_category().name(), "dlock");
  EXPECT_EQ(&dlock::make_error_code(errc::timeout).category(), &dlock::error_category());
}

TEST(error_category, every_code_has_its_own_message) {
  const std::string unknown = "unknown dlock error";
  std::set<std::string> seen;
  for (errc e : all_codes()) {
    const auto msg = dlock::make_error_code(e).message();
    EXPECT_FALSE(msg.empty()) << static_cast<int>(e);
    EXPECT_NE(msg, unknown) << static_cast<int>(e);
    EXPECT_TRUE(seen.insert(msg).second) << "duplicate message: " << msg;
  }
  EXPECT_EQ(dlock::error_category().message(0), unknown);
  EXPECT_EQ(dlock::error_category().message(static_cast<int>(errc::upgrade_refused) + 1), unknown);
}

TEST(error_code, compares_with_errc) {
  std::error_code ec = errc::timeout;
  EXPECT_TRUE(ec);
  EXPECT_TRUE(ec == errc::timeout);
  EXPECT_FALSE(ec != errc::timeout);
  EXPECT_FALSE(ec == errc::connect_timeout);
  EXPECT_EQ(ec.value(), static_cast<int>(errc::timeout));
  EXPECT_FALSE(std::make_error_code(std::errc::timed_out) == errc::timeout);
}

TEST(lock_error, is_a_system_error_with_code_and_detail) {
  const dlock::lock_error e{errc::not_owner, "lock 'orders' held by someone else"};
  const std::system_error& base = e;
  EXPECT_EQ(base.code(), errc::not_owner);
  const std::string what = base.what();
  EXPECT_NE(what.find("lock 'orders' held by someone else"), std::string::npos) << what;
}

TEST(lock_error, without_detail_carries_the_message) {
  const dlock::lock_error e{errc::lease_lost};
  EXPECT_EQ(e.code(), errc::lease_lost);
  EXPECT_NE(std::string(e.what()).find(dlock::make_error_code(errc::lease_lost).message()),
            std::string::npos);
}

TEST(lock_error, throw_if_throws_only_when_set) {
  EXPECT_NO_THROW(dlock::throw_if(std::error_code{}));
  try {
    dlock::throw_if(errc::shutdown);
    FAIL() << "throw_if did not throw";
  } catch (const dlock::lock_error& e) {
    EXPECT_EQ(e.code(), errc::shutdown);
  }
}

}  // namespace
