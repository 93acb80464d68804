# Warnings and sanitizers are applied by one function to every target of the project.
function(tessera_configure_target target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
                                           # designated initializers that leave members at their
                                           # defaults (runtime_options{.workers = 2}) are the API.
                                           -Wno-missing-field-initializers)
  if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    # Lock-protected state is annotated (src/util/thread_annotations.h, GUARDED_BY and REQUIRES);
    # an access without its mutex is an error, not a warning to scroll past.
    target_compile_options(${target} PRIVATE -Wthread-safety -Werror=thread-safety)
  else()
    # GCC warns that std::hardware_destructive_interference_size may differ between -march
    # settings; we use it for padding only, inside one build.
    target_compile_options(${target} PRIVATE -Wno-interference-size)
  endif()
  if(TESSERA_NATIVE)
    target_compile_options(${target} PRIVATE -march=native)
  endif()
endfunction()

# The sanitizer builds are most of scripts/test.sh's time, so their flags are chosen for compile
# time, after the build type's (`-O2 -g`, which they override): line tables only (-g1: reports
# still name file and line), and an optimization level that keeps the suite quick to run without
# the optimizer's cost. GCC 12 compiles ASan+UBSan slowly above -Og: one test file took 40 s of
# CPU at -O1 -g, 15 s at -Og -g1; a TSan one 16 s at -O2 -g, 10 s at -O1 -g1 (docs/results.md).
if(TESSERA_SANITIZER STREQUAL "address")
  add_compile_options(-Og -g1 -fsanitize=address,undefined -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
elseif(TESSERA_SANITIZER STREQUAL "thread")
  add_compile_options(-O1 -g1 -fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
elseif(NOT TESSERA_SANITIZER STREQUAL "")
  message(FATAL_ERROR "TESSERA_SANITIZER must be '', 'address' or 'thread', got '${TESSERA_SANITIZER}'")
endif()
