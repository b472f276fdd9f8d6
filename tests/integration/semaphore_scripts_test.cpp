// The contracts of the semaphore and latch scripts (permit_acquire.lua, permit_release.lua,
// counting_acquire.lua, semaphore_update.lua, latch_check.lua, latch_update.lua, and
// lock_renew.lua's `p` holds) against a real server, in Redisson's layouts: idempotent resends,
// exact give-backs, reclaim by server time, and the messages each publishes.
#include <gtest/gtest.h>

#include "family_lab.hpp"

using namespace std::chrono_literals;

namespace semaphore_scripts_tests {

using dlock::test::code;
using dlock::test::eval;
using dlock::test::listener;
using dlock::test::show;
using dlock::test::value;
namespace scripts = dlock::scripts;
namespace keys = dlock::keys;

// An integer reply's value; -99 for anything else.
std::int64_t number(const dlock::test::result& r) {
  return !r.ec && r.r.is_integer() ? r.r.integer() : -99;
}

class semaphore_scripts : public testing::Test {
 protected:
  dlock::test::result acquire(const std::string& ids, const std::string& lease = "30000") {
    return eval(f_.base.c, scripts::permit_acquire, {name, timeouts}, {lease, ids, channel, "0"});
  }
  dlock::test::result release(const std::string& ids) {
    return eval(f_.base.c, scripts::permit_release, {name, timeouts}, {ids, channel, "0"});
  }
  dlock::test::result update(const std::string& op, const std::string& n, bool leased = true) {
    if (!leased) return eval(f_.base.c, scripts::semaphore_update, {name}, {op, n, channel, "0"});
    return eval(f_.base.c, scripts::semaphore_update, {name, timeouts}, {op, n, channel, "0"});
  }
  std::string cmd(const std::vector<std::string>& args) const { return f_.cmd(args); }

