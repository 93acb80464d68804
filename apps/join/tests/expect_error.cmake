# Runs PROGRAM with ARGS ('|'-separated) and fails unless it exits with exactly EXPECTED_STATUS
# and writes one line to stderr that matches the regular expression EXPECTED (a clear error that
# names the problem, no crash, no sanitizer report).
#   cmake -DPROGRAM=tessera-join "-DARGS=--join|x" -DEXPECTED_STATUS=2 "-DEXPECTED=unknown join"
#         -P expect_error.cmake
string(REPLACE "|" ";" arguments "${ARGS}")
execute_process(COMMAND "${PROGRAM}" ${arguments}
                RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT "${status}" STREQUAL "${EXPECTED_STATUS}")
  message(FATAL_ERROR
          "${PROGRAM} ${arguments}: exit status '${status}', expected ${EXPECTED_STATUS}\n${err}")
endif()
string(REGEX MATCHALL "\n" newlines "${err}")
list(LENGTH newlines lines)
if(NOT lines EQUAL 1 OR NOT err MATCHES "${EXPECTED}")
  message(FATAL_ERROR
          "${PROGRAM} ${arguments}: expected one line matching '${EXPECTED}', got:\n${err}")
endif()
message(STATUS "ok: ${err}")
