#include "scripts/runner.hpp"

#include <vector>

#include "dlock/error.hpp"
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
  eval_encoded(s, encode_evalsha(s, keys, argv), timeout, std::move(handler));
}

void runner::eval_encoded(const script& s, std::string payload, transport::clock::duration timeout,
                          transport::reply_handler handler) const {
  std::string retry = payload;
  conn_->submit(std::move(payload), timeout,
                [conn = conn_, reloads = reloads_, &s, retry = std::move(retry), timeout,
                 handler = std::move(handler)](std::error_code ec, reply r) mutable {
                  if (ec != errc::no_script) return handler(ec, std::move(r));
                  ++*reloads;
                  conn->submit(
                      resp::encode_command({"SCRIPT", "LOAD", s.text}), timeout,
                      [](std::error_code, reply) {});  // its failure shows in the retry's reply
                  conn->submit(std::move(retry), timeout, std::move(handler));
                });
}

}  // namespace dlock::scripts
