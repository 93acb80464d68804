# ctest -R install: installs the build tree's library into a scratch prefix, then builds the first
# program against it twice, and runs each build, which must print 1000: examples/consumer with
# find_package(tessera), and a plain compiler call with the flags of `pkg-config tessera`. Run
# with cmake -P; the variables come from tests/CMakeLists.txt.
foreach(var BUILD_DIR SOURCE_DIR WORK_DIR GENERATOR BUILD_TYPE CXX PKG_CONFIG LIBDIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "install_test.cmake: -D${var}=... is missing")
  endif()
endforeach()

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
run("cmake --install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
foreach(installed include/tessera/tessera.h include/tessera/detail/task_cache.h)
  if(NOT EXISTS ${prefix}/${installed})
    message(FATAL_ERROR "cmake --install did not install ${installed}")
  endif()
endforeach()
run("configuring examples/consumer" ${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/consumer
    -B ${WORK_DIR}/build -G ${GENERATOR} -DCMAKE_BUILD_TYPE=${BUILD_TYPE}
    -DCMAKE_PREFIX_PATH=${prefix})
run("building examples/consumer" ${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run("running the consumer's first_program" ${WORK_DIR}/build/first_program)
if(NOT last_output STREQUAL "1000\n")
  message(FATAL_ERROR "the consumer's first_program printed '${last_output}', expected 1000")
endif()

run("pkg-config --cflags --libs tessera" ${CMAKE_COMMAND} -E env
    PKG_CONFIG_PATH=${prefix}/${LIBDIR}/pkgconfig ${PKG_CONFIG} --cflags --libs tessera)
separate_arguments(pc_flags UNIX_COMMAND "${last_output}")
run("compiling with pkg-config's flags" ${CXX} -std=c++20 ${SOURCE_DIR}/examples/first_program.cpp
    ${pc_flags} -o ${WORK_DIR}/first_program_pc)
run("running the pkg-config build of first_program" ${WORK_DIR}/first_program_pc)
if(NOT last_output STREQUAL "1000\n")
  message(FATAL_ERROR "the pkg-config build of first_program printed '${last_output}', expected 1000")
endif()
# Code compiled with the other TESSERA_DEBUG_CHECKS than the library's must not link (the types
# differ; runtime.h, detail::build_switches): the link error names the switch.
set(flipped_flags ${pc_flags})
list(FILTER flipped_flags EXCLUDE REGEX "^-DTESSERA_DEBUG_CHECKS")
if(flipped_flags STREQUAL pc_flags)
  list(APPEND flipped_flags -DTESSERA_DEBUG_CHECKS=1)
endif()
execute_process(COMMAND ${CXX} -std=c++20 ${SOURCE_DIR}/examples/first_program.cpp ${flipped_flags}
                        -o ${WORK_DIR}/first_program_mismatch
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(rc EQUAL 0)
  message(FATAL_ERROR "first_program linked with TESSERA_DEBUG_CHECKS flipped against the library")
endif()
if(NOT err MATCHES "TESSERA_DEBUG_CHECKS")
  message(FATAL_ERROR "the link error of a TESSERA_DEBUG_CHECKS mismatch does not name it:\n${err}")
endif()
message(STATUS "installed to ${prefix}; built against it with find_package and with pkg-config; "
               "a TESSERA_DEBUG_CHECKS mismatch does not link")
