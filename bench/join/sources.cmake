# tessera-bench join: the morsel-driven hash join on TPC-H (apps/join) against DuckDB's own join
# (a Python helper in the project's .venv) and the same algorithm on oneTBB. Included at the end
# of bench/CMakeLists.txt.
target_sources(tessera-bench PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/join.cpp
  ${CMAKE_CURRENT_LIST_DIR}/tessera.cpp
  ${CMAKE_CURRENT_LIST_DIR}/onetbb.cpp
  ${CMAKE_CURRENT_LIST_DIR}/duckdb.cpp
)
target_link_libraries(tessera-bench PRIVATE tessera_join)
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/duckdb.cpp PROPERTIES COMPILE_DEFINITIONS
  "TESSERA_BENCH_DUCKDB_SCRIPT=\"${CMAKE_CURRENT_LIST_DIR}/duckdb_join.py\"")

if(TESSERA_BUILD_TESTS)
  # Smoke run: scale factor 0.01 (generated once per build tree through the .venv), both joins,
  # both worker counts, the extremes of the granularity; every answer checked against DuckDB's.
  # Under ThreadSanitizer tessera alone (oneTBB is built without it, DuckDB is another process).
  set(_join_smoke_impl "")
  if(TESSERA_SANITIZER STREQUAL "thread")
    set(_join_smoke_impl --implementation tessera)
  endif()
  add_test(NAME bench.smoke.join
           COMMAND tessera-bench join --scale-factor 0.01 --join customer-orders,orders-lineitem
                   --records-per-task 128,65536 --workers 1,2 --repeat 1 ${_join_smoke_impl})
  set_tests_properties(bench.smoke.join PROPERTIES LABELS "bench;join" TIMEOUT 300)
  set(_join_bad_command_lines
      "join_unknown_join:join|--join|part-supplier"
      "join_scale_factor_text:join|--scale-factor|ten"
      "join_scale_factor_zero:join|--scale-factor|0"
      "join_records_zero:join|--records-per-task|0")
  tessera_bench_usage_tests("" ${_join_bad_command_lines})
endif()
