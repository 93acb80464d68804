# tessera-bench prefetch: annotation-based prefetching by distance (bench/prefetch/prefetch.h).
# Included at the end of bench/CMakeLists.txt, after tessera-bench is defined.
target_sources(tessera-bench PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/prefetch.cpp
  ${CMAKE_CURRENT_LIST_DIR}/tessera.cpp
)

if(TESSERA_BUILD_TESTS)
  # Smoke run: a small store, both worker counts, with and without prefetching, writers
  # included; every run checks its answer.
  add_test(NAME bench.smoke.prefetch
           COMMAND tessera-bench prefetch --memory-mb 8 --visits 20000 --workers 1,2 --repeat 1
                   --prefetch-distance 0,2 --write-ratio 0,0.5)
  set_tests_properties(bench.smoke.prefetch PROPERTIES LABELS "bench" TIMEOUT 300)
  tessera_bench_usage_tests(prefetch_
    "write_ratio_above_one:prefetch|--write-ratio|0,1.5"
    "write_ratio_text:prefetch|--write-ratio|x"
    "object_bytes_odd:prefetch|--object-bytes|1000"
    "distance_above_max:prefetch|--prefetch-distance|17")
endif()
