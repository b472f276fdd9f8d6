# Partitions and latency through a loopback TCP proxy the tests control (support/tcp_proxy):
# the proxy's own tests, then dlock::mutex holders and acquirers cut off, paused and slowed,
# and the WAIT policy with a replica behind the proxy (replication_test.cpp).
add_executable(dlock_partition_tests
  ${CMAKE_CURRENT_SOURCE_DIR}/partition_proxy_test.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/partition_test.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/partition_acquire_test.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/late_request_test.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/handoff_stall_test.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/replication_test.cpp)
target_link_libraries(dlock_partition_tests PRIVATE dlock_internal dlock_test_support GTest::gtest_main)
dlock_warnings(dlock_partition_tests)
gtest_discover_tests(dlock_partition_tests PROPERTIES LABELS faults TIMEOUT 120 DISCOVERY_TIMEOUT 60)
