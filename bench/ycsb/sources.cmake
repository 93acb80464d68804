# tessera-bench ycsb: YCSB load + run phases on the B-link tree (tessera task tree vs the OLC
# baseline on threads and oneTBB). Included at the end of bench/CMakeLists.txt.
target_sources(tessera-bench PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/ycsb.cpp
  ${CMAKE_CURRENT_LIST_DIR}/workload.cpp
  ${CMAKE_CURRENT_LIST_DIR}/progress.cpp
  ${CMAKE_CURRENT_LIST_DIR}/tessera.cpp
  ${CMAKE_CURRENT_LIST_DIR}/threads.cpp
  ${CMAKE_CURRENT_LIST_DIR}/tbb.cpp
)
target_link_libraries(tessera-bench PRIVATE tessera_ycsb tessera_kv_baselines tessera_kv_tasks)

# The external competitors `btreeolc` and `artolc` (bench/ycsb/external.cpp): off unless given a
# checkout of https://github.com/wangziqi2016/index-microbench, kept outside this repository
# (scripts/compare-external.sh fetches one). Its code is compiled with the benchmark's flags
# (-O3, -march=native and LTO under the bench preset) and never committed here.
set(TESSERA_INDEX_MICROBENCH_DIR "" CACHE PATH
    "index-microbench source tree: adds its BTreeOLC and ART-OLC to tessera-bench ycsb")
if(TESSERA_INDEX_MICROBENCH_DIR)
  if(NOT EXISTS "${TESSERA_INDEX_MICROBENCH_DIR}/BTreeOLC/BTreeOLC.h"
     OR NOT EXISTS "${TESSERA_INDEX_MICROBENCH_DIR}/ARTOLC/Tree.cpp")
    message(FATAL_ERROR "TESSERA_INDEX_MICROBENCH_DIR=${TESSERA_INDEX_MICROBENCH_DIR} holds no "
                        "BTreeOLC/BTreeOLC.h and ARTOLC/Tree.cpp (an index-microbench checkout)")
  endif()
  # ART-OLC's Tree.cpp includes its other sources; their warnings are not ours (-w).
  add_library(tessera_ext_artolc STATIC ${TESSERA_INDEX_MICROBENCH_DIR}/ARTOLC/Tree.cpp)
  target_include_directories(tessera_ext_artolc SYSTEM PUBLIC ${TESSERA_INDEX_MICROBENCH_DIR})
  target_compile_options(tessera_ext_artolc PRIVATE -w $<$<BOOL:${TESSERA_NATIVE}>:-march=native>)
  target_link_libraries(tessera_ext_artolc PUBLIC TBB::tbb)
  target_sources(tessera-bench PRIVATE ${CMAKE_CURRENT_LIST_DIR}/external.cpp)
  target_compile_definitions(tessera-bench PRIVATE TESSERA_YCSB_EXTERNAL=1)
  target_link_libraries(tessera-bench PRIVATE tessera_ext_artolc)
endif()

if(TESSERA_BUILD_TESTS)
  # Unit tests of the answer checks (verify.h: scan completeness above all) and of the stable keys
  # prepare_workload() hands them.
  add_executable(tessera_ycsb_bench_tests ${CMAKE_CURRENT_LIST_DIR}/tests/verify_test.cpp
                                          ${CMAKE_CURRENT_LIST_DIR}/workload.cpp)
  target_include_directories(tessera_ycsb_bench_tests PRIVATE ${CMAKE_CURRENT_LIST_DIR}/..)
  target_link_libraries(tessera_ycsb_bench_tests PRIVATE tessera_ycsb tessera_kv_baselines
                                                         tessera_kv_tasks GTest::gtest_main)
  tessera_configure_target(tessera_ycsb_bench_tests)
  tessera_add_test_suites(tessera_ycsb_bench_tests PREFIX "bench.ycsb." PROPERTIES TIMEOUT 300
                          LABELS "bench;fast")

  # Smoke runs: every implementation, both worker counts, every answer and both trees checked;
  # workload a in two rounds, so that the implementations take turns.
  set(_ycsb_smoke_workloads a e)
  set(_ycsb_smoke_repeats 2 1)
  foreach(workload repeat IN ZIP_LISTS _ycsb_smoke_workloads _ycsb_smoke_repeats)
    add_test(NAME bench.smoke.ycsb_${workload}
             COMMAND tessera-bench ycsb --workload ${workload} --records 20000
                     --operations 20000 --workers 1,2 --repeat ${repeat}
                     ${TESSERA_BENCH_SMOKE_YCSB})
  endforeach()
  list(JOIN TESSERA_BENCH_SMOKE_YCSB " " _ycsb_smoke_extra)
  # Trace replay (a generated load plus a small run trace) and the boolean --no-check.
  add_test(NAME bench.smoke.ycsb_trace
           COMMAND ${CMAKE_COMMAND} -DPROGRAM=$<TARGET_FILE:tessera-bench>
                   -DDIR=${CMAKE_CURRENT_BINARY_DIR} -DMODE=good
                   "-DEXTRA=${_ycsb_smoke_extra}"
                   -P ${CMAKE_CURRENT_LIST_DIR}/tests/trace_test.cmake)
  # A malformed run trace: exit status 2, one "tessera-bench: ..." line naming the line number.
  add_test(NAME bench.usage.ycsb_bad_trace
           COMMAND ${CMAKE_COMMAND} -DPROGRAM=$<TARGET_FILE:tessera-bench>
                   -DDIR=${CMAKE_CURRENT_BINARY_DIR} -DMODE=bad
                   -P ${CMAKE_CURRENT_LIST_DIR}/tests/trace_test.cmake)
  # --write-load-file/--write-run-file, then both files replayed.
  add_test(NAME bench.smoke.ycsb_write_trace
           COMMAND ${CMAKE_COMMAND} -DPROGRAM=$<TARGET_FILE:tessera-bench>
                   -DDIR=${CMAKE_CURRENT_BINARY_DIR} -DMODE=write
                   "-DEXTRA=${_ycsb_smoke_extra}"
                   -P ${CMAKE_CURRENT_LIST_DIR}/tests/trace_test.cmake)
  set_tests_properties(bench.smoke.ycsb_a bench.smoke.ycsb_e bench.smoke.ycsb_trace
                       bench.smoke.ycsb_write_trace bench.usage.ycsb_bad_trace
                       PROPERTIES LABELS "bench" TIMEOUT 300)
endif()