  dlock::test::redis_server srv_;
  dlock::test::family_lab f_{srv_};
  const std::string& name = f_.name;
  const std::string timeouts = keys::permit_timeouts(name);
  const std::string channel = keys::semaphore_channel(name);
  const std::string a = std::string(16, 'a'), b = std::string(16, 'b'), c = std::string(16, 'c');
};

TEST_F(semaphore_scripts, permits_are_leased_by_server_time_and_a_resend_takes_nothing_more) {
  listener redisson{srv_, {channel}};
  EXPECT_EQ(show(acquire(a)), "[1, -1]") << "no counter: none available, none to wait for";
  EXPECT_EQ(number(update("set", "2")), 1);
  EXPECT_EQ(redisson.heard(), channel + "=2 ");
  EXPECT_EQ(show(acquire(a + b)), "[0, 0]");
  EXPECT_EQ(cmd({"GET", name}), "0");
  EXPECT_EQ(show(acquire(a + b)), "[0, 0]") << "a resend of an applied attempt";
  EXPECT_EQ(cmd({"GET", name}), "0") << "nothing taken twice";
  EXPECT_EQ(cmd({"ZCARD", timeouts}), ":2");
  const auto left = code(acquire(c));
  EXPECT_EQ(left, 1) << "too few";
  const auto wait = value(acquire(c));
  EXPECT_GT(wait, 29'000) << "ms to the nearest deadline";
  EXPECT_LE(wait, 30'000);
  EXPECT_EQ(show(release(a + b)), "1");
  EXPECT_EQ(redisson.heard(), channel + "=2 ") << "the count after the release";
  EXPECT_EQ(release(a + b).r.is_nil(), true) << "released already: the lease is lost";
  EXPECT_EQ(cmd({"GET", name}), "2") << "never added twice";
}

// A resend finds the ids its first send leased: their deadline is set again from now, as the
// client trusts them from the resend; ids of which only some are left go back and start over.
TEST_F(semaphore_scripts, a_resend_renews_its_permits_or_starts_over_when_some_are_gone) {
  update("set", "2");
  EXPECT_EQ(show(acquire(a + b, "1000")), "[0, 0]");
  EXPECT_EQ(show(acquire(a + b, "60000")), "[0, 0]");
  const auto now_ms = std::stoll(f_.base.c.execute({"TIME"}).elements()[0].str()) * 1000;
  EXPECT_GT(f_.score(timeouts, a), now_ms + 50'000) << "the resend's deadline";
  EXPECT_GT(f_.score(timeouts, b), now_ms + 50'000);
  EXPECT_EQ(cmd({"GET", name}), "0") << "nothing taken twice";
  cmd({"ZREM", timeouts, b});  // reclaimed (by a reclaim capped short of it, say)
  cmd({"INCRBY", name, "1"});
  EXPECT_EQ(show(acquire(a + b)), "[0, 0]");
  EXPECT_EQ(cmd({"GET", name}), "0") << "a went back, then both were taken";
  EXPECT_EQ(cmd({"ZCARD", timeouts}), ":2");
}

TEST_F(semaphore_scripts, expired_permits_come_back_once_and_their_release_reports_it) {
  update("set", "1");
  EXPECT_EQ(show(acquire(a, "100")), "[0, 0]");
  std::this_thread::sleep_for(150ms);
  listener redisson{srv_, {channel}};
  EXPECT_EQ(number(update("available", "0")), 1) << "reclaimed by this call";
  EXPECT_EQ(redisson.heard(), channel + "=1 ");
  EXPECT_TRUE(release(a).r.is_nil());
  EXPECT_EQ(number(update("available", "0")), 1);
  // Expired but not yet reclaimed: the release returns it once and still reports the loss.
  EXPECT_EQ(show(acquire(b, "100")), "[0, 0]");
  std::this_thread::sleep_for(150ms);
  EXPECT_TRUE(release(b).r.is_nil());
  EXPECT_EQ(number(update("available", "0")), 1);
  // Redisson's permits without a lease never expire, and are nothing to wait for.
  cmd({"ZADD", timeouts, "922337203685477", c});
  cmd({"SET", name, "0"});
  EXPECT_EQ(show(acquire(a)), "[1, -1]");
  EXPECT_EQ(number(update("leased", "0")), 1);
}

TEST_F(semaphore_scripts, renewal_extends_live_permits_and_finds_lost_ones) {
  update("set", "2");
  acquire(a + b, "1000");
  std::vector<std::string_view> keys{name};
  const auto renewed = eval(f_.base.c, scripts::lock_renew, keys, {"60000", "p" + a + b});
  EXPECT_EQ(show(renewed), "[60000]");
  EXPECT_GT(f_.score(timeouts, a), 0);
  const auto checked = eval(f_.base.c, scripts::lock_renew, keys, {"0", "p" + a + b});
  EXPECT_GT(std::stoll(show(checked).substr(1)), 59'000) << show(checked);
  cmd({"ZREM", timeouts, b});
  EXPECT_EQ(show(eval(f_.base.c, scripts::lock_renew, keys, {"60000", "p" + a + b})), "[-2]");
  cmd({"SET", timeouts, "x"});
  EXPECT_EQ(show(eval(f_.base.c, scripts::lock_renew, keys, {"60000", "p" + a})), "[-2]");
}

TEST_F(semaphore_scripts, a_counting_attempt_is_idempotent_and_its_undo_exact) {
  const auto marker = keys::counting_marker(name, "C:1");
  const auto take = [&] {
    return eval(f_.base.c, scripts::counting_acquire, {name, marker}, {"2", "30000"});
  };
  const auto undo = [&] {
    return eval(f_.base.c, scripts::semaphore_update, {name, marker}, {"undo", "0", channel, "0"});
  };
  EXPECT_EQ(show(take()), "[1, -1]");
  update("set", "3", false);
  EXPECT_EQ(show(take()), "[0, 0]");
  EXPECT_EQ(show(take()), "[0, 0]") << "a resend";
  EXPECT_EQ(cmd({"GET", name}), "1");
  listener redisson{srv_, {channel}};
  EXPECT_EQ(show(undo()), "1");
  EXPECT_TRUE(undo().r.is_nil()) << "undone once";
  EXPECT_EQ(cmd({"GET", name}), "3");
  EXPECT_EQ(redisson.heard(), channel + "=3 ");
  EXPECT_EQ(number(update("release", "2", false)), 5);
  EXPECT_EQ(number(update("add", "-4", false)), 1);
  EXPECT_EQ(redisson.heard(), channel + "=5 ") << "a negative add publishes nothing";
  cmd({"SET", name, "lots"});
  EXPECT_TRUE(update("available", "0", false).ec) << "not a permit count";
}

TEST_F(semaphore_scripts, a_latch_opens_at_zero_or_below_and_says_so_once) {
  const auto latch_channel = keys::latch_channel(name);
  const auto check = [&] { return eval(f_.base.c, scripts::latch_check, {name}, {}); };
  const auto update_latch = [&](const std::string& op, const std::string& n) {
    return eval(f_.base.c, scripts::latch_update, {name}, {op, n, latch_channel, "0"});
  };
  listener redisson{srv_, {latch_channel}};
  EXPECT_EQ(show(check()), "[0, 0]") << "absent: open";
  EXPECT_EQ(number(update_latch("set", "2")), 1);
  EXPECT_EQ(number(update_latch("set", "5")), 0);
  EXPECT_EQ(show(check()), "[1, -1]");
  EXPECT_EQ(number(update_latch("down", "1")), 1);
  EXPECT_EQ(number(update_latch("down", "3")), 0) << "past zero";
  EXPECT_EQ(cmd({"EXISTS", name}), ":0");
  EXPECT_EQ(number(update_latch("down", "1")), 0);
  EXPECT_EQ(redisson.heard(), latch_channel + "=1 " + latch_channel + "=0 ")
      << "`1` on set, `0` once on opening";
  cmd({"SET", name, "4", "PX", "5000"});
  const auto expiring = check();
  EXPECT_EQ(code(expiring), 1);
  EXPECT_GT(value(expiring), 4000) << "wakes at the key's expiry";
  EXPECT_EQ(number(update_latch("down", "1")), 3);
  EXPECT_GT(std::stoll(cmd({"PTTL", name}).substr(1)), 4000) << "the expiry is kept";
  EXPECT_EQ(number(update_latch("count", "0")), 3);
  cmd({"SET", name, "abc"});
  EXPECT_TRUE(update_latch("down", "1").ec) << "not a count: an error, never deleted";
  EXPECT_TRUE(update_latch("count", "0").ec);
  EXPECT_EQ(cmd({"GET", name}), "abc");
}

}  // namespace semaphore_scripts_tests
