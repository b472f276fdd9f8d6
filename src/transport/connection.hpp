// The pipelined command connection: many requests in flight on one socket, from any number of
// threads and coroutines. submit() is thread-safe and cheap (a locked push; one post per batch),
// so requests made while a write is in progress leave together in the next write.
// Early write: handlers on the strand that submit many requests in one turn (fifty lockers'
// next scripts, made by the replies of one read) would have them all wait for the posted
// flush, and the server would idle while the client works through the batch, then the client
// while the server does. Once early_write_batch requests wait and the submitter runs on the
// strand, they are flushed at once: the server starts on them while the rest are made.
//
// Timeouts: every request has a deadline (submission + its timeout). A request that expires
// completes with errc::timeout; if it was the oldest one in flight the server is not answering
// and the connection is dropped and re-established (in-flight requests then complete with
// errc::connection_lost, since their outcome is unknown). While no connection is up, a request
// waits at most the connect timeout and then fails with the connect error (e.g.
// errc::connection_refused); after a non-retryable connect error (auth, TLS) queued requests fail
// at once.
#pragma once

#include <functional>
#include <mutex>

#include "transport/link.hpp"
#include "transport/pipeline.hpp"

namespace dlock::transport {

class connection final : public link {
 public:
  connection(executor_type strand, config cfg, std::shared_ptr<asio::ssl::context> tls);

  // Sends one encoded command; `handler` runs on the connection's strand with the reply or an
  // error (error replies arrive as their errc with the reply holding the text). After stop()
  // the handler runs at once with errc::shutdown. Thread-safe.
  void submit(std::string payload, clock::duration timeout, reply_handler handler);
  // The same, but only on connection `generation` (a value of generation()): if that
  // connection is gone before the request is written, it completes with errc::connection_lost.
  void submit_on(std::uint64_t generation, std::string payload, clock::duration timeout,
                 reply_handler handler);

  // Counts the connections made: the one now up (strand only). A reply handler that reads it
  // learns which connection its request went out on.
  std::uint64_t generation() const noexcept { return generation_; }

  // Runs on the strand each time a connection is up again after the first (set before
  // start()): the server may have restarted or failed over meanwhile.
  void on_reconnect(std::function<void()> fn) { on_reconnect_ = std::move(fn); }

  // Runs on the strand when the server refuses the fence of old connections for good
  // (link.hpp, "Fencing"; set before start()).
  void when_unfenced(std::function<void(const std::string&)> fn) { on_unfenced_ = std::move(fn); }

  // Requests submitted and not yet answered: in the batch not yet flushed, queued or in flight
  // (strand only; shutdown's drain).
  std::size_t unanswered() const;

 private:
  void on_ready() override;
  void on_reply(reply r) override;
  void on_down(std::error_code why) override;
  void fill_write(std::string& out) override;
  void on_idle() override;
  void on_stopped() override;
  bool fences_old_connections() const override { return true; }
  void on_unfenced(const std::string& why) override {
    if (on_unfenced_) on_unfenced_(why);
  }

  void flush();
  void post_flush();
  static constexpr std::size_t early_write_batch = 8;
  // Counts the pipeline walks in progress that complete requests inline, and the reconnect
  // hook (strand only): a handler they run must not flush early into the queue being walked,
  // nor take the queue ahead of the write that follows on_ready().
  struct completing {
    explicit completing(int& n) : n_{n} { ++n_; }
    ~completing() { --n_; }
    completing(const completing&) = delete;
    completing& operator=(const completing&) = delete;
    int& n_;
  };
  int completing_ = 0;
  void arm_deadline(std::optional<clock::time_point> at);
  void on_deadline();
  std::error_code waiting_error() const;

  mutable std::mutex mu_;
  std::vector<request> incoming_;  // guarded by mu_
  bool flush_posted_ = false;      // guarded by mu_
  bool closed_ = false;            // guarded by mu_

  pipeline pipe_;
  asio::steady_timer deadline_timer_;
  clock::time_point armed_for_ = clock::time_point::max();
  std::uint64_t generation_ = 0;
  std::function<void()> on_reconnect_;
  std::function<void(const std::string&)> on_unfenced_;
};

}  // namespace dlock::transport
