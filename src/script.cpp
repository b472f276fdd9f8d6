// dlock::script and client::eval: a user's Lua script, by EVALSHA with one EVAL on NOSCRIPT.
#include "dlock/script.hpp"

#include <openssl/evp.h>

#include <string_view>
#include <vector>

#include "dlock/client.hpp"
#include "dlock/keys.hpp"
#include "resp/encoder.hpp"
#include "runtime/blocking.hpp"
#include "runtime/client_impl.hpp"
#include "runtime/observer.hpp"

namespace dlock {

namespace {

std::string sha1_hex(std::string_view text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(text.data(), text.size(), digest, &size, EVP_sha1(), nullptr);
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < size; ++i) {
    out += hex[digest[i] >> 4];
    out += hex[digest[i] & 0xf];
  }
  return out;
}

// EVALSHA's or EVAL's request: head (EVALSHA sha1 / EVAL text), the key count, keys, arguments.
std::string encode_script_call(std::string_view verb, std::string_view body,
                               const std::vector<std::string>& keys,
                               const std::vector<std::string>& args) {
  const auto nkeys = std::to_string(keys.size());
  std::vector<std::string_view> parts;
  parts.reserve(3 + keys.size() + args.size());
  parts.insert(parts.end(), {verb, body, nkeys});
  parts.insert(parts.end(), keys.begin(), keys.end());
  parts.insert(parts.end(), args.begin(), args.end());
  return resp::encode_command(parts);
}

}  // namespace

script::script(std::string text) {
  auto sha1 = sha1_hex(text);
  s_ = std::make_shared<const state>(state{std::move(text), std::move(sha1)});
}

const std::string& script::text() const noexcept { return s_->text; }
const std::string& script::sha1() const noexcept { return s_->sha1; }

void client::start_eval(const script& s, std::vector<std::string> keys,
                        std::vector<std::string> args, detail::completion<reply> done) {
  std::uint16_t slot = 0;
  if (impl_->cfg().cluster() && !keys.empty()) {
    slot = keys::slot(keys.front());
    for (const auto& k : keys) {
      if (keys::slot(k) == slot) continue;
      return impl_->post_or_shutdown(
          std::move(done), [](detail::completion<reply> d) { d(errc::cross_slot, reply{}); });
    }
  }
  auto payload = encode_script_call("EVALSHA", s.sha1(), keys, args);
  // The EVAL form is encoded only if NOSCRIPT asks for it: the common case sends the SHA1 alone.
  impl_->submit(slot, std::move(payload),
                [impl = impl_, s, slot, keys = std::move(keys), args = std::move(args),
                 done = std::move(done)](std::error_code ec, reply r) mutable {
                  if (ec != errc::no_script) return done(ec, std::move(r));
                  impl->observer().script_reloads.fetch_add(1, std::memory_order_relaxed);
                  impl->submit(slot, encode_script_call("EVAL", s.text(), keys, args),
                               std::move(done));
                });
}

reply client::eval(const script& s, std::vector<std::string> keys, std::vector<std::string> args,
                   std::error_code& ec) {
  return detail::run_blocking<reply>(*impl_, ec, [&](detail::completion<reply> done) {
    start_eval(s, std::move(keys), std::move(args), std::move(done));
  });
}

reply client::eval(const script& s, std::vector<std::string> keys, std::vector<std::string> args) {
  std::error_code ec;
  auto r = eval(s, std::move(keys), std::move(args), ec);
  if (ec) throw lock_error(ec, r.is_error() ? r.str() : std::string{});
  return r;
}

}  // namespace dlock
