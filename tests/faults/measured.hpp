// What a fault test measured, for docs/safety.md: printed as "[ measured ] <text>", and, when the
// environment variable DLOCK_FAULT_REPORT names a file, appended there as "<Suite.Test>\t<text>"
// (scripts/fault-report collects that file into docs/faults/report.md). Each line is its own
// open-append-close: ctest runs tests in parallel processes, and one short O_APPEND write lands
// whole.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <string>

namespace dlock::faults {

inline void measured(std::string text) {
  std::replace(text.begin(), text.end(), '\n', ' ');  // one line per figure
  std::replace(text.begin(), text.end(), '\t', ' ');
  std::cout << "[ measured ] " << text << std::endl;
  const char* path = std::getenv("DLOCK_FAULT_REPORT");
  if (path == nullptr || *path == '\0') return;
  const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string line = (test ? std::string{test->test_suite_name()} + "." + test->name()
                                 : std::string{"(outside a test)"}) +
                           '\t' + text + '\n';
  const int fd = ::open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  const bool written =
      fd >= 0 && ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  if (fd >= 0) ::close(fd);
  // A report missing a figure would pass unnoticed: fail the test instead.
  EXPECT_TRUE(written) << "cannot append to DLOCK_FAULT_REPORT=" << path;
}

}  // namespace dlock::faults
