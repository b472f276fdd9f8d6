#include "topology/redirects.hpp"

#include <algorithm>

#include "topology/slot_map.hpp"

namespace dlock::topology {

redirects::clock::duration redirects::backoff() {
  const auto step = first_backoff * (1 << std::min(waits_++, 5));
  return std::min<clock::duration>(step, max_backoff);
}

redirects::action redirects::on_error(std::string_view text, const endpoint& from,
                                      clock::time_point now) {
  action a;
  if (auto r = parse_redirect(text)) {
    if (++redirected_ > max_redirects) return a;
    if (r->to.host.empty()) r->to.host = from.host;  // "MOVED 1 :7001": the node asked
    if (r->ask) {
      a.what = action::kind::send_asking;
      a.to = r->to;
      return a;
    }
    a.what = action::kind::send;
    a.moved = true;
    a.refresh = true;
    a.slot = r->slot;
    a.to = r->to;
    return a;
  }
  const bool try_again = text.starts_with("TRYAGAIN");
  if (!try_again && !text.starts_with("CLUSTERDOWN")) return a;
  const auto delay = backoff();
  if (now + delay >= deadline_) return a;
  a.what = action::kind::send;
  a.delay = delay;
  a.refresh = !try_again;  // a migration needs no new map; a down cluster may have failed over
  return a;
}

}  // namespace dlock::topology
