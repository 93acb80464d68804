# tessera_add_test_suites(<target> [PREFIX <p>] [FILTER <gtest filter>] [PROPERTIES <k> <v> ...])
#
# Registers a GoogleTest binary with CTest as one test per test suite (gtest's TEST(suite, name)
# or an instantiation of a parameterized suite), not one per test as gtest_discover_tests does:
# a suite runs in one process, so the suite's tests pay one start-up between them. Under ASan a
# process start costs ~0.08 CPU-s (shadow memory, interceptors), and the project's ~1,300 tests
# spent more time starting than testing. A failure's output names the test
# (gtest's own report), and `ctest -R <suite>` still picks a suite; one test is run with the
# binary's --gtest_filter.
#
# After each link the binary lists its tests (--gtest_list_tests, with FILTER when given); the
# CTest file written from that list is read by ctest, as gtest_discover_tests' is. With a FILTER,
# each suite's command names its tests one by one, so a suite split by the filter keeps the two
# halves apart; without, it runs `<suite>.*`.
set(TESSERA_DISCOVER_SUITES_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/discover_test_suites.cmake)

function(tessera_add_test_suites target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "PREFIX;FILTER" "PROPERTIES")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "tessera_add_test_suites(${target}): unknown arguments ${arg_UNPARSED_ARGUMENTS}")
  endif()
  # One list per call: a binary may be registered twice with different filters and properties.
  get_property(calls TARGET ${target} PROPERTY TESSERA_SUITE_CALLS)
  if(NOT calls)
    set(calls 0)
  endif()
  math(EXPR calls "${calls} + 1")
  set_property(TARGET ${target} PROPERTY TESSERA_SUITE_CALLS ${calls})

  set(ctest_file ${CMAKE_CURRENT_BINARY_DIR}/${target}_suites_${calls}.cmake)
  set(include_file ${CMAKE_CURRENT_BINARY_DIR}/${target}_suites_${calls}_include.cmake)
  add_custom_command(
    TARGET ${target} POST_BUILD
    BYPRODUCTS ${ctest_file}
    COMMAND ${CMAKE_COMMAND}
            -D "EXECUTABLE=$<TARGET_FILE:${target}>"
            -D "PREFIX=${arg_PREFIX}"
            -D "FILTER=${arg_FILTER}"
            -D "SUITES_VARIABLE=tessera_suites_${target}_${calls}"
            -D "WORKING_DIRECTORY=${CMAKE_CURRENT_BINARY_DIR}"
            -D "CTEST_FILE=${ctest_file}"
            -P ${TESSERA_DISCOVER_SUITES_SCRIPT}
    VERBATIM)
  # The properties are written here, each value in a bracket argument so that a list value
  # (LABELS "bench;fast") stays one value. Until the binary is built, ctest reports one failing
  # placeholder instead of nothing.
  set(properties "WORKING_DIRECTORY [==[${CMAKE_CURRENT_BINARY_DIR}]==]")
  foreach(item IN LISTS arg_PROPERTIES)
    string(APPEND properties " [==[${item}]==]")
  endforeach()
  file(WRITE ${include_file}
       "if(EXISTS \"${ctest_file}\")\n"
       "  include(\"${ctest_file}\")\n"
       "  set_tests_properties(\${tessera_suites_${target}_${calls}} PROPERTIES ${properties})\n"
       "else()\n"
       "  add_test(\"${arg_PREFIX}${target}_NOT_BUILT\" \"${target}_NOT_BUILT\")\n"
       "endif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${include_file})
endfunction()
