#include "scripts/runner.hpp"

#include <vector>

#include "dlock/error.hpp"
#include "dlock/keys.hpp"
#include "resp/encoder.hpp"

namespace dlock::scripts {

std::string encode_evalsha(const script& s, std::span<const std::string_view> keys,
                           std::span<const std::string_view> argv) {
  const auto nkeys = std::to_string(keys.size());
  std::vector<std::string_view> args;
  args.reserve(3 + keys.size() + argv.size());
  args.insert(args.end(), {"EVALSHA", s.sha1, nkeys});
  args.insert(args.end(), keys.begin(), keys.end());
  args.insert(args.end(), argv.begin(), argv.end());
  return resp::encode_command(args);
}

void runner::eval(const script& s, std::span<const std::string_view> keys,
                  std::span<const std::string_view> argv, transport::clock::duration timeout,
                  transport::reply_handler handler) const {
  // The slot only matters in a cluster: no CRC16 per script on a single server.
  const auto slot = route_->cluster() ? keys::slot(keys.front()) : std::uint16_t{0};
  std::string payload = encode_evalsha(s, keys, argv);
  std::string retry = payload;
  route_->submit(slot, std::move(payload), timeout,
                 [route = route_, reloads = reloads_, &s, slot, retry = std::move(retry), timeout,
                  handler = std::move(handler)](std::error_code ec, reply r) mutable {
                   if (ec != errc::no_script) return handler(ec, std::move(r));
                   ++*reloads;
                   route->submit(
                       slot, resp::encode_command({"SCRIPT", "LOAD", s.text}), timeout,
                       [](std::error_code, reply) {});  // its failure shows in the retry's reply
                   route->submit(slot, std::move(retry), timeout, std::move(handler));
                 });
}

}  // namespace dlock::scripts
