# Every dependency comes from the system's packages (scripts/install-deps.sh installs them on Debian 12).
find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(HWLOC REQUIRED IMPORTED_TARGET hwloc)

# libnuma-dev ships numa.pc (Debian 12: 2.0.16).
pkg_check_modules(NUMA IMPORTED_TARGET numa)
if(NOT NUMA_FOUND)
  message(FATAL_ERROR "libnuma not found by pkg-config (numa.pc): run scripts/install-deps.sh (apt-get install libnuma-dev)")
endif()

if(TESSERA_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(TESSERA_BUILD_BENCH)
  find_package(TBB REQUIRED)
  find_package(OpenMP REQUIRED)
  pkg_check_modules(JEMALLOC IMPORTED_TARGET jemalloc)
  pkg_check_modules(MIMALLOC IMPORTED_TARGET mimalloc)
  find_package(mimalloc QUIET)
  # tessera-bench's command line (libcli11-dev; Debian 12: 2.1.2, header-only).
  find_package(CLI11 CONFIG REQUIRED)
endif()
