// What a sentinel-mode client knows of its master, with no sockets or timers: which sentinel to
// ask next in a discovery round, what an answer means, and what a `+switch-master` message says.
// The Asio shell is topology/sentinels. Tested step by step in tests/unit/sentinel_view_test.
//
// A round asks the sentinels one at a time (SENTINEL MASTER <name>: the address and the
// configuration epoch), starting with the last one that answered, until one names the master
// with an epoch no older than the one the client follows. Epochs keep the client from going back:
// after a failover a sentinel that has not yet heard of it still names the old master, which
// after a graceful failover stays a writable master for seconds. A `+switch-master` message is
// always news (only a sentinel that switched sends it): the epoch to accept from then on is above
// the one known before it. When no sentinel names an acceptable master, the round fails with
// errc::unknown_master if any of them knows no such master, else with the last connection error
// (none when every answer was only older than what the client follows).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "dlock/config.hpp"
#include "dlock/reply.hpp"

namespace dlock::topology {

class sentinel_view {
 public:
  sentinel_view(std::vector<endpoint> sentinels, std::string master);

  const std::vector<endpoint>& sentinels() const noexcept { return sentinels_; }
  const std::string& master_name() const noexcept { return name_; }

  // Starts a round: the sentinel to ask first. `doubted`: the master the last round gave did
  // not serve (refused, not a master, READONLY), so the round starts with the next sentinel —
  // the last one may not have heard of a failover yet, and a client that never saw the new
  // epoch would otherwise take its word again and again.
  std::size_t begin_round(bool doubted = false);
  // What to do after sentinel `asked` answered (or failed with `ec`): ask another, or the round
  // is over with the master found, or failed.
  struct master_info {
    endpoint at;
    std::uint64_t epoch = 0;  // config-epoch
  };
  struct step {
    std::optional<std::size_t> ask;
    std::optional<master_info> found;
    std::error_code failed;
  };
  step on_reply(std::size_t asked, std::error_code ec, const reply& r);

  // The master as last found; nullopt before any round succeeded.
  const std::optional<endpoint>& master() const noexcept { return master_; }
  // Takes a round's master; true if that changed it from a known, different one (a failover).
  // One older than the epoch followed is ignored (false).
  bool adopt(const master_info& m);
  // Takes the new master of a `+switch-master` message; true if it changed.
  bool adopt_switch(const endpoint& e);

  // A `+switch-master` payload ("<name> <old-ip> <old-port> <new-ip> <new-port>"): the new
  // master, if the message is about this master.
  std::optional<endpoint> switched(std::string_view payload) const;
  // SENTINEL MASTER's reply (field, value, ...: ip, port, config-epoch), nullopt if it lacks them.
  static std::optional<master_info> parse_master(const reply& r);

 private:
  std::vector<endpoint> sentinels_;
  std::string name_;
  std::optional<endpoint> master_;
  std::uint64_t epoch_ = 0;    // of master_, as a round gave it
  std::uint64_t floor_ = 0;    // the oldest epoch a round may give
  std::size_t preferred_ = 0;  // the last sentinel that answered
  std::size_t asked_ = 0;      // in this round
  bool unknown_ = false;       // a sentinel of this round knew no such master
  std::error_code last_error_;
};

}  // namespace dlock::topology
