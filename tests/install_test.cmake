# ctest -R install: installs the build tree's library into a scratch prefix, then configures and
# builds examples/consumer against it with find_package(tessera) and runs its program, which
# must print 1000. Run with cmake -P; the variables come from tests/CMakeLists.txt.
foreach(var BUILD_DIR SOURCE_DIR WORK_DIR GENERATOR BUILD_TYPE)
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
message(STATUS "installed to ${prefix}; examples/consumer built against it and printed 1000")
