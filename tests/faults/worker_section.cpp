#include "worker_section.hpp"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <iostream>
#include <mutex>
#include <thread>
#include <utility>

#include "dlock/error.hpp"

namespace dlock::faults {

namespace {

using namespace std::chrono_literals;

// Set when stdin reaches EOF: finish the current section and exit. (Not a member: the thread
// that watches stdin is detached and may outlive the worker.)
std::atomic<bool> stdin_closed{false};

void say(const std::string& line) { std::cout << line << '\n' << std::flush; }

void watch_stdin() {
  char buf[64];
  for (;;) {
    const auto n = ::read(0, buf, sizeof buf);
    if (n == 0 || (n < 0 && errno != EINTR)) break;
  }
  stdin_closed = true;
}

}  // namespace

// One section's lost signal, recorded once whichever thread sees it first, for every part.
struct worker::section_state {
  std::mutex mu;
  bool open = true;
  bool lost_recorded = false;
  std::uint64_t token = 0;  // the section's (acquire's) token, for stdout
  std::vector<held_lock::part> parts;
};

// A part of the section and what the holder read of its resource.
struct worker::held_part {
  held_lock::part id;
  resource* res = nullptr;
  std::int64_t read = 0, uread = 0;
};

worker::worker(const worker_options& o, history_writer& h, held_lock& l, dlock::client& resources)
    : o_{o}, h_{h}, lock_{l}, resources_{resources}, rng_{o.seed} {}

worker::~worker() = default;

int worker::run() {
  std::thread stdin_watch{watch_stdin};
  stdin_watch.detach();  // blocked in read(2) until EOF; the process exits around it
  long done = 0;
  while (done < o_.count && !stdin_closed) {
    std::uint64_t token = 0;
    h_.record({.kind = "acquire"});
    const auto ec = lock_.acquire(o_.wait, token);
    if (ec == dlock::errc::timeout) {
      h_.record({.kind = "timeout"});
      say("timeout");
      continue;
    }
    if (ec) {
      h_.record({.kind = "error", .detail = "acquire: " + ec.message()});
      say("error acquire: " + ec.message());
      std::this_thread::sleep_for(20ms);
      continue;
    }
    section(token, done == 0 && o_.hold_first ? *o_.hold_first : o_.hold);
    ++done;
    if (o_.think.count() > 0) std::this_thread::sleep_for(o_.think);
  }
  say("done " + std::to_string(done));
  return 0;
}

worker::milliseconds worker::jittered(milliseconds base) {
  if (o_.jitter.count() <= 0) return base;
  std::uniform_int_distribution<long> d{0, static_cast<long>(o_.jitter.count())};
  return base + milliseconds{d(rng_)};
}

resource& worker::resource_of(const std::string& lock) {
  auto& r = res_[lock];
  if (!r) r = std::make_unique<resource>(resources_, lock.empty() ? o_.name : lock);
  return *r;
}

void worker::record_lost(const std::shared_ptr<section_state>& st, const char* src) {
  std::lock_guard lock{st->mu};
  if (!st->open || st->lost_recorded) return;
  st->lost_recorded = true;
  for (const auto& p : st->parts) {
    h_.record({.kind = "lost", .token = p.token, .detail = src, .lock = p.lock});
  }
  say("lost " + std::to_string(st->token));
}

// True while the holder may touch the resource; records `lost` when it may not.
bool worker::still_held(const std::shared_ptr<section_state>& st) {
  if (lock_.lost()) record_lost(st, "check");
  std::lock_guard lock{st->mu};
  return !st->lost_recorded;
}

bool worker::resource_error(const char* what, std::error_code ec) {
  if (!ec) return false;
  h_.record({.kind = "error", .detail = std::string{what} + ": " + ec.message()});
  say(std::string{"error "} + what + ": " + ec.message());
  return true;
}

void worker::section(std::uint64_t token, milliseconds hold) {
  auto st = std::make_shared<section_state>();
  st->token = token;
  st->parts = lock_.parts(token);
  std::vector<held_part> parts;
  for (const auto& p : st->parts) parts.push_back({p, &resource_of(p.lock)});
  const auto detail = lock_.enter_detail();
  for (const auto& p : st->parts) {
    h_.record({.kind = "enter",
               .token = p.token,
               .left_ms = lock_.left_ms(),
               .detail = detail,
               .lock = p.lock,
               .mode = lock_.mode(),
               .limit = lock_.limit()});
  }
  say("enter " + std::to_string(token));
  lock_.on_lost([this, st] { record_lost(st, "callback"); });
  access_all(st, parts, hold);
  {
    std::lock_guard lock{st->mu};
    if (!st->lost_recorded) {
      for (const auto& p : st->parts) {
        h_.record({.kind = "exit", .token = p.token, .left_ms = lock_.left_ms(), .lock = p.lock});
      }
      say("exit " + std::to_string(token));
    }
    st->open = false;
  }
  const auto ec = lock_.release();
  for (const auto& p : st->parts) {
    h_.record(
        {.kind = "release", .token = p.token, .detail = ec ? ec.message() : "", .lock = p.lock});
  }
  if (ec && ec != dlock::errc::lease_lost) {
    h_.record({.kind = "error", .detail = "release: " + ec.message()});
    say("error release: " + ec.message());
  }
}

// The accesses of one section: every part's reads, the hold, every part's writes; returns early
// when the lease is lost or the resource fails. A refusal by the fence is recorded and does not
// stop the unfenced counter beside it: that counter shows what the same holder would have done
// to a resource without fencing.
void worker::access_all(const std::shared_ptr<section_state>& st, std::vector<held_part>& parts,
                        milliseconds hold) {
  for (auto& p : parts) {
    if (!read_part(st, p)) return;
  }
  lock_.hold_for(jittered(hold));
  for (auto& p : parts) {
    if (!write_part(st, p)) return;
  }
}

bool worker::read_part(const std::shared_ptr<section_state>& st, held_part& p) {
  std::error_code ec;
  if (!still_held(st)) return false;
  const auto r = p.res->fenced_read(p.id.token, ec);
  if (resource_error("fenced read", ec)) return false;
  p.read = r.value;
  h_.record({.kind = "read",
             .token = p.id.token,
             .ok = r.accepted,
             .value = r.value,
             .left_ms = lock_.left_ms(),
             .lock = p.id.lock});
  if (!still_held(st)) return false;
  p.uread = p.res->plain_get(ec);
  if (resource_error("plain get", ec)) return false;
  h_.record({.kind = "uread",
             .token = p.id.token,
             .value = p.uread,
             .left_ms = lock_.left_ms(),
             .lock = p.id.lock});
  return true;
}

// One write between its `invoke` and its completion; false when it failed, which is recorded
// as an unknown outcome (the request may have run and only its reply been lost).
template <class Send>
bool worker::write_access(event e, const char* what, Send send) {
  h_.record({.kind = "invoke",
             .token = e.token,
             .value = e.value,
             .read = e.read,
             .lock = e.lock,
             .op = e.kind});
  std::error_code ec;
  send(e, ec);
  e.unknown = static_cast<bool>(ec);
  if (!ec) e.left_ms = lock_.left_ms();
  h_.record(e);
  return !resource_error(what, ec);
}

bool worker::write_part(const std::shared_ptr<section_state>& st, held_part& p) {
  if (!still_held(st) || !lock_.writes()) return false;  // a reader ends with its check
  stop_in_the_window(st->token);
  const auto t = p.id.token;
  const bool written = write_access(
      {.kind = "write", .token = t, .value = p.read + 1, .read = p.read, .lock = p.id.lock},
      "fenced write", [&](event& e, std::error_code& error) {
        const auto w = p.res->fenced_write(t, e.value, error);
        e.ok = w.accepted;
        e.prev = w.value;
      });
  if (!written || !still_held(st)) return false;
  return write_access(
      {.kind = "uwrite", .token = t, .value = p.uread + 1, .read = p.uread, .lock = p.id.lock},
      "plain set",
      [&](event& e, std::error_code& error) { e.prev = p.res->plain_set(e.value, error); });
}

// --stop-before-write, first section: stopped after the lease check, before the write.
void worker::stop_in_the_window(std::uint64_t token) {
  if (!o_.stop_before_write || stopped_once_) return;
  stopped_once_ = true;
  say("stop " + std::to_string(token));
  ::raise(SIGSTOP);
}

}  // namespace dlock::faults
