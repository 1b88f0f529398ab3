# Cross toolchain for AArch64 Linux with Debian's g++-aarch64-linux-gnu, running target binaries
# (try_run, add_test, gtest_discover_tests) under qemu-user:
#
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64.cmake
#
# Target libraries are searched in the cross sysroot (/usr/aarch64-linux-gnu), in Debian's
# multiarch directories (/usr/lib/aarch64-linux-gnu, present once `dpkg --add-architecture arm64`
# and the :arm64 -dev packages are installed), and, when the environment variable
# TRINE_AARCH64_EXTRA_ROOT names a directory, under it first: a folder where arm64 .deb files
# (libpcre2-dev, libpcre2-8-0, libgtest-dev, libgmock-dev) were unpacked with `dpkg -x`, which
# cross-builds the whole project without touching the host's dpkg configuration.
# scripts/test-neon.sh uses this file for the standalone kernel check, which needs no
# third-party libraries.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(TRINE_CROSS_TRIPLE aarch64-linux-gnu)
set(TRINE_CROSS_SYSROOT /usr/${TRINE_CROSS_TRIPLE})
set(CMAKE_C_COMPILER ${TRINE_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${TRINE_CROSS_TRIPLE}-g++)
set(CMAKE_LIBRARY_ARCHITECTURE ${TRINE_CROSS_TRIPLE})

# Cross sysroot first, then the host root for multiarch (lib/aarch64-linux-gnu) and arch-independent
# packages (header-only CMake configs under /usr/share).
set(CMAKE_FIND_ROOT_PATH ${TRINE_CROSS_SYSROOT} /)
# Kept in the cache so that a re-configure started by the build (globs) finds it without the variable.
if(NOT "$ENV{TRINE_AARCH64_EXTRA_ROOT}" STREQUAL "")
  set(TRINE_AARCH64_EXTRA_ROOT "$ENV{TRINE_AARCH64_EXTRA_ROOT}" CACHE PATH "arm64 .debs unpacked with dpkg -x" FORCE)
endif()
set(TRINE_CROSS_EXTRA_ROOT "${TRINE_AARCH64_EXTRA_ROOT}")
if(TRINE_CROSS_EXTRA_ROOT)
  list(PREPEND CMAKE_FIND_ROOT_PATH ${TRINE_CROSS_EXTRA_ROOT})
endif()
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# pkg-config must report the target's .pc files, never the host's.
if(TRINE_CROSS_EXTRA_ROOT)
  set(ENV{PKG_CONFIG_LIBDIR} "${TRINE_CROSS_EXTRA_ROOT}/usr/lib/${TRINE_CROSS_TRIPLE}/pkgconfig")
  set(ENV{PKG_CONFIG_SYSROOT_DIR} "${TRINE_CROSS_EXTRA_ROOT}")
else()
  set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/${TRINE_CROSS_TRIPLE}/pkgconfig:/usr/share/pkgconfig")
  set(ENV{PKG_CONFIG_SYSROOT_DIR} "")
endif()

find_program(TRINE_QEMU_AARCH64 qemu-aarch64)
if(TRINE_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${TRINE_QEMU_AARCH64} -L ${TRINE_CROSS_SYSROOT})
endif()
