// Runs embedded scripts by SHA1 (EVALSHA). On NOSCRIPT — after SCRIPT FLUSH, a restart or a
// failover to a server that never saw the script (a replica receives a script's effects, not
// the script) — it sends the same call once more as EVAL with the script's text, which runs
// wherever redirections take it and leaves the script cached there, and reports the outcome of
// that retry. NOSCRIPT means the script did not run, so the retry cannot run it twice.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "scripts/script.hpp"
#include "topology/router.hpp"

namespace dlock::scripts {

// The EVALSHA request for `s` with these keys and arguments.
std::string encode_evalsha(const script& s, std::span<const std::string_view> keys,
                           std::span<const std::string_view> argv);
// The same request as EVAL with the script's text, from encode_evalsha's output.
std::string evalsha_to_eval(const script& s, const std::string& evalsha);

class runner {
 public:
  // `reloads`: the client's count of NOSCRIPT reloads (observer::script_reloads), which outlives
  // every reply handler.
  runner(std::shared_ptr<topology::router> route, std::atomic<std::uint64_t>& reloads)
      : route_{std::move(route)}, reloads_{&reloads} {}

  // Runs `s` where its keys live (every key of a script shares one slot; at least one key).
  // Thread-safe on a single server, strand only in a cluster (router::submit). `handler` runs
  // on the strand.
  void eval(const script& s, std::span<const std::string_view> keys,
            std::span<const std::string_view> argv, transport::clock::duration timeout,
            transport::reply_handler handler) const;

  // Calls resent as EVAL because the server lacked the script, by this client (also those of
  // client::eval).
  std::uint64_t reloads() const noexcept { return reloads_->load(); }

 private:
  std::shared_ptr<topology::router> route_;
  std::atomic<std::uint64_t>* reloads_;
};

}  // namespace dlock::scripts
