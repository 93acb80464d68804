# scripts/plot.py on tests/data/plot_sample.json (rows of ycsb, prefetch, sync, join, queue,
# spawn, fib and dag, and one that is no row): exit status 0 and the figures it should draw, SVG
# and PNG; a file that is not JSON lines exits with 2. Run as cmake -DPYTHON=… -DSCRIPT=…
# -DINPUT=… -DOUT=… -P plot_test.cmake.
file(REMOVE_RECURSE "${OUT}")
execute_process(COMMAND "${PYTHON}" "${SCRIPT}" "${INPUT}" --out "${OUT}"
                RESULT_VARIABLE status OUTPUT_VARIABLE listed ERROR_VARIABLE notes)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "plot.py failed (${status}): ${notes}")
endif()
if(NOT notes MATCHES "row 12 skipped")
  message(FATAL_ERROR "plot.py did not note the row it skipped: ${notes}")
endif()
foreach(figure ycsb-throughput ycsb-ratio prefetch-distance sync-heatmap join-granularity
               queue-throughput spawn-throughput spawn-ratio fib-ratio dag-throughput dag-ratio)
  foreach(ext svg png)
    if(NOT EXISTS "${OUT}/${figure}.${ext}")
      message(FATAL_ERROR "plot.py wrote no ${figure}.${ext} (it listed: ${listed})")
    endif()
  endforeach()
endforeach()
file(WRITE "${OUT}/bad.json" "this is not JSON\n")
execute_process(COMMAND "${PYTHON}" "${SCRIPT}" "${OUT}/bad.json" --out "${OUT}/bad"
                RESULT_VARIABLE status ERROR_VARIABLE notes)
if(NOT status EQUAL 2 OR NOT notes MATCHES "not a JSON object per line")
  message(FATAL_ERROR "plot.py on a bad file: status ${status}, ${notes}")
endif()
