// RESP2 reply parsing: hiredis' sans-io redisReader with our own reply functions, so replies
// are built directly as dlock::reply values (no redisReply trees, no second copy).
#pragma once

#include <optional>
#include <string_view>
#include <system_error>

#include "dlock/reply.hpp"

struct redisReader;

namespace dlock::resp {

class reader {
 public:
  reader();
  ~reader();
  reader(const reader&) = delete;
  reader& operator=(const reader&) = delete;

  // Appends bytes as they arrive; replies may be split across or coalesced within calls.
  void feed(std::string_view bytes);

  // The next complete reply, nullopt when more bytes are needed. On malformed input sets
  // `ec` to errc::protocol_error; the reader is then unusable (the connection must be reset).
  std::optional<reply> next(std::error_code& ec);

  // Discards buffered input and any error; for reuse after a reconnect.
  void reset();

 private:
  redisReader* r_ = nullptr;
};

}  // namespace dlock::resp
