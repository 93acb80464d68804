# tessera-bench dag: task graphs, tessera's task_graph against oneTBB's flow graph and OpenMP
# tasks with depend clauses (bench/dag/dag.h). Included at the end of bench/CMakeLists.txt, after
# tessera-bench is defined.
target_sources(tessera-bench PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/dag.cpp
  ${CMAKE_CURRENT_LIST_DIR}/tessera.cpp
  ${CMAKE_CURRENT_LIST_DIR}/onetbb.cpp
  ${CMAKE_CURRENT_LIST_DIR}/openmp.cpp
)
# UBSan's vptr check fires inside oneTBB's own flow-graph header: graph_task::finalize calls
# destruct_and_deallocate, which downcasts a task it has already destroyed
# (oneapi/tbb/detail/_flow_graph_impl.h). That is oneTBB's code, instantiated in this file; the
# other checks stay on.
if(TESSERA_SANITIZER STREQUAL "address")
  set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/onetbb.cpp PROPERTIES
                              COMPILE_OPTIONS -fno-sanitize=vptr)
endif()

if(TESSERA_BUILD_TESTS)
  # Smoke run: every shape at a small size, empty and working nodes, both worker counts; every
  # run checks the order. Under ThreadSanitizer oneTBB and libgomp (built without it) sit out,
  # as in the other smoke runs.
  set(dag_smoke_implementations "")
  if(TESSERA_SANITIZER STREQUAL "thread")
    set(dag_smoke_implementations --implementation tessera)
  endif()
  add_test(NAME bench.smoke.dag
           COMMAND tessera-bench dag --nodes 3000 --edges 6000 --work 10 --workers 1,2
                   --repeat 2 ${dag_smoke_implementations})
  set_tests_properties(bench.smoke.dag PROPERTIES LABELS "bench" TIMEOUT 300)
  tessera_bench_usage_tests(dag_
    "shape_unknown:dag|--shape|star"
    "nodes_zero:dag|--nodes|0"
    "edges_too_few:dag|--shape|layered|--nodes|100|--edges|10")
endif()
