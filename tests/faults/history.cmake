# The fault lab's histories, checker, workers and multi-process scenarios (issue 6, part 1).
#   dlock_fault_lab       history writer/reader, checker, resource, broken locks (a library)
#   dlock_fault_worker    one lock user per process, recording its history
#   dlock_fault_checker   the checker from the command line (prints the report as JSON)
#   dlock_fault_tests     checker tests on hand-written histories + the process scenarios
# Events are written with designated initializers naming only the fields that matter
# (`{.kind = "enter", .token = t}`); every other field has its default, which GCC's
# -Wmissing-field-initializers would flag.
function(dlock_fault_lab_warnings target)
  dlock_warnings(${target})
  target_compile_options(${target} PRIVATE -Wno-missing-field-initializers)
endfunction()

add_library(dlock_fault_lab STATIC
  ${CMAKE_CURRENT_SOURCE_DIR}/history.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/checker.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/checker_verdicts.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/checker_permits.cpp  # semaphores: at most N permits at once
  ${CMAKE_CURRENT_SOURCE_DIR}/checker_json.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/resource.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/broken_lock.cpp)
target_include_directories(dlock_fault_lab PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(dlock_fault_lab PUBLIC dlock)
dlock_fault_lab_warnings(dlock_fault_lab)

add_executable(dlock_fault_worker ${CMAKE_CURRENT_SOURCE_DIR}/fault_worker.cpp
                                  ${CMAKE_CURRENT_SOURCE_DIR}/worker_section.cpp
                                  ${CMAKE_CURRENT_SOURCE_DIR}/worker_lock.cpp  # --lock, --kind
                                  ${CMAKE_CURRENT_SOURCE_DIR}/worker_group_lock.cpp)  # red, multi
target_link_libraries(dlock_fault_worker PRIVATE dlock_fault_lab)
dlock_fault_lab_warnings(dlock_fault_worker)

add_executable(dlock_fault_checker ${CMAKE_CURRENT_SOURCE_DIR}/fault_checker.cpp)
target_link_libraries(dlock_fault_checker PRIVATE dlock_fault_lab)
dlock_fault_lab_warnings(dlock_fault_checker)

add_executable(dlock_fault_tests
  ${CMAKE_CURRENT_SOURCE_DIR}/checker_test.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/checker_verdicts_test.cpp  # trust, fencing order, unknown, FIFO
  ${CMAKE_CURRENT_SOURCE_DIR}/fault_test.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/clock_fault_test.cpp  # the lock server's clock stepped, run fast
  ${CMAKE_CURRENT_SOURCE_DIR}/self_check_test.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/sentinel_fault_test.cpp  # Sentinel: failovers, blocked replication
  ${CMAKE_CURRENT_SOURCE_DIR}/cluster_fault_test.cpp  # Redis Cluster: failover, resharding
  ${CMAKE_CURRENT_SOURCE_DIR}/checker_modes_test.cpp  # shared locks: read holds may overlap
  ${CMAKE_CURRENT_SOURCE_DIR}/kinds_fault_test.cpp  # fair_mutex, shared_mutex: a holder frozen
  ${CMAKE_CURRENT_SOURCE_DIR}/kinds_self_check_test.cpp  # the read/write rule on a live run
  ${CMAKE_CURRENT_SOURCE_DIR}/checker_permits_test.cpp  # semaphores: at most N permits at once
  ${CMAKE_CURRENT_SOURCE_DIR}/permits_fault_test.cpp  # leased_semaphore: a holder frozen
  ${CMAKE_CURRENT_SOURCE_DIR}/red_fault_test.cpp  # red_lock: servers killed, frozen
  ${CMAKE_CURRENT_SOURCE_DIR}/red_hazard_test.cpp  # red_lock: restart while held, the floor
  ${CMAKE_CURRENT_SOURCE_DIR}/multi_fault_test.cpp)  # multi_lock: overlapping sets
target_link_libraries(dlock_fault_tests PRIVATE dlock_fault_lab dlock_internal dlock_test_support
                                               GTest::gtest_main)
dlock_fault_lab_warnings(dlock_fault_tests)
add_dependencies(dlock_fault_tests dlock_fault_worker dlock_fault_checker)
target_compile_definitions(dlock_fault_tests PRIVATE
  DLOCK_FAULT_WORKER="$<TARGET_FILE:dlock_fault_worker>"
  DLOCK_FAULT_CHECKER="$<TARGET_FILE:dlock_fault_checker>")
gtest_discover_tests(dlock_fault_tests PROPERTIES LABELS faults TIMEOUT 120
                     DISCOVERY_TIMEOUT 60)
