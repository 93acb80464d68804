# Build switches. One source of truth for the version: project() in the top-level CMakeLists.
set(CMAKE_CXX_STANDARD 20)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
set(CMAKE_CXX_EXTENSIONS OFF)
set(CMAKE_EXPORT_COMPILE_COMMANDS ON)
set(CMAKE_POSITION_INDEPENDENT_CODE ON)

option(TESSERA_BUILD_TESTS "Build the GoogleTest suite" ${PROJECT_IS_TOP_LEVEL})
option(TESSERA_BUILD_BENCH "Build tessera-bench and the competitors" ${PROJECT_IS_TOP_LEVEL})
option(TESSERA_STATISTICS "Keep per-worker timing statistics (idle/parked time, prefetches)" ON)
option(TESSERA_DEBUG_CHECKS "Programmer-error assertions in release builds too" OFF)
set(TESSERA_SANITIZER "" CACHE STRING "Sanitizer for the whole build: '', address, thread")
set(TESSERA_NATIVE OFF CACHE BOOL "Compile with -march=native (bench preset)")
