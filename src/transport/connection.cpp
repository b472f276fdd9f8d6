#include "transport/connection.hpp"

#include <asio/post.hpp>
#include <asio/system_executor.hpp>

#include "dlock/error.hpp"
#include "resp/encoder.hpp"
#include "runtime/observer.hpp"

namespace dlock::transport {

connection::connection(executor_type strand, config cfg, std::shared_ptr<asio::ssl::context> tls)
    : link{std::move(strand), std::move(cfg), std::move(tls)}, deadline_timer_{get_executor()} {}

void connection::submit(std::string payload, clock::duration timeout, reply_handler handler) {
  submit_on(0, std::move(payload), timeout, std::move(handler));
}

void connection::submit_on(std::uint64_t generation, std::string payload, clock::duration timeout,
                           reply_handler handler) {
  const auto now = clock::now();
  request r{std::move(payload), now + timeout, now + cfg().connect_timeout,
            std::move(handler), generation,    observer().errors.data()};
  {
    std::unique_lock lock{mu_};
    if (!closed_) {
      incoming_.push_back(std::move(r));
      // Early write (see the header). Only on the strand, which flush() needs (and which owns
      // the link's state, so it is asked first); not from a handler the pipeline completes
      // while it walks its queues (a push would invalidate the walk); and only while
      // connected: flush() then never completes a request (it would inside this call).
      if (incoming_.size() >= early_write_batch && running_in(get_executor()) && completing_ == 0 &&
          ready() && !stopped()) {
        lock.unlock();
        return flush();
      }
      if (flush_posted_) return;
      flush_posted_ = true;
      lock.unlock();
      return post_flush();
    }
  }
  // Never complete inside the initiating call: the caller may hold a lock its handler takes.
  // Counted here: the completion runs on a system thread, maybe after the client (and its
  // observer) is gone.
  observer().count_error(errc::shutdown);
  r.errors = nullptr;
  asio::post(asio::system_executor{},
             [r = std::move(r)]() mutable { complete(r, errc::shutdown); });
}

// Runs on the strand: moves the batch submitted since the last flush into the pipeline.
void connection::flush() {
  std::vector<request> batch;
  {
    std::lock_guard lock{mu_};
    batch.swap(incoming_);
    flush_posted_ = false;
  }
  if (stopped()) {
    for (auto& r : batch) complete(r, errc::shutdown);
    return;
  }
  auto earliest = clock::time_point::max();
  for (auto& r : batch) {
    earliest = std::min(earliest, ready() ? r.deadline : std::min(r.deadline, r.link_deadline));
    pipe_.push(std::move(r));
  }
  if (earliest < armed_for_) arm_deadline(earliest);
  want_write();
}

void connection::post_flush() {
  asio::post(get_executor(),
             [self = std::static_pointer_cast<connection>(shared_from_this())] { self->flush(); });
}

std::size_t connection::unanswered() const {
  std::lock_guard lock{mu_};
  return incoming_.size() + pipe_.queued() + pipe_.in_flight();
}

void connection::fill_write(std::string& out) {
  const completing walk{completing_};
  const auto before = pipe_.in_flight();
  pipe_.take_writes(out, generation_);
  observer().commands_sent.fetch_add(pipe_.in_flight() - before, std::memory_order_relaxed);
}

void connection::on_ready() {
  arm_deadline(pipe_.next_deadline(true));
  // The hook's submits wait for the write that follows on_ready(): an early flush now would
  // take the queue before it, completing requests bound to the old connection inside them.
  const completing hook{completing_};
  if (++generation_ > 1 && on_reconnect_) on_reconnect_();
}

void connection::on_reply(reply r) {
  if (!pipe_.on_reply(std::move(r))) drop(errc::protocol_error);
}

void connection::on_down(std::error_code why) {
  const completing walk{completing_};
  pipe_.on_disconnect();
  // Waiting cannot fix a wrong password or a certificate the server rejects.
  if (!is_retryable(why) && why != errc::protocol_error) pipe_.fail_queued(why);
  arm_deadline(pipe_.next_deadline(false));
}

// A PING on an idle connection: if the server does not answer within the command timeout, the
// deadline check drops the connection, so a dead peer is found before a caller trips on it.
void connection::on_idle() {
  submit(resp::encode_command({"PING"}), cfg().command_timeout, [](std::error_code, reply) {});
}

void connection::on_stopped() {
  std::vector<request> late;
  {
    std::lock_guard lock{mu_};
    closed_ = true;
    late.swap(incoming_);
  }
  deadline_timer_.cancel();
  const completing walk{completing_};
  pipe_.fail_all(errc::shutdown);
  for (auto& r : late) complete(r, errc::shutdown);
}

std::error_code connection::waiting_error() const {
  if (ready()) return errc::timeout;
  if (auto e = last_error()) return e;
  return errc::connect_timeout;
}

void connection::arm_deadline(std::optional<clock::time_point> at) {
  if (!at) {
    armed_for_ = clock::time_point::max();
    deadline_timer_.cancel();
    return;
  }
  armed_for_ = *at;
  deadline_timer_.expires_at(*at);
  deadline_timer_.async_wait([self = std::static_pointer_cast<connection>(shared_from_this()),
                              at = *at](std::error_code ec) {
    if (ec || self->armed_for_ != at) return;  // re-armed or cancelled meanwhile
    self->on_deadline();
  });
}

void connection::on_deadline() {
  armed_for_ = clock::time_point::max();
  bool stuck = false;
  {
    const completing walk{completing_};
    stuck = pipe_.expire(clock::now(), ready(), waiting_error());
  }
  if (stuck) {
    drop(errc::timeout);  // re-arms through on_down
    return;
  }
  arm_deadline(pipe_.next_deadline(ready()));
}

}  // namespace dlock::transport
