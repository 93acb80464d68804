# Run after a test binary is linked (cmake -P, from tessera_add_test_suites in test_suites.cmake):
# lists its tests and writes CTEST_FILE with one add_test per test suite.
# Inputs: EXECUTABLE, PREFIX, FILTER (a gtest filter or empty), WORKING_DIRECTORY, CTEST_FILE, and
# SUITES_VARIABLE, the variable the file sets to the names of its tests (the include file that
# reads it sets their properties).
set(list_args --gtest_list_tests)
if(FILTER)
  list(APPEND list_args "--gtest_filter=${FILTER}")
endif()
execute_process(COMMAND "${EXECUTABLE}" ${list_args}
                WORKING_DIRECTORY "${WORKING_DIRECTORY}"
                TIMEOUT 120
                RESULT_VARIABLE status OUTPUT_VARIABLE listing ERROR_VARIABLE errors)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "listing the tests of ${EXECUTABLE} failed (${status}):\n${listing}\n${errors}")
endif()

# --gtest_list_tests prints a suite as `suite.` at the start of a line and each of its tests
# indented below it; parameterized ones carry a `  # GetParam() = …` comment, dropped here.
string(REPLACE ";" "\\;" listing "${listing}")
string(REPLACE "\n" ";" lines "${listing}")
set(suites "")
set(suite "")
foreach(line IN LISTS lines)
  string(REGEX REPLACE "#.*$" "" line "${line}")
  string(STRIP "${line}" stripped)
  if(stripped STREQUAL "")
    continue()
  endif()
  if(line MATCHES "^[^ ].*\\.$")
    string(REGEX REPLACE "\\.$" "" suite "${stripped}")
    list(APPEND suites "${suite}")
    set("tests_${suite}" "")
  elseif(line MATCHES "^ " AND NOT suite STREQUAL "")
    list(APPEND "tests_${suite}" "${suite}.${stripped}")
  endif()
endforeach()
if(NOT suites)
  message(FATAL_ERROR "${EXECUTABLE} lists no tests (filter '${FILTER}'):\n${listing}")
endif()

# Values are written in bracket arguments, so that no character of a filter needs escaping.
set(out "# Written by discover_test_suites.cmake from ${EXECUTABLE} --gtest_list_tests\n")
set(names "")
foreach(suite IN LISTS suites)
  if(FILTER)
    list(JOIN "tests_${suite}" ":" selection)
  else()
    set(selection "${suite}.*")
  endif()
  string(APPEND out "add_test([==[${PREFIX}${suite}]==] [==[${EXECUTABLE}]==] "
                    "[==[--gtest_filter=${selection}]==])\n")
  string(APPEND names " [==[${PREFIX}${suite}]==]")
endforeach()
string(APPEND out "set(${SUITES_VARIABLE}${names})\n")
file(WRITE "${CTEST_FILE}" "${out}")
