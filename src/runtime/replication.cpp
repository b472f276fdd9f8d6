#include "runtime/replication.hpp"

#include <algorithm>
#include <string>

#include "dlock/error.hpp"
#include "resp/encoder.hpp"

namespace dlock::detail {

unsigned count_online_replicas(std::string_view info) {
  unsigned n = 0;
  while (!info.empty()) {
    const auto end = std::min(info.find('\n'), info.size());
    const auto line = info.substr(0, end);
    // slave0:ip=127.0.0.1,port=6380,state=online,offset=42,lag=0
    if (line.starts_with("slave") && line.find(":ip=") != std::string_view::npos &&
        line.find(",state=online,") != std::string_view::npos) {
      ++n;
    }
    info.remove_prefix(std::min(end + 1, info.size()));
  }
  return n;
}

void replication::confirm(transport::connection& conn, confirmed done) {
  if (!wanted()) return done({}, true);
  const auto gen = conn.generation();
  for (auto& p : pending_) {
    if (p->conn == &conn && p->generation == gen) return p->waiting.push_back(std::move(done));
  }
  auto p = std::make_shared<pending>(pending{&conn, gen, {}});
  p->waiting.push_back(std::move(done));
  pending_.push_back(p);
  if (cfg_.wait_replicas != config::online_replicas) return send_wait(conn, cfg_.wait_replicas, p);
  const auto at = conn.target();
  auto& o = online_[{at.host, at.port}];
  const bool known = o.read_at != clock::time_point{};
  if (known) send_wait(conn, o.count, p);
  if (known && (clock::now() - o.read_at < online_max_age || o.reading)) return;
  read_online(conn, [this, &conn, p, known](unsigned count) {
    if (!known) send_wait(conn, count, p);
  });
}

void replication::read_online(transport::connection& conn, std::function<void(unsigned)> then) {
  const auto at = conn.target();
  online_[{at.host, at.port}].reading = true;
  conn.submit_on(conn.generation(), resp::encode_command({"INFO", "replication"}),
                 cfg_.command_timeout, [this, at, then](std::error_code ec, reply r) {
                   auto& o = online_[{at.host, at.port}];
                   o.reading = false;
                   if (!ec && r.is_string()) {
                     o.count = count_online_replicas(r.str());
                     o.read_at = clock::now();
                   }
                   then(o.count);
                 });
}

// Sent on the generation of the writes it covers. `need` 0 (auto, no replica online) still
// goes through WAIT, which answers at once: the order of completions stays that of the writes.
void replication::send_wait(transport::connection& conn, unsigned need,
                            std::shared_ptr<pending> p) {
  ++waits_;
  conn.submit_on(
      p->generation,
      resp::encode_command(
          {"WAIT", std::to_string(need), std::to_string(cfg_.wait_timeout.count())}),
      cfg_.wait_timeout + cfg_.command_timeout, [this, p, need](std::error_code ec, reply r) {
        std::erase(pending_, p);
        const bool enough = !ec && r.is_integer() && r.integer() >= static_cast<std::int64_t>(need);
        if (!enough) ++shortfalls_;
        auto waiting = std::move(p->waiting);
        for (auto& fn : waiting) fn(ec, enough);
      });
}

}  // namespace dlock::detail
