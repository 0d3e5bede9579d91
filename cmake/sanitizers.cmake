# Sanitizer and fuzzer builds (tools/sanitize.sh, tools/fuzz.sh; docs/fuzzing.md).
#
#   -DMEMONGER_SANITIZE=address,undefined   every C++ file we compile and every binary we link
#                                           (libraries, tools, tests, benchmarks) gets
#                                           -fsanitize=address,undefined; the first error aborts
#                                           (-fno-sanitize-recover=all), so a test that trips a
#                                           sanitizer fails.
#   -DMEMONGER_FUZZ=ON                      (clang only) the libraries get libFuzzer's coverage
#                                           instrumentation (-fsanitize=fuzzer-no-link) and
#                                           fuzz/ builds one libFuzzer harness per entry point.
#
# Third-party libraries (protobuf, abseil, libonnx, gtest) are the distribution's, not
# instrumented: ASan still sees their heap through its malloc and its interceptors (memcpy,
# strlen, ...), but not their own out-of-bounds reads of stack or globals.
set(MEMONGER_SANITIZE "" CACHE STRING
  "Sanitizers for every target we build, as for -fsanitize= (e.g. address,undefined); empty: none")
option(MEMONGER_FUZZ "Build the libFuzzer harnesses in fuzz/ (requires clang)" OFF)

if(MEMONGER_SANITIZE)
  set(memonger_sanitize_flags -fsanitize=${MEMONGER_SANITIZE} -fno-omit-frame-pointer
    -fno-sanitize-recover=all)
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:${memonger_sanitize_flags}>")
  add_link_options(-fsanitize=${MEMONGER_SANITIZE})
  message(STATUS "memonger: sanitizers ${MEMONGER_SANITIZE}")
endif()

if(MEMONGER_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "memonger: MEMONGER_FUZZ=ON needs clang (libFuzzer), not "
      "${CMAKE_CXX_COMPILER_ID}: configure with CC=clang CXX=clang++")
  endif()
  message(STATUS "memonger: libFuzzer harnesses in fuzz/")
endif()

# Called by memonger_library for each library target: with MEMONGER_FUZZ, its code gets the
# coverage instrumentation libFuzzer steers by, and whatever links it (harness, test, tool) also
# links the coverage callbacks (the link flag; the harnesses add libFuzzer itself). Build tree
# only: an installed package never asks its consumers for clang's fuzzer flags.
# Instruments a target once (fuzz/CMakeLists.txt also calls it for the libraries a harness
# names, such as tools/' memonger_cli, which is not a memonger_library).
function(memonger_fuzz_instrument target)
  get_target_property(done ${target} MEMONGER_FUZZ_INSTRUMENTED)
  if(MEMONGER_FUZZ AND NOT done)
    set_target_properties(${target} PROPERTIES MEMONGER_FUZZ_INSTRUMENTED ON)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=fuzzer-no-link>)
    target_link_options(${target} INTERFACE $<BUILD_INTERFACE:-fsanitize=fuzzer-no-link>)
  endif()
endfunction()
