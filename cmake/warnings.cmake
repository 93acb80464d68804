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

if(TESSERA_SANITIZER STREQUAL "address")
  # -O1 (after the build type's -O2, so it wins): what ASan's documentation recommends, and GCC 12
  # compiles ASan+UBSan at -O2 slowly. On a 2-core Zen 3 VM the asan build took 7.0 min at -O2 and
  # 5.0 at -O1, the suite's run 46 s and 44 s (2026-11-25); the build is most of scripts/test.sh.
  add_compile_options(-O1 -fsanitize=address,undefined -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
elseif(TESSERA_SANITIZER STREQUAL "thread")
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
elseif(NOT TESSERA_SANITIZER STREQUAL "")
  message(FATAL_ERROR "TESSERA_SANITIZER must be '', 'address' or 'thread', got '${TESSERA_SANITIZER}'")
endif()
