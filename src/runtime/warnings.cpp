// Warnings a client gives once (config::on_warning): conditions that do not fail a call but
// weaken what a lock promises (an evicting maxmemory-policy) or slow it down (channels denied).
#include <cstdio>
#include <string>

#include "resp/encoder.hpp"
#include "runtime/client_impl.hpp"
#include "runtime/observer.hpp"

namespace dlock::detail {

namespace {

// The value of `field:` in an INFO reply, or empty.
std::string info_field(std::string_view info, std::string_view field) {
  std::string key{field};
  key += ':';
  for (std::size_t at = 0; at < info.size();) {
    auto end = info.find('\n', at);
    if (end == std::string_view::npos) end = info.size();
    auto line = info.substr(at, end - at);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.starts_with(key)) return std::string{line.substr(key.size())};
    at = end + 1;
  }
  return {};
}

}  // namespace

void client_impl::warn(warning w, const std::string& message) {
  const auto bit = 1u << static_cast<unsigned>(w);
  if (warned_ & bit) return;
  warned_ |= bit;
  event e{event_type::warning, message};
  e.warning = w;
  observer_->emit(e);
  if (!cfg_.on_warning) {
    if (!cfg_.on_event) std::fprintf(stderr, "dlock: warning: %s\n", message.c_str());
    return;
  }
  try {
    cfg_.on_warning(w, message);
  } catch (...) {
    std::fprintf(stderr, "dlock: an on_warning callback threw (warning: %s)\n", message.c_str());
  }
}

// Replies complete on the connection's strand, which is the client's: warn() runs there.
void client_impl::check_eviction_policy() {
  auto judge = [this](const std::string& policy) {
    if (policy.empty() || policy == "noeviction") return;
    warn(warning::evicting_policy,
         "maxmemory-policy " + policy +
             " may evict lock keys (they have a TTL): a held lock could vanish and be taken by "
             "another owner; use noeviction");
  };
  // CONFIG may be denied to an ACL user or renamed away: then INFO, which says the same.
  // Neither answering (no server yet, no rights) is no reason to warn.
  // In a cluster this asks the first master only (the nodes normally share one configuration).
  submit(0, resp::encode_command({"CONFIG", "GET", "maxmemory-policy"}),
         [this, judge](std::error_code ec, reply r) {
           if (!ec && r.is_array() && r.elements().size() == 2 && r.elements()[1].is_string()) {
             return judge(r.elements()[1].str());
           }
           if (ec == errc::shutdown || ec == errc::connect_timeout ||
               ec == errc::connection_refused || ec == errc::connection_lost) {
             return;
           }
           submit(0, resp::encode_command({"INFO", "memory"}),
                  [judge](std::error_code ec2, reply r2) {
                    if (!ec2 && r2.is_string()) judge(info_field(r2.str(), "maxmemory_policy"));
                  });
         });
}

}  // namespace dlock::detail
