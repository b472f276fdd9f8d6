#include "transport/pipeline.hpp"

#include <algorithm>

#include "dlock/error.hpp"
#include "dlock/metrics.hpp"

namespace dlock::transport {

void complete(request& r, std::error_code ec, reply value) {
  if (!r.handler) return;
  if (ec && r.errors) {
    r.errors[errc_slot(ec)].fetch_add(1, std::memory_order_relaxed);
  }
  auto handler = std::move(r.handler);
  r.handler = nullptr;
  handler(ec, std::move(value));
}

void pipeline::take_writes(std::string& out, std::uint64_t generation) {
  for (auto& r : queued_) {
    if (r.generation != 0 && r.generation != generation) {
      complete(r, errc::connection_lost);  // its connection is gone
      continue;
    }
    out += r.payload;
    r.payload = std::string{};  // the bytes are in `out`; free them early
    in_flight_.push_back(std::move(r));
  }
  queued_.clear();
}

bool pipeline::on_reply(reply r) {
  if (in_flight_.empty()) return false;
  // Pop before completing: the handler may submit more work.
  request head = std::move(in_flight_.front());
  in_flight_.pop_front();
  std::error_code ec;
  if (r.is_error()) ec = classify_error_reply(r.str());
  complete(head, ec, std::move(r));
  return true;
}

void pipeline::on_disconnect() {
  auto lost = std::move(in_flight_);
  in_flight_.clear();
  for (auto& r : lost) complete(r, errc::connection_lost);
}

void pipeline::fail_queued(std::error_code ec) {
  auto failed = std::move(queued_);
  queued_.clear();
  for (auto& r : failed) complete(r, ec);
}

void pipeline::fail_all(std::error_code ec) {
  auto flying = std::move(in_flight_);
  in_flight_.clear();
  for (auto& r : flying) complete(r, ec);
  fail_queued(ec);
}

bool pipeline::expire(clock::time_point now, bool linked, std::error_code queued_ec) {
  auto due = [&](const request& r) {
    return r.deadline <= now || (!linked && r.link_deadline <= now);
  };
  std::deque<request> expired;
  auto keep = std::stable_partition(queued_.begin(), queued_.end(),
                                    [&](const request& r) { return !due(r); });
  std::move(keep, queued_.end(), std::back_inserter(expired));
  queued_.erase(keep, queued_.end());

  // The oldest request still waiting is the reply the server owes us next.
  auto oldest = std::find_if(in_flight_.begin(), in_flight_.end(),
                             [](const request& r) { return static_cast<bool>(r.handler); });
  const bool stuck = oldest != in_flight_.end() && oldest->deadline <= now;
  for (auto& r : in_flight_) {
    if (r.deadline <= now) complete(r, errc::timeout);
  }
  for (auto& r : expired) complete(r, queued_ec);
  return stuck;
}

std::optional<clock::time_point> pipeline::next_deadline(bool linked) const {
  std::optional<clock::time_point> best;
  auto consider = [&best](const request& r, clock::time_point t) {
    if (r.handler && (!best || t < *best)) best = t;
  };
  for (const auto& r : queued_)
    consider(r, linked ? r.deadline : std::min(r.deadline, r.link_deadline));
  for (const auto& r : in_flight_) consider(r, r.deadline);
  return best;
}

}  // namespace dlock::transport
