// The `dlock` command on a real 3-master/3-replica Redis Cluster (support/redis_cluster.hpp),
// through a `redis+cluster://` URL: exec on names of every master, status of a held and a free
// lock (the waiters counted on their shard channel), status --metrics over every master, unlock
// --force waking a waiter (SPUBLISH), and ping listing every node — then, on a cluster of its own,
// reporting a killed one.
// (Helpers: cli_helpers.hpp, cli_json.hpp.)
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "cli_helpers.hpp"
#include "cli_json.hpp"
#include "dlock/keys.hpp"
#include "dlock/mutex.hpp"
#include "support/redis_cluster.hpp"
#include "test_util.hpp"

using namespace dlock::test;
using namespace dlock::test::cli;

namespace {

constexpr int exit_free = 1;  // status and unlock --force: the lock was free

int slot_of(const std::string& name) { return static_cast<int>(dlock::keys::slot(name)); }

// One lock name per master: names whose slots each of the masters serves.
std::vector<std::string> one_name_per_master(const redis_cluster& c) {
  std::map<std::size_t, std::string> by_master;
  const auto base = unique_name("cli-cl");
  for (int i = 0; by_master.size() < c.masters().size() && i < 1000; ++i) {
    const auto name = base + ":" + std::to_string(i);
    by_master.try_emplace(c.master_of(slot_of(name)), name);
  }
  std::vector<std::string> out;
  for (auto& [m, n] : by_master) out.push_back(n);
  return out;
}

std::string exists(const redis_cluster& c, const std::string& key) {
  return c.command_on_slot(slot_of(key), {"EXISTS", key});
}

// Subscribers of a shard channel, at its slot's master ("[<channel>, :<n>]": the last integer).
long shard_numsub(const redis_cluster& c, const std::string& channel) {
  const auto text = c.command_on_slot(slot_of(channel), {"PUBSUB", "SHARDNUMSUB", channel});
  const auto colon = text.rfind(':');
  return colon == std::string::npos ? -1 : std::stol(text.substr(colon + 1));
}

// ping's node lines, by port: "  127.0.0.1:<port>  <role>  <serves>  <result>".
std::map<int, std::string> node_lines(const std::string& out) {
  static const std::regex line{R"(^  127\.0\.0\.1:(\d+) +(.*)$)"};
  std::map<int, std::string> by_port;
  std::istringstream in{out};
  for (std::string l; std::getline(in, l);) {
    std::smatch m;
    if (std::regex_match(l, m, line) && !by_port.count(std::stoi(m[1]))) {
      by_port[std::stoi(m[1])] = m[2];
    }
  }
  return by_port;
}

// The tests share one cluster and leave it as they found it.
class cli_cluster : public testing::Test {
 protected:
  static void SetUpTestSuite() { cluster_ = new redis_cluster{}; }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void TearDown() override { EXPECT_EQ(cluster_->error_count("CROSSSLOT"), 0); }
  static redis_cluster* cluster_;
};
redis_cluster* cli_cluster::cluster_ = nullptr;

TEST_F(cli_cluster, exec_holds_locks_on_every_master_at_once_and_releases_them) {
  auto& c = *cluster_;
  const auto names = one_name_per_master(c);
  ASSERT_EQ(names.size(), 3u);
  std::vector<std::unique_ptr<dlock_process>> holders;
  for (const auto& name : names) {
    holders.push_back(std::make_unique<dlock_process>(
        std::vector<std::string>{"--url", c.url(), "exec", name, "--", sh, "-c",
                                 "echo ready $DLOCK_FENCING_TOKEN; cat >/dev/null"}));
  }
  for (std::size_t i = 0; i < names.size(); ++i) {
    auto& h = *holders[i];
    const auto ready = h->read_line(10s);
    ASSERT_TRUE(ready && ready->starts_with("ready ")) << h->diagnostics();
    EXPECT_GT(std::stoull(ready->substr(6)), 0u) << "a fencing token from the slot's counter";
    EXPECT_EQ(exists(c, names[i]), ":1") << "held on the master of its slot";
  }
  for (std::size_t i = 0; i < names.size(); ++i) {
    auto& h = *holders[i];
    h->close_stdin();  // the command ends: dlock releases
    EXPECT_EQ(h->wait_exit(10s), std::optional<int>{0}) << h->diagnostics();
    EXPECT_EQ(exists(c, names[i]), ":0") << "released";
  }
}

TEST_F(cli_cluster, status_shows_the_holder_and_the_waiter_of_a_held_lock_and_a_free_one) {
  auto& c = *cluster_;
  const auto name = unique_name("cli-cl-status");
  auto r = run_dlock({"--url", c.url(), "status", name});
  EXPECT_EQ(r.code, std::optional<int>{exit_free}) << describe(r);
  EXPECT_EQ(r.out.rfind(name + ": free\n", 0), 0u) << r.out;

  dlock_process holder{{"--url", c.url(), "exec", name, "--", sh, "-c", "echo ready; cat"}};
  ASSERT_EQ(holder->read_line(10s), std::optional<std::string>{"ready"}) << holder->diagnostics();
  dlock_process waiter{{"--url", c.url(), "exec", name, "--", sh, "-c", "echo waiter-ran"}};
  const auto channel = dlock::keys::lock_channel(name);
  ASSERT_TRUE(wait_until([&] { return shard_numsub(c, channel) == 1; }, 10s))
      << "the waiter listens on the shard channel; " << waiter->diagnostics();

  r = run_dlock({"--url", c.url(), "status", "--json", name});
  EXPECT_EQ(r.code, std::optional<int>{0}) << describe(r);
  const auto j = parse_json(r.out);
  EXPECT_TRUE(j.at("held").boolean);
  ASSERT_EQ(j.at("holders").items.size(), 1u) << r.out;
  EXPECT_EQ(j.at("holders").items[0].at("pid").integer(), holder->pid()) << r.out;
  EXPECT_EQ(j.at("holders").items[0].at("command").text, std::string{sh} + " -c echo ready; cat");
  EXPECT_GT(j.at("fencing_counter").integer(), 0);
  EXPECT_EQ(j.at("queued").integer(), 1) << "the waiting dlock";
  EXPECT_EQ(j.at("subscribers").integer(), 1) << "counted on its shard channel";
  r = run_dlock({"--url", c.url(), "status", name});
  EXPECT_EQ(r.code, std::optional<int>{0}) << describe(r);
  EXPECT_EQ(r.out.rfind(name + ": held\n", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("pid " + std::to_string(holder->pid())), std::string::npos) << r.out;

  holder->close_stdin();  // the holder's command ends: the lock goes to the waiter
  EXPECT_EQ(waiter->read_line(10s), std::optional<std::string>{"waiter-ran"})
      << waiter->diagnostics();
  EXPECT_EQ(waiter->wait_exit(10s), std::optional<int>{0}) << waiter->diagnostics();
  EXPECT_EQ(holder->wait_exit(10s), std::optional<int>{0}) << holder->diagnostics();
  EXPECT_EQ(exists(c, name), ":0");
}

// status --metrics SCANs every master (a cursor belongs to one node): a lock held on each is
// reported, and only those.
TEST_F(cli_cluster, status_metrics_reports_the_locks_of_every_master) {
  auto& c = *cluster_;
  const auto names = one_name_per_master(c);
  ASSERT_EQ(names.size(), 3u);
  dlock::client client{dlock::config::from_uri(c.url())};
  std::vector<std::unique_ptr<dlock::mutex>> locks;
  for (const auto& name : names) {
    locks.push_back(std::make_unique<dlock::mutex>(client, name));
    locks.back()->lock();
  }
  const auto pattern = names[0].substr(0, names[0].rfind(':')) + ":*";
  const auto r = run_dlock({"--url", c.url(), "status", "--metrics", "--match", pattern});
  EXPECT_EQ(r.code, std::optional<int>{0}) << describe(r);
  EXPECT_NE(r.out.find("\ndlock_server_scan_nodes 3\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\ndlock_server_locks_held{kind=\"mutex\"} 3\n"), std::string::npos)
      << r.out;
  for (const auto& name : names) {
    EXPECT_NE(r.out.find("\ndlock_server_lock_held{name=\"" + name + "\",kind=\"mutex\"} 1\n"),
              std::string::npos)
        << name << ": " << r.out;
  }
  for (auto& l : locks) l->unlock();
}

TEST_F(cli_cluster, unlock_force_frees_a_lock_held_by_another_process_and_wakes_its_waiter) {
  auto& c = *cluster_;
  const auto name = unique_name("cli-cl-force");
  // Watchdog lease 30 s, waiters re-check every 3 s: only the unlock message wakes at once.
  dlock_process holder{{"--url", c.url(), "exec", name, "--", sh, "-c", "echo ready; cat"}};
  ASSERT_EQ(holder->read_line(10s), std::optional<std::string>{"ready"}) << holder->diagnostics();
  dlock_process waiter{{"--url", c.url(), "exec", name, "--", sh, "-c", "echo acquired"}};
  ASSERT_TRUE(
      wait_until([&] { return shard_numsub(c, dlock::keys::lock_channel(name)) == 1; }, 10s))
      << waiter->diagnostics();

  const auto r = run_dlock({"--url", c.url(), "unlock", "--force", name});
  const auto unlocked_at = steady::now();
  EXPECT_EQ(r.code, std::optional<int>{0}) << "it was held: " << describe(r);
  EXPECT_EQ(waiter->read_line(5s), std::optional<std::string>{"acquired"}) << waiter->diagnostics();
  // Slop 500 ms (dlock acquires, describes itself and starts the shell), well under the
  // waiter's 3 s re-check.
  EXPECT_LT(ms_since(unlocked_at), 500ms) << "woken by the SPUBLISH of unlock --force";
  EXPECT_EQ(waiter->wait_exit(5s), std::optional<int>{0}) << waiter->diagnostics();

  const auto again = run_dlock({"--url", c.url(), "unlock", "--force", name});
  EXPECT_EQ(again.code, std::optional<int>{exit_free}) << "it was free: " << describe(again);
}

TEST_F(cli_cluster, ping_lists_every_node_with_its_role_slots_and_round_trip) {
  auto& c = *cluster_;
  const auto r = run_dlock({"--url", c.url(), "ping"});
  EXPECT_EQ(r.code, std::optional<int>{0}) << describe(r);
  EXPECT_EQ(r.err, "") << "no warning for noeviction";
  EXPECT_EQ(
      r.out.rfind("cluster: 6 nodes (3 masters, 3 replicas), 16384 of 16384 slots served\n", 0), 0u)
      << r.out;
  const auto lines = node_lines(r.out);
  ASSERT_EQ(lines.size(), c.size()) << r.out;
  std::size_t replicas = 0;
  for (const auto m : c.masters()) {
    const auto port = static_cast<int>(c.node(m).port());
    ASSERT_TRUE(lines.count(port)) << "master " << m << " listed; " << r.out;
    EXPECT_TRUE(
        std::regex_match(lines.at(port), std::regex{R"(master +slots \d+-\d+ +PONG in \d+ us)"}))
        << lines.at(port);
    for (const auto replica : c.replicas_of(m)) {
      const auto& l = lines.at(static_cast<int>(c.node(replica).port()));
      EXPECT_TRUE(std::regex_match(l, std::regex{"replica +of 127\\.0\\.0\\.1:" +
                                                 std::to_string(port) + " +PONG in \\d+ us"}))
          << l;
      ++replicas;
    }
  }
  EXPECT_EQ(replicas, 3u);
  std::size_t policies = 0;
  for (auto at = r.out.find("maxmemory-policy: noeviction"); at != std::string::npos;
       at = r.out.find("maxmemory-policy: noeviction", at + 1)) {
    ++policies;
  }
  EXPECT_EQ(policies, 3u) << "asked of every master; " << r.out;
}

// Kills nodes: a cluster of its own.
TEST(cli_cluster_damaged, ping_reports_a_killed_node_unreachable_and_exits_69) {
  redis_cluster c;
  const auto url = c.url() + "?connect_timeout=500ms";  // how long a dead node takes to fail
  const auto replica = c.replicas_of(c.masters().at(1)).at(0);
  const auto replica_port = static_cast<int>(c.node(replica).port());
  c.kill(replica);
  auto r = run_dlock({"--url", url, "ping"});
  EXPECT_EQ(r.code, std::optional<int>{exit_unavailable}) << describe(r);
  EXPECT_NE(r.err.find("dlock: ping: 127.0.0.1:" + std::to_string(replica_port) +
                       " unreachable: connection refused"),
            std::string::npos)
      << describe(r);
  auto lines = node_lines(r.out);
  EXPECT_EQ(lines.size(), 6u) << "still listed: " << r.out;
  EXPECT_TRUE(lines[replica_port].starts_with("replica "));
  EXPECT_TRUE(lines[replica_port].ends_with("unreachable: connection refused")) << r.out;
  for (const auto& [port, l] : lines) {
    if (port != replica_port) {
      EXPECT_NE(l.find("PONG in "), std::string::npos) << l;
    }
  }

  // A master, and a seed of the URL: the slot map comes from another seed.
  const auto master = c.masters().at(0);
  const auto master_port = static_cast<int>(c.node(master).port());
  c.kill(master);
  r = run_dlock({"--url", url, "ping"});
  EXPECT_EQ(r.code, std::optional<int>{exit_unavailable}) << describe(r);
  EXPECT_NE(r.err.find("127.0.0.1:" + std::to_string(master_port) + " unreachable"),
            std::string::npos)
      << describe(r);
  lines = node_lines(r.out);
  EXPECT_NE(lines[master_port].find("unreachable"), std::string::npos) << r.out;
  EXPECT_LT(r.took, 10s);
}

}  // namespace
