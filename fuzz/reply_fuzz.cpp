// libFuzzer target: RESP2 reply reading and error classification. The bytes are read twice —
// in one piece, and split at points taken from the input — and both readings must give the
// same replies and the same verdict (a protocol error or not). Every error reply is classified
// (classify_error_reply, is_retryable) and every reply rendered (to_string).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "dlock/error.hpp"
#include "resp/reader.hpp"

namespace {

struct reading {
  std::vector<dlock::reply> replies;
  bool failed = false;
};

void drain(dlock::resp::reader& r, reading& out) {
  std::error_code ec;
  while (auto rep = r.next(ec)) out.replies.push_back(std::move(*rep));
  if (ec) {
    if (ec != dlock::errc::protocol_error) std::abort();
    out.failed = true;
  }
}

void visit(const dlock::reply& r) {
  if (r.is_error()) (void)dlock::is_retryable(dlock::classify_error_reply(r.str()));
  for (const auto& e : r.elements()) visit(e);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes{reinterpret_cast<const char*>(data), size};
  reading whole, pieces;
  {
    dlock::resp::reader r;
    r.feed(bytes);
    drain(r, whole);
  }
  {
    dlock::resp::reader r;
    std::size_t at = 0, step = size ? 1 + data[0] % 7 : 1;
    while (at < size && !pieces.failed) {
      const auto n = std::min(step, size - at);
      r.feed(bytes.substr(at, n));
      drain(r, pieces);
      at += n;
      step = 1 + data[at % size] % 13;
    }
  }
  if (whole.failed != pieces.failed) std::abort();
  if (!whole.failed && whole.replies != pieces.replies) std::abort();
  for (const auto& r : whole.replies) {
    visit(r);
    (void)dlock::to_string(r);
  }
  return 0;
}
