// dlock_fault_checker — the fault lab's checker from the command line.
//
//   dlock_fault_checker DIR_OR_FILE...
//
// Reads every history given (a directory: its *.jsonl files), merges them by time and prints
// the report (checker.hpp) as one JSON object. Exits 0 when the history is clean, 1 when it
// shows a safety violation, 2 on bad usage or unreadable input.
#include <algorithm>
#include <filesystem>
#include <iostream>

#include "checker.hpp"
#include "history.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: dlock_fault_checker DIR_OR_FILE...\n";
    return 2;
  }
  std::vector<dlock::faults::event> all;
  std::size_t bad = 0;
  for (int i = 1; i < argc; ++i) {
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
  const auto r = dlock::faults::check(all);
  std::cout << dlock::faults::to_json(r) << '\n';
  return r.clean() ? 0 : 1;
}
