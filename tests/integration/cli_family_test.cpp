// The `dlock` command (tools/dlock) with the other lock kinds, against real redis-server
// processes: `exec --fair` serving queued execs in arrival order, `exec --shared` holds
// overlapping while an `exec --rw` waits (and holds back new readers), a name of another kind
// refused, `status` (text and --json) for the fair and read-write layouts, `unlock --force`
// waking the waiters of each kind, and bad flag combinations. (Helpers: cli_helpers.hpp.)
//
// Orders are shown by the commands themselves (a command checks, when it starts, the marker
// files of those that must have run before it), never by timing.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "cli_helpers.hpp"
#include "cli_json.hpp"
#include "dlock/error.hpp"
#include "dlock/fair_mutex.hpp"
#include "dlock/keys.hpp"
#include "dlock/mutex.hpp"
#include "dlock/shared_mutex.hpp"
#include "support/redis_server.hpp"
#include "test_util.hpp"

using namespace dlock::test;
using namespace dlock::test::cli;

// A named namespace, not an anonymous one: unity builds merge the anonymous namespaces of the
// test files.
namespace cli_family_test {

// A shell function `w FILE`: waits for FILE to exist, for at most 10 s (then exit 3).
const std::string wait_fn =
    "w() { i=0; while [ ! -e \"$1\" ]; do [ $i -ge 200 ] && exit 3; sleep 0.05; i=$((i+1)); "
    "done; };";

const std::vector<std::string> top_keys = {
    "name", "held", "holders", "remaining_lease_ms", "fencing_counter", "queued", "subscribers"};

std::vector<std::string> with_keys(std::vector<std::string> keys,
                                   const std::vector<std::string>& more) {
  keys.insert(keys.end(), more.begin(), more.end());
  return keys;
}

// The elements of a flat array reply as the fixture renders it ("[a, b, c]").
std::vector<std::string> items(const std::string& rendered) {
  std::vector<std::string> out;
  if (rendered.size() < 2 || rendered == "[]") return out;
  const auto inner = rendered.substr(1, rendered.size() - 2);
  for (std::size_t at = 0;;) {
    const auto end = inner.find(", ", at);
    out.push_back(inner.substr(at, end - at));
    if (end == std::string::npos) return out;
    at = end + 2;
  }
}

bool file_exists(const std::string& path) { return std::ifstream{path}.good(); }

std::string read_file(const std::string& path) {
  std::ifstream in{path};
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::int64_t integer_reply(const std::string& rendered) {  // ":3" -> 3
  return rendered.size() > 1 && rendered[0] == ':' ? std::stoll(rendered.substr(1)) : -1;
}

// Waits up to 10 s for a count (`LLEN key`, `ZCARD key`...) to reach `n`.
bool count_reaches(const redis_server& srv, const std::vector<std::string>& command,
                   std::int64_t n) {
  return wait_until([&] { return integer_reply(srv.command(command)) == n; }, 10s);
}

// -- exec --fair ----------------------------------------------------------------------------------

// `status` of a fair lock held by `pid` with `owners` queued: the queue in order, each entry
// with its time left.
void expect_fair_status(const redis_server& srv, const std::string& name, std::int64_t pid,
                        const std::vector<std::string>& owners) {
  auto r = run_dlock({"--url", srv.url(), "status", "--json", name});
  EXPECT_EQ(r.code, std::optional<int>{0}) << describe(r);
  const auto j = parse_json(r.out);
  EXPECT_EQ(j.keys(), with_keys(top_keys, {"kind", "fair_queue", "fair_queue_length"}));
  EXPECT_EQ(j.at("kind").text, "fair");
  ASSERT_EQ(j.at("holders").items.size(), 1u) << r.out;
  EXPECT_EQ(j.at("holders").items[0].keys(),
            (std::vector<std::string>{"owner", "count", "host", "pid", "command", "acquired_at"}))
      << "no mode: not a read-write lock";
  EXPECT_EQ(j.at("holders").items[0].at("pid").integer(), pid);
  const auto n = static_cast<std::int64_t>(owners.size());
  EXPECT_EQ(j.at("fair_queue_length").integer(), n);
  ASSERT_EQ(j.at("fair_queue").items.size(), owners.size()) << r.out;
  for (std::size_t i = 0; i < owners.size(); ++i) {
    const auto& e = j.at("fair_queue").items[i];
    EXPECT_EQ(e.keys(), (std::vector<std::string>{"owner", "expires_in_ms"}));
    EXPECT_EQ(e.at("owner").text, owners[i]) << "in queue order";
    EXPECT_GT(e.at("expires_in_ms").integer(), 0);
    EXPECT_LE(e.at("expires_in_ms").integer(), 5000) << "re-check 3 s + purge bound 2 s";
  }
  EXPECT_EQ(j.at("queued").integer(), 0) << "a mutex's queue: none";
  EXPECT_EQ(j.at("subscribers").integer(), n) << "each waiter on its own channel";

  r = run_dlock({"--url", srv.url(), "status", name});
  EXPECT_EQ(r.code, std::optional<int>{0}) << describe(r);
  EXPECT_EQ(r.out.rfind(name + ": held\n  kind: fair lock\n", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("\n  fair queue: " + std::to_string(n) + "\n"), std::string::npos) << r.out;
  for (std::size_t i = 0; i < owners.size(); ++i) {
    const auto line = "\n    " + std::to_string(i + 1) + ". " + owners[i] + " (entry expires in ";
    EXPECT_NE(r.out.find(line), std::string::npos) << r.out;
  }
  EXPECT_NE(r.out.find("waiting subscribers: " + std::to_string(n) + "\n"), std::string::npos)
      << r.out;
}

TEST(cli_family, fair_execs_run_in_the_order_they_queued) {
  redis_server srv;
  temp_dir dir;
  const auto name = unique_name("cli-fair");
  const auto order = dir.path() + "/order", go = dir.path() + "/go";
  const auto queue = dlock::keys::fair_queue(name);
  dlock_process first{{"--url", srv.url(), "exec", "--fair", name, "--", sh, "-c",
                       wait_fn + " echo A >> " + order + "; echo ready; w " + go}};
  ASSERT_EQ(first->read_line(10s), std::optional<std::string>{"ready"}) << first->diagnostics();

  // Each starts once the one before it is in the queue.
  std::vector<std::unique_ptr<dlock_process>> waiting;
  for (const char* letter : {"B", "C", "D"}) {
    waiting.push_back(std::make_unique<dlock_process>(
        std::vector<std::string>{"--url", srv.url(), "exec", "--fair", name, "--", sh, "-c",
                                 std::string{"echo "} + letter + " >> " + order}));
    const auto n = static_cast<std::int64_t>(waiting.size());
    ASSERT_TRUE(count_reaches(srv, {"LLEN", queue}, n))
        << letter << " queued; " << (*waiting.back())->diagnostics();
  }
  const auto owners = items(srv.command({"LRANGE", queue, "0", "-1"}));
  ASSERT_EQ(owners.size(), 3u);
  for (const auto& owner : owners) {
    const auto channel = dlock::keys::fair_waiter_channel(name, owner);
    ASSERT_TRUE(wait_until([&] { return numsub(srv, channel) == 1; }, 10s)) << owner;
  }
  expect_fair_status(srv, name, first->pid(), owners);

  std::ofstream{go}.put('\n');
  EXPECT_EQ(first->wait_exit(10s), std::optional<int>{0}) << first->diagnostics();
  for (auto& p : waiting) {
    EXPECT_EQ((*p)->wait_exit(10s), std::optional<int>{0}) << (*p)->diagnostics();
  }
  EXPECT_EQ(read_file(order), "A\nB\nC\nD\n");
  EXPECT_EQ(exists(srv, name), ":0");
  EXPECT_EQ(exists(srv, queue), ":0");
}

// -- exec --shared / --rw -------------------------------------------------------------------------

// `status` of a read-write lock read by `pids` (dlock execs) while `writer` waits.
void expect_read_status(const redis_server& srv, const std::string& name,
                        std::vector<std::int64_t> pids, const std::string& writer) {
  auto r = run_dlock({"--url", srv.url(), "status", "--json", name});
  EXPECT_EQ(r.code, std::optional<int>{0}) << describe(r);
  const auto j = parse_json(r.out);
  EXPECT_EQ(j.keys(),
            with_keys(top_keys, {"kind", "mode", "waiting_writers", "waiting_writers_count"}));
  EXPECT_EQ(j.at("kind").text, "rwlock");
  EXPECT_EQ(j.at("mode").text, "read");
  std::vector<std::int64_t> seen;
  for (const auto& h : j.at("holders").items) {
    EXPECT_EQ(h.keys(), (std::vector<std::string>{"owner", "count", "mode", "host", "pid",
                                                  "command", "acquired_at"}));
    EXPECT_EQ(h.at("mode").text, "read");
    EXPECT_EQ(h.at("count").integer(), 1);
    seen.push_back(h.at("pid").integer());
  }
  std::sort(seen.begin(), seen.end());
  std::sort(pids.begin(), pids.end());
  EXPECT_EQ(seen, pids) << r.out;
  EXPECT_EQ(j.at("waiting_writers_count").integer(), 1);
  ASSERT_EQ(j.at("waiting_writers").items.size(), 1u);
  EXPECT_EQ(j.at("waiting_writers").items[0].at("owner").text, writer);
  EXPECT_GT(j.at("waiting_writers").items[0].at("expires_in_ms").integer(), 0);
  EXPECT_EQ(j.at("subscribers").integer(), 1) << "the writer, on the read-write channel";

  r = run_dlock({"--url", srv.url(), "status", name});
  EXPECT_EQ(r.code, std::optional<int>{0}) << describe(r);
  EXPECT_EQ(r.out.rfind(name + ": held\n  kind: read-write lock, mode read\n", 0), 0u) << r.out;
  EXPECT_NE(r.out.find(" (count 1, read)\n    host "), std::string::npos) << r.out;
  const auto writers = "\n  waiting writers: 1\n    " + writer + " (entry expires in ";
  EXPECT_NE(r.out.find(writers), std::string::npos) << r.out;
}

// `status` of a read-write lock written by `writer` (a dlock exec, `pid`): its field is
// <owner>:write, shown as the owner marked `write`.
void expect_write_status(const redis_server& srv, const std::string& name, std::int64_t pid,
                         const std::string& writer) {
  auto r = run_dlock({"--url", srv.url(), "status", "--json", name});
  EXPECT_EQ(r.code, std::optional<int>{0}) << describe(r);
  const auto j = parse_json(r.out);
  EXPECT_EQ(j.at("mode").text, "write");
  ASSERT_EQ(j.at("holders").items.size(), 1u) << r.out;
  const auto& h = j.at("holders").items[0];
  EXPECT_EQ(h.at("owner").text, writer);
  EXPECT_EQ(h.at("mode").text, "write");
  EXPECT_EQ(h.at("pid").integer(), pid);
  EXPECT_EQ(srv.command({"HGET", name, writer + ":write"}), "1");
  EXPECT_EQ(j.at("waiting_writers_count").integer(), 0);
  r = run_dlock({"--url", srv.url(), "status", name});
  EXPECT_NE(r.out.find("  holder " + writer + " (count 1, write)\n"), std::string::npos) << r.out;
}

TEST(cli_family, shared_execs_overlap_and_an_rw_exec_waits_for_them) {
  redis_server srv;
  temp_dir dir;
  const auto name = unique_name("cli-rw");
  const auto d = dir.path() + "/";
  // Each reader holds until it has seen the other one's marker (so they held at once), then
  // until `go`; it leaves its `.end` marker last.
  auto reader = [&](const std::string& me, const std::string& other) {
    return std::make_unique<dlock_process>(std::vector<std::string>{
        "--url", srv.url(), "exec", "--shared", name, "--", sh, "-c",
        wait_fn + " [ -e " + d + "w.start ] && exit 4; touch " + d + me + "; w " + d + other +
            "; w " + d + "go; touch " + d + me + ".end"});
  };
  auto r1 = reader("r1", "r2");
  auto r2 = reader("r2", "r1");
  ASSERT_TRUE(wait_until([&] { return file_exists(d + "r1") && file_exists(d + "r2"); }, 10s))
      << (*r1)->diagnostics() << (*r2)->diagnostics();

  // The writer may start only after both readers ended; it holds until `go2`.
  dlock_process writer{{"--url", srv.url(), "exec", "--rw", name, "--", sh, "-c",
                        wait_fn + " [ -e " + d + "r1.end ] && [ -e " + d +
                            "r2.end ] || exit 4; touch " + d + "w.start; echo ready; w " + d +
                            "go2"}};
  const auto writers = dlock::keys::waiting_writers(name);
  ASSERT_TRUE(count_reaches(srv, {"ZCARD", writers}, 1)) << writer->diagnostics();
  const auto writer_owner = items(srv.command({"ZRANGE", writers, "0", "-1"})).at(0);
  // A new reader queues behind the waiting writer.
  auto late = run_dlock(
      {"--url", srv.url(), "exec", "--shared", "--wait", "0", name, "--", sh, "-c", "echo ran"});
  EXPECT_EQ(late.code, std::optional<int>{exit_tempfail}) << describe(late);
  EXPECT_EQ(late.out, "");
  expect_read_status(srv, name, {(*r1)->pid(), (*r2)->pid()}, writer_owner);
  EXPECT_FALSE(file_exists(d + "w.start")) << "the writer waits for the readers";

  std::ofstream{d + "go"}.put('\n');
  EXPECT_EQ((*r1)->wait_exit(10s), std::optional<int>{0})
      << "saw r2 meanwhile; " << (*r1)->diagnostics();
  EXPECT_EQ((*r2)->wait_exit(10s), std::optional<int>{0})
      << "saw r1 meanwhile; " << (*r2)->diagnostics();
  ASSERT_EQ(writer->read_line(10s), std::optional<std::string>{"ready"}) << writer->diagnostics();
  expect_write_status(srv, name, writer->pid(), writer_owner);
  late = run_dlock({"--url", srv.url(), "exec", "--shared", "--wait", "0", name, "--", "true"});
  EXPECT_EQ(late.code, std::optional<int>{exit_tempfail})
      << "the writer excludes readers; " << describe(late);
  std::ofstream{d + "go2"}.put('\n');
  EXPECT_EQ(writer->wait_exit(10s), std::optional<int>{0}) << writer->diagnostics();
  EXPECT_EQ(exists(srv, name), ":0");
  EXPECT_EQ(exists(srv, dlock::keys::holder_info(name)), ":0") << "descriptions removed";
}

// -- kinds and flags ------------------------------------------------------------------------------

TEST(cli_family, a_name_of_another_kind_is_refused_with_exit_64) {
  redis_server srv;
  dlock::client c{config_for(srv)};
  const auto plain = unique_name("cli-kind-mutex"), rw = unique_name("cli-kind-rw");
  dlock::mutex m{c, plain};
  m.lock();
  dlock::shared_mutex s{c, rw};
  s.lock_shared();
  const auto plain_before = srv.command({"HGETALL", plain});
  const auto rw_before = srv.command({"HGETALL", rw});
  struct {
    std::vector<std::string> args;
    const char* says;
  } const cases[] = {
      {{"exec", "--shared", plain},
       "held as a mutex or fair lock, not a read-write lock: leave out --shared and --rw"},
      {{"exec", "--rw", plain},
       "held as a mutex or fair lock, not a read-write lock: leave out --shared and --rw"},
      {{"exec", rw}, "held as a read-write lock: use --shared or --rw"},
      {{"exec", "--fair", rw}, "held as a read-write lock: use --shared or --rw"},
  };
  for (const auto& k : cases) {
    auto args = k.args;
    args.insert(args.begin(), {"--url", srv.url()});
    for (const auto& a :
         {std::string{"--"}, std::string{sh}, std::string{"-c"}, std::string{"echo ran"}})
      args.push_back(a);
    const auto r = run_dlock(args);  // no --wait: refused at once, never waited on
    EXPECT_EQ(r.code, std::optional<int>{exit_usage}) << describe(r);
    EXPECT_EQ(r.out, "") << "the command did not run";
    EXPECT_EQ(count_lines(r.err), 1u) << r.err;
    EXPECT_NE(r.err.find(k.says), std::string::npos) << r.err;
  }
  EXPECT_EQ(srv.command({"HGETALL", plain}), plain_before) << "untouched";
  EXPECT_EQ(srv.command({"HGETALL", rw}), rw_before) << "untouched";
  m.unlock();
  s.unlock_shared();
}

TEST(cli_family, more_than_one_kind_flag_is_a_usage_error) {
  redis_server srv;
  const auto name = unique_name("cli-kind-flags");
  const std::vector<std::vector<std::string>> flags = {{"--fair", "--shared"},
                                                       {"--fair", "--rw"},
                                                       {"--shared", "--rw"},
                                                       {"--rw", "--fair", "--shared"}};
  for (const auto& f : flags) {
    std::vector<std::string> args{"--url", srv.url(), "exec"};
    args.insert(args.end(), f.begin(), f.end());
    for (const auto& a :
         {name, std::string{"--"}, std::string{sh}, std::string{"-c"}, std::string{"echo ran"}})
      args.push_back(a);
    const auto r = run_dlock(args);
    EXPECT_EQ(r.code, std::optional<int>{exit_usage}) << describe(r);
    EXPECT_EQ(r.out, "");
    EXPECT_NE(r.err.find("--fair, --shared and --rw choose the kind of lock"), std::string::npos)
        << r.err;
  }
  // Kind flags belong to exec.
  const auto r = run_dlock({"--url", srv.url(), "status", "--fair", name});
  EXPECT_EQ(r.code, std::optional<int>{exit_usage}) << describe(r);
  EXPECT_EQ(srv.command({"DBSIZE"}), ":0") << "nothing was locked";
}

// -- unlock --force -------------------------------------------------------------------------------

// The waiters re-check only every 60 s and the holders' leases last 30 s: within the 10 s
// allowed, only the unlock message sent where they listen wakes them.
TEST(cli_family, unlock_force_wakes_the_waiters_of_each_kind) {
  redis_server srv;
  dlock::client c{config_for(srv)};
  const auto slow = with_query(srv, "recheck=60s");
  {
    const auto name = unique_name("cli-force-rw");
    dlock::shared_mutex rw{c, name};
    rw.lock();
    dlock_process reader{{"--url", slow, "exec", "--shared", name, "--", sh, "-c", "echo ran"}};
    const auto channel = dlock::keys::rwlock_channel(name);
    ASSERT_TRUE(wait_until([&] { return numsub(srv, channel) == 1; }, 10s))
        << reader->diagnostics();
    const auto r = run_dlock({"--url", srv.url(), "unlock", "--force", name});
    EXPECT_EQ(r.code, std::optional<int>{0}) << describe(r);
    EXPECT_EQ(reader->read_line(10s), std::optional<std::string>{"ran"}) << reader->diagnostics();
    EXPECT_EQ(reader->wait_exit(10s), std::optional<int>{0}) << reader->diagnostics();
    std::error_code ec;
    rw.unlock(ec);
    EXPECT_EQ(ec, dlock::errc::lease_lost) << ec.message();
  }
  {
    const auto name = unique_name("cli-force-fair");
    dlock::fair_mutex fair{c, name};
    fair.lock();
    dlock_process waiter{{"--url", slow, "exec", "--fair", name, "--", sh, "-c", "echo ran"}};
    const auto queue = dlock::keys::fair_queue(name);
    ASSERT_TRUE(count_reaches(srv, {"LLEN", queue}, 1)) << waiter->diagnostics();
    const auto owner = items(srv.command({"LRANGE", queue, "0", "-1"})).at(0);
    const auto channel = dlock::keys::fair_waiter_channel(name, owner);
    ASSERT_TRUE(wait_until([&] { return numsub(srv, channel) == 1; }, 10s))
        << waiter->diagnostics();
    const auto r = run_dlock({"--url", srv.url(), "unlock", "--force", name});
    EXPECT_EQ(r.code, std::optional<int>{0}) << describe(r);
    EXPECT_EQ(waiter->read_line(10s), std::optional<std::string>{"ran"}) << waiter->diagnostics();
    EXPECT_EQ(waiter->wait_exit(10s), std::optional<int>{0}) << waiter->diagnostics();
    std::error_code ec;
    fair.unlock(ec);
    EXPECT_EQ(ec, dlock::errc::lease_lost) << ec.message();
  }
}

}  // namespace cli_family_test
