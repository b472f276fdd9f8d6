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

std::string evalsha_to_eval(const script& s, const std::string& evalsha) {
  // "*<n>\r\n" then EVALSHA and the SHA1 as two bulk strings; the rest (keys, arguments) stays.
  const auto head = evalsha.find("\r\n") + 2;
  const auto sha = resp::encode_command({"EVALSHA", s.sha1});
  const auto replaced = sha.size() - (sha.find("\r\n") + 2);
  const auto eval = resp::encode_command({"EVAL", s.text});
  const auto with = eval.substr(eval.find("\r\n") + 2);
  return evalsha.substr(0, head) + with + evalsha.substr(head + replaced);
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
                   reloads->fetch_add(1, std::memory_order_relaxed);
                   route->submit(slot, evalsha_to_eval(s, retry), timeout, std::move(handler));
                 });
}

}  // namespace dlock::scripts
