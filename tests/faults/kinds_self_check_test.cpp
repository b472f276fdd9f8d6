// The checker proves its rule for shared locks on a live run (issue 25): read holds may overlap
// each other, a write hold may overlap nothing while trusted. Two readers hold a shared_mutex's
// read side when a third worker comes to write. A broken worker that treats a read hold as
// permission to write exclusively (--kind broken-read-as-write: it takes the read side, which
// dlock grants at once beside the readers, and records a write hold) must be flagged; dlock's
// write side in the same run must show no violation, the readers' overlap being allowed.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "kinds_fault_lab.hpp"

using namespace std::chrono_literals;

namespace dlock::faults::test {
namespace {

class shared_self_check : public kinds_lab {
 protected:
  // Readers r1 and r2 hold for 800 ms (watchdog lease 1 s); once both are in, w comes to write
  // with `kind` and holds 100 ms.
  report writer_among_readers(const std::string& kind) {
    const auto url = lock_url("watchdog=1000ms");
    const std::vector<std::string> reader{"--kind", "read", "--hold", "800"};
    auto& r1 = spawn("r1", url, reader);
    EXPECT_TRUE(wait_line(r1, "enter ", 15s)) << r1.diagnostics();
    auto& r2 = spawn("r2", url, reader);
    EXPECT_TRUE(wait_line(r2, "enter ", 5s)) << r2.diagnostics();
    auto& w = spawn("w", url, {"--kind", kind, "--hold", "100", "--wait", "10000"});
    EXPECT_TRUE(wait_line(w, "exit ", 10s)) << w.diagnostics();
    wait_all_exit(10s);
    return finish();
  }

  static std::string shared_verdicts(const report& r) {
    return std::to_string(r.overlaps.size()) + " overlaps, " + std::to_string(r.trust_violations) +
           " trust violations, " + std::to_string(r.stale_accesses) + " stale accesses, " +
           std::to_string(r.shared_overlaps) + " read-read overlaps (allowed)";
  }
};

TEST_F(shared_self_check, a_worker_writing_under_a_read_hold_shows_overlaps_and_trust_violations) {
  const auto r = writer_among_readers("broken-read-as-write");
  EXPECT_FALSE(r.clean()) << report_json_;
  EXPECT_EQ(r.overlaps.size(), 2u) << "w's write hold beside r1 and r2\n" << report_json_;
  EXPECT_EQ(r.trust_violations, 2u) << "w entered while r1 and r2 trusted their holds\n"
                                    << report_json_;
  EXPECT_EQ(r.shared_overlaps, 1u) << "r1 with r2, not reported\n" << report_json_;
  EXPECT_EQ(r.fenced_lost_updates, 0u) << report_json_;
  measured("broken worker writing under a read hold of a shared_mutex, beside 2 readers: " +
           shared_verdicts(r));
}

TEST_F(shared_self_check, dlock_s_write_side_in_the_same_run_shows_none) {
  const auto r = writer_among_readers("write");
  EXPECT_TRUE(r.clean()) << report_json_;
  EXPECT_TRUE(r.overlaps.empty()) << report_json_;
  EXPECT_EQ(r.trust_violations, 0u) << report_json_;
  EXPECT_EQ(r.shared_overlaps, 1u) << "r1 with r2\n" << report_json_;
  EXPECT_EQ(r.errors, 0u) << report_json_;
  expect_fenced_safety(r);
  const auto* w = first_enter_after(r, 0, "w");
  ASSERT_NE(w, nullptr);
  for (const auto& s : r.sections) {
    if (s.proc != "w") {
      EXPECT_LE(s.end, w->enter) << s.proc << " left before the writer entered";
    }
  }
  measured("dlock's write side in the same run: " + shared_verdicts(r));
}

}  // namespace
}  // namespace dlock::faults::test
