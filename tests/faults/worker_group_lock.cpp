// dlock_fault_worker's group kinds (worker_lock.hpp): --kind red, a dlock::red_lock over several
// servers, and --kind multi, a dlock::multi_lock of several dlock::mutex members (and its broken
// twin for the checker's self-check). They complete with a dlock::multi_lease, read as a careful
// holder reads a lease (worker_lease.hpp).
#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "dlock/error.hpp"
#include "dlock/multi_lease.hpp"
#include "dlock/multi_lock.hpp"
#include "dlock/mutex.hpp"
#include "dlock/red_lock.hpp"
#include "worker_lease.hpp"
#include "worker_lock.hpp"

namespace dlock::faults {

namespace worker_group_detail {

using std::chrono::milliseconds;
using namespace worker_lease;

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream in{list};
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

// A port number, or 0 for anything else.
std::uint16_t port_of(const std::string& text) {
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 10);
  return !text.empty() && *end == '\0' && v > 0 && v <= 65535 ? static_cast<std::uint16_t>(v) : 0;
}

// The group lock and everything it refers to: the clients made for other servers, and the
// multi_lock's members.
class group_held final : public held_lock {
 public:
  group_held(dlock::client& c, dlock::config cfg, milliseconds lease)
      : main_{c}, cfg_{std::move(cfg)}, lease_time_{lease} {}

  // The client of `port` (0: the lock URL's own).
  dlock::client& client_on(std::uint16_t port) {
    if (port == 0) return main_;
    auto& c = clients_[port];
    if (!c) {
      auto cfg = cfg_;
      cfg.port = port;
      c = std::make_unique<dlock::client>(cfg);
    }
    return *c;
  }
  void make_red(const std::string& name, const std::vector<std::uint16_t>& ports) {
    std::vector<std::reference_wrapper<dlock::client>> servers;
    for (const auto p : ports) servers.emplace_back(client_on(p));
    lock_ = std::make_unique<dlock::red_lock>(servers, name);
    red_ = true;
  }
  void add_member(const std::string& label, const std::string& name, std::uint16_t port) {
    members_.push_back(std::make_unique<dlock::mutex>(client_on(port), name));
    labels_.push_back(label);
  }
  // `first_only`: the broken kind, which takes the first member alone and claims them all.
  void make_multi(bool first_only) {
    std::vector<std::reference_wrapper<dlock::mutex>> members;
    for (auto& m : members_) members.emplace_back(*m);
    if (first_only) members.erase(members.begin() + 1, members.end());
    lock_ = std::make_unique<dlock::multi_lock>(members);
  }

  std::error_code acquire(milliseconds wait, std::uint64_t& token) override {
    auto [ec, l] = await_acquisition<dlock::multi_lease>(wait, [&](auto done) {
      if (lease_time_.count() > 0) {
        lock_->async_lock_for(wait, lease_time_, std::move(done));
      } else {
        lock_->async_lock_for(wait, std::move(done));
      }
    });
    lease_ = std::move(l);
    token = lease_.fencing_token();
    return ec;
  }
  bool lost() const override { return lease_gone(lease_); }
  std::int64_t left_ms() const override { return lease_.time_left().count(); }
  void hold_for(milliseconds d) override { hold_lease_for(lease_, d); }
  void on_lost(std::function<void()> fn) override { lease_.on_lost(std::move(fn)); }
  std::error_code release() override {
    std::error_code ec;
    lease_.unlock(ec);
    lease_ = dlock::multi_lease{};
    return ec;
  }
  std::vector<part> parts(std::uint64_t token) const override {
    if (red_) return {{"", token}};
    const auto tokens = lease_.fencing_tokens();
    std::vector<part> out;
    for (std::size_t i = 0; i < labels_.size(); ++i) {
      out.push_back({labels_[i], i < tokens.size() ? tokens[i] : 0});  // 0: a member not taken
    }
    return out;
  }
  std::string enter_detail() const override {
    if (!red_) return {};
    std::string text = "member tokens ";
    for (const auto t : lease_.fencing_tokens()) {
      text += (text.back() == ' ' ? "" : ",") + std::to_string(t);
    }
    return text;
  }
  void shutdown() override {
    for (auto& [port, c] : clients_) c->shutdown();
  }

 private:
  dlock::client& main_;
  dlock::config cfg_;
  milliseconds lease_time_;
  // Declared in the order they may be destroyed in reverse: the lease, the lock, its members,
  // their clients.
  std::map<std::uint16_t, std::unique_ptr<dlock::client>> clients_;
  std::vector<std::unique_ptr<dlock::mutex>> members_;
  std::vector<std::string> labels_;
  std::unique_ptr<dlock::detail::group_base> lock_;
  bool red_ = false;
  dlock::multi_lease lease_;
};

}  // namespace worker_group_detail

bool is_group_kind(const std::string& kind) {
  return kind == "red" || kind == "multi" || kind == "broken-multi-first-only";
}

std::unique_ptr<held_lock> make_group_lock(dlock::client& c, const dlock::config& cfg,
                                           const std::string& name, const std::string& kind,
                                           const std::string& servers, const std::string& names,
                                           std::chrono::milliseconds lease, std::string& error) {
  using namespace worker_group_detail;
  auto held = std::make_unique<group_held>(c, cfg, lease);
  if (kind == "red") {
    std::vector<std::uint16_t> ports;
    for (const auto& s : split(servers)) ports.push_back(port_of(s));
    if (ports.empty() || std::count(ports.begin(), ports.end(), 0) > 0) {
      error = "--kind red needs --servers P1,P2,... (ports)";
      return nullptr;
    }
    held->make_red(name, ports);
    return held;
  }
  const auto list = split(names);
  for (const auto& label : list) {
    const auto at = label.find('@');
    const std::uint16_t port = at == std::string::npos ? 0 : port_of(label.substr(at + 1));
    if (label.empty() || at == 0 || (at != std::string::npos && port == 0)) {
      error = "--kind multi needs --names A,B[@PORT],...";
      return nullptr;
    }
    held->add_member(label, label.substr(0, at), port);
  }
  if (list.empty()) {
    error = "--kind multi needs --names A,B[@PORT],...";
    return nullptr;
  }
  held->make_multi(kind != "multi");
  return held;
}

}  // namespace dlock::faults
