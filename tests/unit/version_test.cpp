// dlock/version.hpp: its macros and constants agree with each other and with the version CMake
// configured (DLOCK_TEST_PROJECT_VERSION, ${PROJECT_VERSION} passed by tests/unit/CMakeLists.txt).
#include <gtest/gtest.h>

#include <dlock/dlock.hpp>  // the umbrella header brings the version too
#include <string>

#ifndef DLOCK_TEST_PROJECT_VERSION
#error "tests/unit/CMakeLists.txt passes DLOCK_TEST_PROJECT_VERSION"
#endif

static_assert(DLOCK_VERSION ==
              DLOCK_VERSION_MAJOR * 100000 + DLOCK_VERSION_MINOR * 100 + DLOCK_VERSION_PATCH);
static_assert(DLOCK_VERSION_MINOR < 1000 && DLOCK_VERSION_PATCH < 100);

TEST(version, string_is_major_minor_patch) {
  const auto parts = std::to_string(DLOCK_VERSION_MAJOR) + "." +
                     std::to_string(DLOCK_VERSION_MINOR) + "." +
                     std::to_string(DLOCK_VERSION_PATCH);
  EXPECT_EQ(DLOCK_VERSION_STRING, parts);
  EXPECT_EQ(dlock::version, parts);
}

TEST(version, constants_match_macros) {
  EXPECT_EQ(dlock::version_major, DLOCK_VERSION_MAJOR);
  EXPECT_EQ(dlock::version_minor, DLOCK_VERSION_MINOR);
  EXPECT_EQ(dlock::version_patch, DLOCK_VERSION_PATCH);
}

TEST(version, matches_cmake_project_version) {
  EXPECT_EQ(dlock::version, DLOCK_TEST_PROJECT_VERSION);
}
