// Histories of the fault lab: what every process of a scenario did, one JSON object per line,
// stamped with CLOCK_MONOTONIC (the steady clock every process on the host shares, running
// through SIGSTOP), so the histories of several processes merge into one timeline.
//
//   dlock::faults::history_writer h{dir + "/w1.jsonl", "w1"};
//   h.record({.kind = "enter", .token = 7, .left_ms = 980});
//   ...
//   auto events = dlock::faults::read_histories(dir);   // every *.jsonl, sorted by time
//
// A line: {"t":123456789,"p":"w1","ev":"write","tok":7,"ok":true,"read":4,"prev":4,"val":5}
// Fields other than t, p and ev appear only when set. The kinds:
//   acquire an acquisition begins (its wait is the time to the next enter, timeout or error)
//   enter   acquire returned: tok (fencing token), left (ms of lease left: the holder's claim
//           that nobody else enters before enter + left; absent when the lock makes no claim),
//           mode (the side held of a shared lock: "read" or "write"; absent for an exclusive
//           lock — mutex, fair_mutex — and in histories written before it); "permit" for a
//           permit of a semaphore, with lim (the semaphore's permits N: at most N such sections
//           at once) and tok 0 (permits carry no fencing token)
//   invoke  a resource access is about to be sent: op (read, write, uread, uwrite), tok, and for
//           a write read and val. Optional: its completion is the access event below; with no
//           completion (the process died) the access may or may not have happened
//   read    fenced read of the resource: tok, ok (accepted by the fence), val (value read)
//   write   fenced write: tok, ok, read (value this holder read), val (value written),
//           prev (value the write replaced, as the resource saw it)
//   uread   unfenced GET of the plain counter: val
//   uwrite  unfenced SET of it: read (value this holder read), val, prev (value replaced)
//           An access's outcome is ok (accepted), fail ("ok":false, refused by the fence: not
//           applied) or unknown ("unknown":true: the reply never came; it may have applied)
//   exit    before the release is sent: tok
//   lost    the lease-lost signal (detail "callback" or "check"): tok
//   release the release's outcome: tok, detail (error text, empty when it succeeded)
//   timeout acquire gave up after its wait (not an error)
//   error   a user-visible error: detail
//   fault   what the test did (detail "kill9 w1", "pause lock-server"...)
//   final   the resource's final values (written by the test): val fenced, prev unfenced
// Several locks and threads: "lock" names the lock an event is about ("" when the history has
// one lock), "res" the fenced resource of an access ("" = the lock's own), and a process with
// several threads names each as "w1/t2" in p: every p is one sequential owner.
// Thread safety: history_writer::record may be called from any thread.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::faults {

// CLOCK_MONOTONIC in nanoseconds.
std::int64_t monotonic_ns() noexcept;

struct event {
  std::int64_t t = 0;  // monotonic_ns() when it happened (record() sets it if 0)
  std::string proc;    // who: a worker's id, or "test"
  std::string kind;    // enter, read, write, uread, uwrite, exit, lost, release, ...
  std::uint64_t token = 0;
  bool ok = true;
  std::int64_t value = 0;     // "val"
  std::int64_t read = 0;      // "read"
  std::int64_t prev = 0;      // "prev"
  std::int64_t left_ms = -1;  // "left": lease time left, -1 when unknown
  std::string detail;
  // Added later, so existing designated initializers stay in declaration order.
  std::string lock;      // "lock": the lock's name ("" = the history's one lock)
  std::string op;        // "op": what an invoke begins (read, write, uread, uwrite)
  bool unknown = false;  // "unknown": an access whose outcome is unknown (`ok` then means nothing)
  std::string resource;  // "res": the fenced resource accessed ("" = the one `lock` protects)
  std::string mode;      // "mode": on an enter, "read" or "write" (a shared lock); "" exclusive;
                         // "permit" (a semaphore's permit)
  std::int64_t limit = 0;  // "lim": on a permit's enter, the semaphore's permits (N)

  bool is_access() const noexcept {
    return kind == "read" || kind == "write" || kind == "uread" || kind == "uwrite";
  }
};

// One JSON line (without the newline) and back. parse_event returns false on malformed input.
std::string to_json(const event& e);
bool parse_event(std::string_view line, event& out);

// Appends events to a file (O_APPEND, one write(2) per line, so lines stay whole even if several
// writers share the file), flushed by the kernel at once: a process killed with SIGKILL loses
// nothing it recorded.
class history_writer {
 public:
  // Throws std::runtime_error if the file cannot be opened.
  history_writer(const std::string& path, std::string proc);
  ~history_writer();
  history_writer(const history_writer&) = delete;
  history_writer& operator=(const history_writer&) = delete;

  // Stamps (if e.t is 0) and writes one event; returns its time.
  std::int64_t record(event e);

 private:
  std::mutex mu_;
  int fd_ = -1;
  std::string proc_;
};

// Parses a file of JSON lines (malformed lines are counted in `bad_lines` if given).
std::vector<event> read_history(const std::string& path, std::size_t* bad_lines = nullptr);
// Every *.jsonl file of `dir`, merged and sorted by time (stable for equal times).
std::vector<event> read_histories(const std::string& dir, std::size_t* bad_lines = nullptr);

}  // namespace dlock::faults
