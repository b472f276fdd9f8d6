// The caller's channel: a second, plain command connection on which a blocking call
// (mutex::lock/try_lock*/unlock) sends its request and reads the reply on its own thread.
//
// Why: through the pipelined connection a blocking call costs two thread hand-offs per command
// (the caller posts to the I/O thread, which wakes; the reply's handler wakes the caller), which
// on a loaded host cost more than the round trip. Here the caller writes, sleeps in poll() until
// the reply and parses it itself: one sleep per command, as a synchronous client.
//
// Rules that keep it safe beside the pipelined connection (the callers in sync/ keep them):
// - one thread at a time (take() gives a turn or nothing: a busy channel means the pipelined
//   path, never waiting for the channel);
// - only to the server the pipelined connection is connected to now: the channel follows it
//   (its endpoint and connection count); after it reconnected the channel reconnects too;
// - any doubt (a timeout, a broken connection, a reply left over) closes the channel; the
//   request's outcome is unknown and the caller continues on the pipelined path, which resends
//   (the lock scripts are idempotent for an expected hold count);
// - never with TLS or config::wait_replicas (WAIT counts the writes of the connection that
//   sends it), nor with config::caller_io off.
// A channel that could not connect is not tried again for reconnect_max.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <asio/ip/tcp.hpp>

#include "dlock/config.hpp"
#include "dlock/reply.hpp"
#include "resp/reader.hpp"
#include "scripts/script.hpp"

namespace dlock::transport {

class link;

class caller_channel {
 public:
  using clock = std::chrono::steady_clock;

  // `follows`: the pipelined connection whose server this channel talks to.
  caller_channel(const config& cfg, const link& follows);
  ~caller_channel();
  caller_channel(const caller_channel&) = delete;
  caller_channel& operator=(const caller_channel&) = delete;

  class turn {
   public:
    turn() = default;
    explicit operator bool() const noexcept { return ch_ != nullptr; }
    // Sends an EVALSHA request (encoded by scripts::encode_evalsha) and reads its reply by
    // `deadline`. On NOSCRIPT loads the script and sends it again (one round trip). Error
    // replies come back as their errc with the reply holding the text, as on the pipelined
    // connection; errc::timeout and errc::connection_lost leave the outcome unknown.
    std::error_code eval(const scripts::script& s, std::string_view request,
                         clock::time_point deadline, reply& out);
    void release() { lock_ = {}; ch_ = nullptr; }
    // After eval() failed with no reply: the Redis client id of the connection the request went
    // out on (closed now), for the caller to fence; 0 if none. Once per failure.
    std::uint64_t take_doubtful() noexcept { return ch_ ? std::exchange(ch_->doubtful_, 0) : 0; }

   private:
    friend class caller_channel;
    turn(caller_channel* ch, std::unique_lock<std::mutex> lock) : ch_{ch}, lock_{std::move(lock)} {}
    caller_channel* ch_ = nullptr;
    std::unique_lock<std::mutex> lock_;
  };

  // A turn for the calling thread, connecting first if needed (by `deadline` at the latest);
  // an empty turn when another thread has it, the pipelined connection is not up, it was closed
  // for good, or it cannot connect now.
  turn take(clock::time_point deadline);

  // Closes it for good, after the turn in progress (shutdown).
  void close_for_good();

  // Requests sent on it so far (thread-safe; for tests and metrics).
  std::uint64_t calls() const noexcept { return calls_.load(); }
  // Connections made so far (thread-safe; for tests).
  std::uint64_t connects() const noexcept { return connects_.load(); }

 private:
  bool connect(const asio::ip::tcp::endpoint& ep, clock::time_point deadline);
  void close(bool reset = false);
  // Writes `bytes`, then reads `replies` replies into `out` (the last one kept); on any failure
  // closes the connection.
  std::error_code exchange(std::string_view bytes, std::size_t replies, clock::time_point deadline,
                           reply& out);
  bool set_timeout(clock::time_point deadline);
  bool write_all(std::string_view bytes, clock::time_point deadline, std::error_code& ec);
  std::optional<reply> read_one(clock::time_point deadline, std::error_code& ec);

  const config cfg_;
  const link& follows_;
  std::mutex mu_;
  // Guarded by mu_:
  int fd_ = -1;
  std::uint64_t follows_connects_ = 0;  // the pipelined connection's count we connected after
  clock::time_point retry_at_{};
  clock::time_point last_used_{};  // the last request's send
  static constexpr clock::duration unset{-1};
  clock::duration timeout_ = unset;  // SO_RCVTIMEO/SO_SNDTIMEO as last set (unset: never)
  std::uint64_t id_ = 0;        // CLIENT ID of the connection up now
  std::uint64_t doubtful_ = 0;  // CLIENT ID of one closed with a request in doubt
  bool closed_ = false;
  resp::reader reader_;
  std::vector<char> buf_;
  std::atomic<std::uint64_t> calls_{0}, connects_{0};
};

}  // namespace dlock::transport
