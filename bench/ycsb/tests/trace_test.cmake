# Runs `tessera-bench ycsb` on a small run trace written here.
#   MODE=good: a valid trace (every verb, keys loaded and not, a scan of 0 entries) must pass
#              with status 0.
#   MODE=bad:  line 3 is malformed: status 2 and exactly one stderr line
#              "tessera-bench: --run-file: <file>:3: <reason>".
#   MODE=write: --write-load-file/--write-run-file write a generated workload (100 INSERT lines,
#              100 operations of workload a) and measure nothing; replaying both files passes.
#   cmake -DPROGRAM=tessera-bench -DDIR=/tmp -DMODE=bad -P trace_test.cmake
#   EXTRA: more flags for the good run (e.g. "--implementation tessera,threads" under TSan).
set(trace "${DIR}/ycsb_${MODE}_trace.txt")
if(MODE STREQUAL "good")
  # key_of(0) = 6284781860667377211 and key_of(1) are loaded; 7 and 8 are not.
  file(WRITE "${trace}" "# a comment\nREAD 6284781860667377211\nUPDATE 6284781860667377211\n"
                        "READ 7\nINSERT 8\nREAD 8\nSCAN 6284781860667377211 10\nSCAN 6284781860667377211 0\n"
                        "RMW 6284781860667377211\n"
                        "DELETE 6284781860667377211\nREAD usertable user8\n")
  separate_arguments(extra UNIX_COMMAND "${EXTRA}")
  execute_process(COMMAND "${PROGRAM}" ycsb --records 100 --run-file "${trace}" --workers 1,2
                          --repeat 1 --no-check ${extra}
                  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "exit status '${status}', expected 0\nstdout: ${out}\nstderr: ${err}")
  endif()
  message(STATUS "ok:\n${out}")
elseif(MODE STREQUAL "bad")
  file(WRITE "${trace}" "READ 1\nUPDATE 2\nFROB 3\nREAD 4\n")
  execute_process(COMMAND "${PROGRAM}" ycsb --records 100 --run-file "${trace}" --workers 1
                          --repeat 1
                  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT status EQUAL 2)
    message(FATAL_ERROR "exit status '${status}', expected 2\nstderr: ${err}")
  endif()
  string(REGEX MATCHALL "\n" newlines "${err}")
  list(LENGTH newlines lines)
  if(NOT lines EQUAL 1 OR NOT err MATCHES "^tessera-bench: --run-file: .*ycsb_bad_trace.txt:3: ")
    message(FATAL_ERROR "expected one 'tessera-bench: --run-file: FILE:3: ...' line, got:\n${err}")
  endif()
  message(STATUS "ok: ${err}")
elseif(MODE STREQUAL "write")
  set(load "${DIR}/ycsb_written_load.txt")
  set(run "${DIR}/ycsb_written_run.txt")
  file(REMOVE "${load}" "${run}")
  execute_process(COMMAND "${PROGRAM}" ycsb --workload a --records 100 --operations 100
                          --write-load-file "${load}" --write-run-file "${run}"
                  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT status EQUAL 0 OR out MATCHES "implementation")  # no table: nothing was measured
    message(FATAL_ERROR
            "writing: exit status '${status}', expected 0 and no table\nstdout: ${out}\nstderr: ${err}")
  endif()
  file(STRINGS "${load}" load_lines)
  file(STRINGS "${run}" run_lines)
  list(LENGTH load_lines n_load)
  list(LENGTH run_lines n_run)
  list(FILTER load_lines EXCLUDE REGEX "^INSERT [0-9]+$")
  if(NOT n_load EQUAL 100 OR NOT n_run EQUAL 100 OR load_lines)
    message(FATAL_ERROR "expected 100 INSERT lines and 100 operations, got ${n_load} and ${n_run}")
  endif()
  separate_arguments(extra UNIX_COMMAND "${EXTRA}")
  execute_process(COMMAND "${PROGRAM}" ycsb --load-file "${load}" --run-file "${run}" --workers 1
                          --repeat 1 ${extra}
                  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "replay: exit status '${status}', expected 0\nstdout: ${out}\nstderr: ${err}")
  endif()
  message(STATUS "ok:\n${out}")
else()
  message(FATAL_ERROR "MODE must be good, bad or write, got '${MODE}'")
endif()
