#include "support/redis_cluster.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <set>
#include <stdexcept>
#include <thread>

namespace dlock::test {
namespace {

using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr auto poll_interval = 20ms;  // each round asks every node several questions

// Like wait_until, at a gentler pace.
bool poll_until(const std::function<bool()>& pred, std::chrono::milliseconds limit) {
  const auto deadline = clock_type::now() + limit;
  for (;;) {
    if (pred()) return true;
    if (clock_type::now() >= deadline) return false;
    std::this_thread::sleep_for(poll_interval);
  }
}

std::chrono::milliseconds left_until(clock_type::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now());
  return std::max(left, std::chrono::milliseconds{100});
}

std::string ms_text(std::chrono::milliseconds ms) { return std::to_string(ms.count()) + " ms"; }

std::string redis_cli() {
  const char* env = std::getenv("DLOCK_REDIS_CLI");
  return env != nullptr && *env != '\0' ? env : "redis-cli";
}

}  // namespace

redis_cluster::redis_cluster() : redis_cluster(redis_cluster_options{}) {}

redis_cluster::redis_cluster(redis_cluster_options opts) : opts_{std::move(opts)} {
  const auto count = opts_.masters * (1 + opts_.replicas_per_master);
  for (std::size_t i = 0; i < count; ++i) nodes_.push_back(start_node(i));
  for (const auto& n : nodes_) ids_.push_back(n->command({"CLUSTER", "MYID"}));
  create();
  wait_ok();
  initial_masters_ = masters();
}

redis_cluster::~redis_cluster() {
  // kill -9 by PID: a graceful stop costs a master ~0.1-0.3 s (it waits for its replicas), and
  // nothing of the cluster is needed afterwards. The redis_server destructors remove the dirs.
  for (const auto& n : nodes_) {
    try {
      n->kill9();
    } catch (...) {
    }
  }
}

std::unique_ptr<redis_server> redis_cluster::start_node(std::size_t i) const {
  const auto conf = dir_.path() + "/nodes-" + std::to_string(i) + ".conf";
  for (int attempt = 0;; ++attempt) {
    std::error_code ec;
    std::filesystem::remove(conf, ec);  // left by an attempt that lost its bus port
    redis_server_options o;
    o.extra_args = {"--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    conf,
                    "--cluster-node-timeout",
                    std::to_string(opts_.node_timeout.count()),
                    "--cluster-port",
                    std::to_string(free_port()),
                    "--repl-diskless-sync-delay",
                    "0"};
    o.extra_args.insert(o.extra_args.end(), opts_.extra_args.begin(), opts_.extra_args.end());
    try {
      return std::make_unique<redis_server>(std::move(o));
    } catch (const std::exception&) {
      if (attempt == 2) throw;  // a lost port race is retried on fresh ports, twice
    }
  }
}

void redis_cluster::create() {
  std::vector<std::string> argv{redis_cli(), "--cluster", "create"};
  for (const auto& n : nodes_) argv.push_back("127.0.0.1:" + std::to_string(n->port()));
  argv.insert(argv.end(),
              {"--cluster-replicas", std::to_string(opts_.replicas_per_master), "--cluster-yes"});
  std::string out;
  const int rc = run_program(argv, opts_.ready_timeout, &out);
  if (rc != 0 || out.find("All 16384 slots covered") == std::string::npos) {
    throw std::runtime_error("redis_cluster: redis-cli --cluster create failed (exit " +
                             std::to_string(rc) + "):\n" + out);
  }
}

std::size_t redis_cluster::index_of_id(const std::string& id) const {
  const auto it = std::find(ids_.begin(), ids_.end(), id);
  if (it == ids_.end()) throw std::runtime_error("redis_cluster: unknown node ID " + id);
  return static_cast<std::size_t>(it - ids_.begin());
}

std::string redis_cluster::url() const {
  std::string url = "redis+cluster://";
  for (std::size_t k = 0; k < initial_masters_.size(); ++k) {
    if (k > 0) url += ",";
    url += "127.0.0.1:" + std::to_string(node(initial_masters_[k]).port());
  }
  return url;
}

cluster_view redis_cluster::view(std::size_t i) const {
  return parse_cluster_nodes(node(i).command({"CLUSTER", "NODES"}));
}

std::vector<std::size_t> redis_cluster::live() const {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i]->running() && !nodes_[i]->paused()) out.push_back(i);
  }
  return out;
}

std::size_t redis_cluster::first_live() const {
  const auto l = live();
  if (l.empty()) throw std::runtime_error("redis_cluster: no node is running");
  return l.front();
}

