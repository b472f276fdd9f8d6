# A Debian package of the install tree: `cpack -G DEB` in a build directory writes
# dlock_<version>_<arch>.deb (the library, headers, CMake package, dlock.pc, the dlock command,
# its man page and completion). Build it from a Release build for distribution (the ci preset's
# RelWithDebInfo keeps debug info: a much larger package).
set(CPACK_PACKAGE_NAME dlock)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
string(CONCAT CPACK_PACKAGE_DESCRIPTION
       "dlock gives C++ services Redisson's distributed locks on Redis: the dlock command (run a "
       "command under a lock, inspect and release locks) and the static library with its "
       "headers, CMake package and pkg-config file.")
set(CPACK_RESOURCE_FILE_README ${PROJECT_SOURCE_DIR}/README.md)
set(CPACK_GENERATOR DEB)
set(DLOCK_DEB_MAINTAINER "dlock maintainers <dlock@invalid>"
    CACHE STRING "Maintainer field of the Debian package")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${DLOCK_DEB_MAINTAINER}")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # dlock_0.1.0_amd64.deb
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
# The command's run-time libraries (libhiredis, libssl3, libstdc++...), found by dpkg-shlibdeps.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# Building against the static library needs its dependencies' headers and libraries.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "libhiredis-dev, libssl-dev (>= 3), libasio-dev, pkg-config")
include(CPack)
