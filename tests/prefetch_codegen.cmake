# Fails unless the disassembly of OBJECT contains at least two prefetch instructions (x86-64:
# prefetcht0, prefetchw, ...; AArch64: prfm). See prefetch_codegen.cpp for why.
#   cmake -DOBJDUMP=objdump -DOBJECT=prefetch_codegen.cpp.o -P prefetch_codegen.cmake
execute_process(COMMAND "${OBJDUMP}" -d --no-show-raw-insn "${OBJECT}"
                RESULT_VARIABLE status OUTPUT_VARIABLE listing ERROR_VARIABLE err)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "${OBJDUMP} -d ${OBJECT} failed (${status}): ${err}")
endif()
string(REGEX MATCHALL "[ \t](prefetch[a-z0-9]*|prfm)[ \t]" found "${listing}")
list(LENGTH found count)
if(count LESS 2)
  message(FATAL_ERROR "issue_prefetch compiled at -O3 issues ${count} prefetch instruction(s), "
                      "expected at least 2: the compiler dropped them (src/runtime/prefetch.h)")
endif()
message(STATUS "ok: ${count} prefetch instructions in issue_prefetch at -O3")
