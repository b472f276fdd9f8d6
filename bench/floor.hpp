// What the floor programs (floor_pair.cpp, floor_ping.cpp, floor_w3.cpp) share: a plain hiredis
// connection with the synchronous API, and loading dlock's scripts on it. No dlock runtime.
#pragma once

#include <hiredis/hiredis.h>
#include <poll.h>

#include <cerrno>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "common.hpp"
#include "scripts/script.hpp"

namespace bench::plain {

struct free_reply {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using reply_ptr = std::unique_ptr<redisReply, free_reply>;

class conn {
 public:
  conn(const std::string& host, int port) : c_{redisConnect(host.c_str(), port)} {
    if (c_ == nullptr || c_->err != 0) {
      throw std::runtime_error("connect: " + std::string{c_ != nullptr ? c_->errstr : "no memory"});
    }
  }
  // To --host (default 127.0.0.1) and --port (default 6379), as every floor tool takes them.
  explicit conn(const options& opt)
      : conn{opt.str("host", "127.0.0.1"), static_cast<int>(opt.integer("port", 6379))} {}
  ~conn() { redisFree(c_); }
  conn(const conn&) = delete;
  conn& operator=(const conn&) = delete;

  // One command, argv as given; throws on a connection error.
  reply_ptr command(const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    argv.reserve(args.size());
    lens.reserve(args.size());
    for (const auto& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    reply_ptr r{static_cast<redisReply*>(
        redisCommandArgv(c_, static_cast<int>(argv.size()), argv.data(), lens.data()))};
    if (!r) throw std::runtime_error("command: " + std::string{c_->errstr});
    return r;
  }

  // Sends one command without reading its reply (a SUBSCRIBE, whose confirmations next() reads
  // as they come); throws on a connection error.
  void send(const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    for (const auto& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    if (redisAppendCommandArgv(c_, static_cast<int>(argv.size()), argv.data(), lens.data()) !=
        REDIS_OK) {
      throw std::runtime_error("send: " + std::string{c_->errstr});
    }
    for (int done = 0; done == 0;) {
      if (redisBufferWrite(c_, &done) != REDIS_OK) {
        throw std::runtime_error("write: " + std::string{c_->errstr});
      }
    }
  }

  // The next reply (a pushed message on a subscribed connection) within `timeout_ms`; null when
  // none came by then. The context stays usable after a timeout (hiredis' own socket timeout
  // would leave it in error). Throws on a connection error.
  reply_ptr next(int timeout_ms) {
    for (;;) {
      void* r = nullptr;
      if (redisReaderGetReply(c_->reader, &r) != REDIS_OK)
        throw std::runtime_error("protocol error");
      if (r != nullptr) return reply_ptr{static_cast<redisReply*>(r)};
      pollfd p{c_->fd, POLLIN, 0};
      const int n = ::poll(&p, 1, timeout_ms);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw std::runtime_error("poll failed");
      if (n == 0) return nullptr;
      if (redisBufferRead(c_) != REDIS_OK)
        throw std::runtime_error("read: " + std::string{c_->errstr});
    }
  }

 private:
  redisContext* c_;
};

// SCRIPT LOAD, checking that the server's SHA is the one dlock sends.
inline void load(conn& c, const dlock::scripts::script& s) {
  auto r = c.command({"SCRIPT", "LOAD", std::string{s.text}});
  if (r->type != REDIS_REPLY_STRING || std::string{r->str, r->len} != s.sha1) {
    throw std::runtime_error("SCRIPT LOAD " + std::string{s.name} + " returned an unexpected SHA");
  }
}

}  // namespace bench::plain
