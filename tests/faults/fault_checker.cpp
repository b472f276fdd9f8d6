// dlock_fault_checker — the fault lab's checker from the command line.
//
//   dlock_fault_checker [--fifo] [--fifo-margin MS] DIR_OR_FILE...
//
// Reads every history given (a directory: its *.jsonl files), merges them by time and prints
// the report (checker.hpp) as one JSON object: every verdict, trust violations, fencing order
// and unknown outcomes included. --fifo judges arrival order too (the locks claim FIFO; acquires
// within --fifo-margin of each other count as simultaneous). Exits 0 when the history is clean,
// 1 when it shows a safety violation (or, with --fifo, a waiter served out of order), 2 on bad
// usage or unreadable input.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>

#include "checker.hpp"
#include "history.hpp"

namespace {

int usage() {
  std::cerr << "usage: dlock_fault_checker [--fifo] [--fifo-margin MS] DIR_OR_FILE...\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  dlock::faults::check_options options;
  int i = 1;
  for (; i < argc && std::string{argv[i]}.rfind("--", 0) == 0; ++i) {
    const std::string flag = argv[i];
    if (flag == "--fifo") {
      options.fifo = true;
    } else if (flag == "--fifo-margin" && i + 1 < argc) {
      const char* text = argv[++i];
      char* end = nullptr;
      const long margin = std::strtol(text, &end, 10);
      if (end == text || *end != '\0' || margin < 0) return usage();
      options.fifo_margin_ns = margin * 1'000'000;
    } else {
      return usage();
    }
  }
  if (i >= argc) return usage();
  std::vector<dlock::faults::event> all;
  std::size_t bad = 0;
  for (; i < argc; ++i) {
    const std::filesystem::path p{argv[i]};
    std::error_code ec;
    if (std::filesystem::is_directory(p, ec)) {
      auto part = dlock::faults::read_histories(p.string(), &bad);
      all.insert(all.end(), part.begin(), part.end());
    } else if (std::filesystem::is_regular_file(p, ec)) {
      auto part = dlock::faults::read_history(p.string(), &bad);
      all.insert(all.end(), part.begin(), part.end());
    } else {
      std::cerr << "dlock_fault_checker: cannot read " << p << '\n';
      return 2;
    }
  }
  std::stable_sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.t < b.t; });
  if (bad > 0) std::cerr << "dlock_fault_checker: " << bad << " malformed lines skipped\n";
  const auto r = dlock::faults::check(all, options);
  std::cout << dlock::faults::to_json(r) << '\n';
  return r.clean() ? 0 : 1;
}
