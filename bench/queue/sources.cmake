# tessera-bench queue: queue designs side by side (bench/queue/queue.h). Included at the end of
# bench/CMakeLists.txt, after tessera-bench is defined. tessera's own queues are internal
# (src/runtime/): this benchmark alone includes src/.
find_path(TESSERA_CONCURRENTQUEUE_INCLUDE concurrentqueue/concurrentqueue.h)
if(NOT TESSERA_CONCURRENTQUEUE_INCLUDE)
  message(FATAL_ERROR "moodycamel's concurrentqueue not found: run scripts/install-deps.sh "
                      "(Debian libconcurrentqueue-dev)")
endif()
set(queue_sources
  ${CMAKE_CURRENT_LIST_DIR}/queue.cpp
  ${CMAKE_CURRENT_LIST_DIR}/tessera.cpp
  ${CMAKE_CURRENT_LIST_DIR}/locks.cpp
  ${CMAKE_CURRENT_LIST_DIR}/libraries.cpp
)
target_sources(tessera-bench PRIVATE ${queue_sources})
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/tessera.cpp PROPERTIES
                            INCLUDE_DIRECTORIES ${PROJECT_SOURCE_DIR}/src)
if(NOT TESSERA_CONCURRENTQUEUE_INCLUDE STREQUAL "/usr/include")  # -I/usr/include breaks libstdc++
  set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/libraries.cpp PROPERTIES
                              INCLUDE_DIRECTORIES ${TESSERA_CONCURRENTQUEUE_INCLUDE})
endif()

if(TESSERA_BUILD_TESTS)
  # Smoke run: every pattern at 1 and 2, each run checking that every item arrived once. Under
  # ThreadSanitizer only our designs (moodycamel's and oneTBB's are not instrumented).
  set(TESSERA_BENCH_SMOKE_QUEUE "")
  if(TESSERA_SANITIZER STREQUAL "thread")
    set(TESSERA_BENCH_SMOKE_QUEUE --implementation tessera-local,tessera-inbox,mutex-deque,ticket)
  endif()
  add_test(NAME bench.smoke.queue
           COMMAND tessera-bench queue --items 20000 --workers 1,2 --repeat 1
                   ${TESSERA_BENCH_SMOKE_QUEUE})
  set_tests_properties(bench.smoke.queue PROPERTIES LABELS "bench" TIMEOUT 300)
endif()
