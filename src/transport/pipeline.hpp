// The request/reply state machine of one command connection, with no sockets or timers.
//
// Requests are queued in submission order, written in batches (all queued bytes at once, so
// concurrent callers share one write and one round trip) and matched to replies strictly in
// order, as RESP2 guarantees. Invariants:
//   - a request reported as failed or timed out is never written afterwards;
//   - a written request whose reply is lost to a disconnect completes with
//     errc::connection_lost (its effect on the server is unknown), never silently re-sent;
//   - a request that expires while in flight keeps its slot so later replies still match.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <system_error>

#include "dlock/detail/unique_function.hpp"
#include "dlock/reply.hpp"

namespace dlock::transport {

using clock = std::chrono::steady_clock;
using reply_handler = detail::unique_function<void(std::error_code, reply)>;

struct request {
  std::string payload;         // one encoded command
  clock::time_point deadline;  // complete with errc::timeout if no reply by then
  // While no connection is up, a queued request gives up at this time (submission + connect
  // timeout) with the last connect error: an unreachable server is reported promptly.
  clock::time_point link_deadline = clock::time_point::max();
  reply_handler handler;  // empty once completed (an abandoned in-flight slot)
  // Non-zero: the request may only go out on this connection (see connection::generation()):
  // written after a reconnect it would mean something else (WAIT counts the writes of the
  // connection that sends it), so it completes with errc::connection_lost instead.
  std::uint64_t generation = 0;
  // The client's error counters (observer::errors): an error completion counts at its errc's
  // value, errors of other categories at 0. Null: not counted.
  std::atomic<std::uint64_t>* errors = nullptr;
};

class pipeline {
 public:
  // Queues a request to be written.
  void push(request r) { queued_.push_back(std::move(r)); }

  bool has_queued() const noexcept { return !queued_.empty(); }
  std::size_t queued() const noexcept { return queued_.size(); }
  std::size_t in_flight() const noexcept { return in_flight_.size(); }

  // Moves every queued request in flight, appending their bytes to `out` (one write), on the
  // connection `generation`; a request bound to another one completes with connection_lost.
  void take_writes(std::string& out, std::uint64_t generation = 0);

  // Completes the oldest in-flight request with `r` (error replies become their errc).
  // Returns false when nothing is in flight: the server sent a reply nobody asked for.
  bool on_reply(reply r);

  // The connection broke: in-flight requests complete with errc::connection_lost. Queued
  // requests stay for the next connection.
  void on_disconnect();

  // Completes every request, queued or in flight, with `ec`.
  void fail_all(std::error_code ec);
  // Completes every queued (unwritten) request with `ec`.
  void fail_queued(std::error_code ec);

  // Completes requests that are due: queued ones (deadline passed, or link_deadline passed while
  // !linked) are removed and complete with `queued_ec`; in-flight ones complete with
  // errc::timeout and keep their slot. Returns true when the oldest in-flight request expired,
  // i.e. the server has not answered in time and the connection should be dropped.
  bool expire(clock::time_point now, bool linked, std::error_code queued_ec);

  // The earliest time at which expire() has something to do.
  std::optional<clock::time_point> next_deadline(bool linked) const;

 private:
  std::deque<request> queued_;
  std::deque<request> in_flight_;
};

// Completes a request's handler (if it has one) and leaves it empty.
void complete(request& r, std::error_code ec, reply value = {});

}  // namespace dlock::transport