std::vector<std::size_t> redis_cluster::masters() const {
  std::vector<std::size_t> out;
  for (const auto& e : view(first_live())) {
    if (e.is_master() && !e.slots.empty()) out.push_back(index_of_id(e.id));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::size_t redis_cluster::master_of(int slot) const {
  const auto owner = slot_owner(view(first_live()), slot);
  if (owner.empty())
    throw std::runtime_error("redis_cluster: slot " + std::to_string(slot) + " is not served");
  return index_of_id(owner);
}

std::vector<std::size_t> redis_cluster::replicas_of(std::size_t master) const {
  std::vector<std::size_t> out;
  for (const auto& e : view(first_live())) {
    if (e.master_id == id(master)) out.push_back(index_of_id(e.id));
  }
  std::sort(out.begin(), out.end());
  return out;
}

int redis_cluster::slot_of(const std::string& key) const {
  const auto reply = node(first_live()).command({"CLUSTER", "KEYSLOT", key});
  if (reply.empty() || reply[0] != ':') {
    throw std::runtime_error("redis_cluster: CLUSTER KEYSLOT answered " + reply);
  }
  return std::stoi(reply.substr(1));
}

std::string redis_cluster::command_on_slot(int slot, const std::vector<std::string>& args) const {
  return node(master_of(slot)).command(args);
}

long long redis_cluster::error_count(const std::string& error) const {
  const auto field = "errorstat_" + error + ":count=";
  long long n = 0;
  for (const auto& node : nodes_) {
    if (!node->running()) continue;
    const auto stats = node->command({"INFO", "errorstats"});
    if (auto at = stats.find(field); at != std::string::npos) {
      n += std::stoll(stats.substr(at + field.size()));
    }
  }
  return n;
}

bool redis_cluster::agreed(std::string* why) const {
  try {
    const auto up = live();
    if (up.empty()) {
      *why = "no node is running";
      return false;
    }
    std::set<std::string> ids;
    for (const auto i : up) ids.insert(id(i));
    std::optional<std::string> reference;
    for (const auto i : up) {
      const auto name =
          "node " + std::to_string(i) + " (port " + std::to_string(node(i).port()) + ")";
      if (node(i).command({"CLUSTER", "INFO"}).find("cluster_state:ok") == std::string::npos) {
        *why = name + ": cluster_state is not ok";
        return false;
      }
      const auto v = view(i);
      std::string problem;
      const auto summary = healthy_summary(v, ids, &problem);
      if (!summary) {
        *why = name + ": " + problem;
        return false;
      }
      if (reference && *summary != *reference) {
        *why = name + " disagrees with node " + std::to_string(up.front()) + ":\n" + *summary +
               "versus\n" + *reference;
        return false;
      }
      reference = summary;
      if (find_node(v, id(i))->is_replica() &&
          node(i).command({"INFO", "replication"}).find("master_link_status:up") ==
              std::string::npos) {
        *why = name + ": its link to its master is not up";
        return false;
      }
    }
    return true;
  } catch (const std::exception& e) {
    *why = e.what();
    return false;
  }
}

void redis_cluster::wait_ok(std::chrono::milliseconds limit) const {
  std::string why;
  if (!poll_until([&] { return agreed(&why); }, limit)) {
    throw std::runtime_error("redis_cluster: not ok within " + ms_text(limit) + ": " + why + "\n" +
                             diagnostics());
  }
}

void redis_cluster::wait_views(const std::function<bool(std::size_t, const cluster_view&)>& pred,
                               std::chrono::milliseconds limit, const std::string& what) const {
  const auto deadline = clock_type::now() + limit;
  std::string why;
  const bool seen = poll_until(
      [&] {
        try {
          for (const auto i : live()) {
            if (!pred(i, view(i))) {
              why = "node " + std::to_string(i) + " does not see it yet";
              return false;
            }
          }
          return true;
        } catch (const std::exception& e) {
          why = e.what();
          return false;
        }
      },
      limit);
  if (!seen) {
    throw std::runtime_error("redis_cluster: " + what + " not seen within " + ms_text(limit) +
                             ": " + why + "\n" + diagnostics());
  }
  wait_ok(left_until(deadline));
}

std::string redis_cluster::diagnostics() const {
  std::string out;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    out += "--- node " + std::to_string(i) + " port " + std::to_string(node(i).port()) + " id " +
           id(i) + (node(i).running() ? "" : " (not running)") + "\n";
    if (!node(i).running() || node(i).paused()) continue;
    try {
      out += node(i).command({"CLUSTER", "NODES"}, {.timeout = 1000ms});
    } catch (const std::exception& e) {
      out += std::string{"CLUSTER NODES: "} + e.what() + "\n";
    }
  }
  return out;
}

}  // namespace dlock::test
