include(CMakePackageConfigHelpers)

# The library, its headers (with the generated version.hpp) and its CMake package.
install(TARGETS dlock EXPORT dlockTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY include/dlock DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${PROJECT_BINARY_DIR}/include/dlock/version.hpp
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/dlock)
install(EXPORT dlockTargets NAMESPACE dlock:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/dlock)

configure_package_config_file(cmake/dlockConfig.cmake.in ${PROJECT_BINARY_DIR}/dlockConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/dlock)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/dlockConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/dlockConfig.cmake ${PROJECT_BINARY_DIR}/dlockConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/dlock)

# dlock.pc, for builds that use pkg-config rather than CMake. A static libdlock.a leaves its
# dependencies to the program that links it, so they are public there (a plain
# `pkg-config --libs dlock` must name them); a shared one carries them itself.
get_target_property(dlock_type dlock TYPE)
if(dlock_type STREQUAL "STATIC_LIBRARY")
  set(DLOCK_PC_REQUIRES "hiredis, libssl >= 3, libcrypto >= 3")
  set(DLOCK_PC_REQUIRES_PRIVATE "")
  set(DLOCK_PC_LIBS "${CMAKE_THREAD_LIBS_INIT}")
  set(DLOCK_PC_LIBS_PRIVATE "")
else()
  set(DLOCK_PC_REQUIRES "")
  set(DLOCK_PC_REQUIRES_PRIVATE "hiredis, libssl >= 3, libcrypto >= 3")
  set(DLOCK_PC_LIBS "")
  set(DLOCK_PC_LIBS_PRIVATE "${CMAKE_THREAD_LIBS_INIT}")
endif()
# Asio is header-only and public (the async API is Asio's); its directory only if not a default.
set(DLOCK_PC_CFLAGS "-DASIO_STANDALONE -DASIO_NO_DEPRECATED")
if(NOT ASIO_INCLUDE_DIR IN_LIST CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES)
  string(APPEND DLOCK_PC_CFLAGS " -I${ASIO_INCLUDE_DIR}")
endif()
string(STRIP "-L\${libdir} -ldlock ${DLOCK_PC_LIBS}" DLOCK_PC_LIBS)
set(dlock_pc_dir ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
file(RELATIVE_PATH DLOCK_PC_PREFIX_REL ${CMAKE_INSTALL_PREFIX}/${dlock_pc_dir}
     ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" DLOCK_PC_PREFIX_REL "${DLOCK_PC_PREFIX_REL}")
configure_file(cmake/dlock.pc.in ${PROJECT_BINARY_DIR}/dlock.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/dlock.pc DESTINATION ${dlock_pc_dir})

# The dlock command's man page, generated from its help, and its bash completion (the command
# itself is installed by tools/dlock). Not for a sanitizer build: the page would be written by
# an instrumented binary at build time.
if(TARGET dlock_cli AND NOT DLOCK_SANITIZE)
  find_program(DLOCK_HELP2MAN help2man)
  if(DLOCK_HELP2MAN)
    set(dlock_man ${PROJECT_BINARY_DIR}/man/dlock.1)
    add_custom_command(
      OUTPUT ${dlock_man}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/man
      COMMAND ${CMAKE_COMMAND} -E env HELP2MAN=${DLOCK_HELP2MAN}
              ${PROJECT_SOURCE_DIR}/tools/dlock/make_man_page $<TARGET_FILE:dlock_cli> ${dlock_man}
      DEPENDS dlock_cli ${PROJECT_SOURCE_DIR}/tools/dlock/make_man_page
      COMMENT "Generating dlock(1) from dlock --help"
      VERBATIM)
    add_custom_target(dlock_man ALL DEPENDS ${dlock_man})
    install(FILES ${dlock_man} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
  else()
    message(STATUS "help2man not found: no dlock(1) man page (scripts/setup installs it)")
  endif()
  install(FILES tools/dlock/completion.bash
          DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME dlock)
endif()

include(dlock_cpack)
