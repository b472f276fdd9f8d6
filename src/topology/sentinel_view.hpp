// What a sentinel-mode client knows of its master, with no sockets or timers: which sentinel to
// ask next in a discovery round, what an answer means, and what a `+switch-master` message says.
// The Asio shell is topology/sentinels. Tested step by step in tests/unit/sentinel_view_test.
//
// A round asks the sentinels one at a time (SENTINEL get-master-addr-by-name), starting with
// the last one that answered, until one names the master. When none does, the round fails with
// errc::unknown_master if any sentinel answered that it knows no such master, else with the
// last connection error.
#pragma once

#include <cstddef>
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

  // Starts a round: the sentinel to ask first.
  std::size_t begin_round();
  // What to do after sentinel `asked` answered (or failed with `ec`): ask another, or the round
  // is over with the master found, or failed.
  struct step {
    std::optional<std::size_t> ask;
    std::optional<endpoint> found;
    std::error_code failed;
  };
  step on_reply(std::size_t asked, std::error_code ec, const reply& r);

  // The master as last found; nullopt before any round succeeded.
  const std::optional<endpoint>& master() const noexcept { return master_; }
  // Takes `e` as the master; true if that changed it from a known, different one (a failover).
  bool adopt(const endpoint& e);

  // A `+switch-master` payload ("<name> <old-ip> <old-port> <new-ip> <new-port>"): the new
  // master, if the message is about this master.
  std::optional<endpoint> switched(std::string_view payload) const;
  // SENTINEL get-master-addr-by-name's reply (["ip", "port"]), nullopt if it is not one.
  static std::optional<endpoint> parse_address(const reply& r);

 private:
  std::vector<endpoint> sentinels_;
  std::string name_;
  std::optional<endpoint> master_;
  std::size_t preferred_ = 0;  // the last sentinel that answered
  std::size_t asked_ = 0;      // in this round
  bool unknown_ = false;       // a sentinel of this round knew no such master
  std::error_code last_error_;
};

}  // namespace dlock::topology
