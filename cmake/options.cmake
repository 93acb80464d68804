# Build switches. One source of truth for the version: project() in the top-level CMakeLists.
include(GNUInstallDirs)
set(CMAKE_CXX_STANDARD 20)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
set(CMAKE_CXX_EXTENSIONS OFF)
set(CMAKE_EXPORT_COMPILE_COMMANDS ON)
set(CMAKE_POSITION_INDEPENDENT_CODE ON)

option(TESSERA_BUILD_TESTS "Build the GoogleTest suite" ${PROJECT_IS_TOP_LEVEL})
option(TESSERA_BUILD_BENCH "Build tessera-bench and the competitors" ${PROJECT_IS_TOP_LEVEL})
option(TESSERA_INSTALL "Install rules, a package for find_package(tessera) and tessera.pc" ${PROJECT_IS_TOP_LEVEL})
option(TESSERA_STATISTICS "Keep per-worker timing statistics (idle and parked time)" ON)
# On by default in a Debug build (a project that adds tessera with add_subdirectory or
# FetchContent and builds Debug gets the checks without asking); OFF elsewhere unless set.
if(CMAKE_BUILD_TYPE STREQUAL "Debug")
  set(tessera_debug_checks_default ON)
else()
  set(tessera_debug_checks_default OFF)
endif()
option(TESSERA_DEBUG_CHECKS
       "Programmer-error checks (a task handed over twice, a stale group, ...): std::logic_error"
       ${tessera_debug_checks_default})
# The definitions that code including tessera's headers needs as well: the library target's public
# compile definitions (src/CMakeLists.txt) and tessera.pc's Cflags (cmake/install.cmake) both use
# this one list.
set(TESSERA_PUBLIC_DEFINITIONS "")
if(TESSERA_STATISTICS)
  list(APPEND TESSERA_PUBLIC_DEFINITIONS TESSERA_STATISTICS=1)
endif()
if(TESSERA_DEBUG_CHECKS)
  list(APPEND TESSERA_PUBLIC_DEFINITIONS TESSERA_DEBUG_CHECKS=1)
endif()
set(TESSERA_SANITIZER "" CACHE STRING "Sanitizer for the whole build: '', address, thread")
set(TESSERA_NATIVE OFF CACHE BOOL "Compile with -march=native (bench preset)")
