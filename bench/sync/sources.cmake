# tessera-bench sync: shared objects under tessera's synchronization primitives vs threads with a
# lock per object (bench/sync/sync.h). Included at the end of bench/CMakeLists.txt, after
# tessera-bench is defined.
target_sources(tessera-bench PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/sync.cpp
  ${CMAKE_CURRENT_LIST_DIR}/tessera.cpp
  ${CMAKE_CURRENT_LIST_DIR}/threads.cpp
)

if(TESSERA_BUILD_TESTS)
  # Smoke run: few objects (contention), every mix, both access patterns, every implementation,
  # both worker counts; every run checks its answer.
  add_test(NAME bench.smoke.sync
           COMMAND tessera-bench sync --objects 16 --ops 20000 --workers 1,2 --repeat 1)
  set_tests_properties(bench.smoke.sync PROPERTIES LABELS "bench" TIMEOUT 300)
  tessera_bench_usage_tests(sync_
    "mix_unknown:sync|--mix|90/10"
    "access_unknown:sync|--access|zipf"
    "objects_zero:sync|--objects|0"
    "hot_percent_above_100:sync|--hot-percent|101")
endif()
