// What a cluster client does with one request's error reply, with no sockets: follow MOVED and
// ASK, wait out TRYAGAIN and CLUSTERDOWN with backoff, all within the request's own deadline.
//
// Every redirection answered here is a refusal: the node did not run the command, so sending it
// elsewhere can never run it twice. Anything else (a reply, another error, a connection error
// whose outcome is unknown) goes back to the caller as it came, which resolves it as any lost
// reply is resolved (the acquire machine's resend, the give-back).
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>

#include "dlock/config.hpp"

namespace dlock::topology {

class redirects {
 public:
  using clock = std::chrono::steady_clock;
  // A request sent on by MOVED or ASK more often than this is answered with its last error: the
  // nodes disagree for longer than a map refresh can settle. TRYAGAIN and CLUSTERDOWN are
  // waited out until the deadline.
  static constexpr int max_redirects = 16;
  static constexpr std::chrono::milliseconds first_backoff{10};
  static constexpr std::chrono::milliseconds max_backoff{200};

  struct action {
    enum class kind {
      deliver,      // give the reply to the caller
      send,         // send again where the slot map says (after `delay`)
      send_asking,  // send ASKING and the request to `to`, map untouched
    } what = kind::deliver;
    endpoint to;              // send_asking only
    clock::duration delay{};  // send only: wait this long first
    bool moved = false;       // a MOVED: update the map (slot -> to) before sending
    bool refresh = false;     // the map is stale: read it again (rate-limited)
    std::uint16_t slot = 0;   // moved only
  };

  explicit redirects(clock::time_point deadline) : deadline_{deadline} {}

  // The request's reply is the error `text` ("MOVED 3999 127.0.0.1:6381", "TRYAGAIN ...",
  // "CLUSTERDOWN ...", "ERR ..."), answered by `from`, at `now`.
  action on_error(std::string_view text, const endpoint& from, clock::time_point now);

  int redirected() const noexcept { return redirected_; }

 private:
  clock::duration backoff();

  clock::time_point deadline_;
  int redirected_ = 0;
  int waits_ = 0;
};

}  // namespace dlock::topology
