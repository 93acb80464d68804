# Runs PROGRAM with ARGS ('|'-separated) and fails unless it exits with exactly EXPECTED_STATUS
# and writes exactly one line to stderr that starts with "tessera-bench: ".
#   cmake -DPROGRAM=tessera-bench "-DARGS=fib|--workers|0" -DEXPECTED_STATUS=2 -P expect_status.cmake
# With -DNO_FILE=path, also fails if that file exists afterwards (it is removed first).
string(REPLACE "|" ";" arguments "${ARGS}")
if(DEFINED NO_FILE)
  file(REMOVE "${NO_FILE}")
endif()
execute_process(COMMAND "${PROGRAM}" ${arguments}
                RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT "${status}" STREQUAL "${EXPECTED_STATUS}")
  message(FATAL_ERROR "${PROGRAM} ${arguments}: exit status '${status}', expected ${EXPECTED_STATUS}\nstderr: ${err}")
endif()
string(REGEX MATCHALL "\n" newlines "${err}")
list(LENGTH newlines lines)
if(NOT lines EQUAL 1 OR NOT err MATCHES "^tessera-bench: ")
  message(FATAL_ERROR "${PROGRAM} ${arguments}: expected one 'tessera-bench: ...' line on stderr, got:\n${err}")
endif()
if(DEFINED NO_FILE AND EXISTS "${NO_FILE}")
  message(FATAL_ERROR "${PROGRAM} ${arguments}: left ${NO_FILE} behind")
endif()
message(STATUS "ok: ${err}")
