# Hostile replies and bad input (issue 6, part 3): every refusal a server or a caller can hand
# dlock::mutex, each checked for its typed errc, a return within the caller's deadline and no
# lock left held (docs/safety.md lists them with these tests' names).
add_executable(dlock_hostile_tests
  ${CMAKE_CURRENT_SOURCE_DIR}/hostile_keys_test.cpp     # what Redis holds, ACL keys, memory
  ${CMAKE_CURRENT_SOURCE_DIR}/hostile_server_test.cpp   # auth, server states, unreachable, TLS
  ${CMAKE_CURRENT_SOURCE_DIR}/hostile_input_test.cpp)   # names, leases, waits, configuration
target_link_libraries(dlock_hostile_tests PRIVATE dlock_internal dlock_test_support GTest::gtest_main)
dlock_warnings(dlock_hostile_tests)
if(DLOCK_SANITIZE)
  target_compile_definitions(dlock_hostile_tests PRIVATE DLOCK_TEST_SANITIZED)  # looser time bounds
endif()
gtest_discover_tests(dlock_hostile_tests PROPERTIES LABELS faults TIMEOUT 120 DISCOVERY_TIMEOUT 60)
