# A compiler command as a user types it, with no build system in between.
#   cmake "-DCOMMAND=c++|-std=c++17|..." [-DRUN=path] [-DEXPECT=regex] [-DFORBID=regex]
#         [-DALLOW=regex] -P compile_check.cmake
# Runs COMMAND if given (its arguments separated by '|'; fails on a non-zero exit), then RUN
# if given; EXPECT must match and FORBID must not match what they printed, once what ALLOW
# matches (the exceptions to FORBID) is taken out.
set(all "")
set(shown "${RUN}")
if(DEFINED COMMAND)
  string(REPLACE "|" ";" COMMAND "${COMMAND}")
  string(REPLACE ";" " " shown "${COMMAND}")
  # scripts/test.sh names ccache here: the same compilation in another build tree of the test
  # command (the sanitizers' trees) is then taken from the cache, not compiled again. Only a
  # compiler is wrapped, and ccache compiles itself what it cannot cache (a compile and link in one).
  list(GET COMMAND 0 program)
  get_filename_component(program "${program}" NAME)
  if(DEFINED ENV{LAPTIME_TEST_CCACHE} AND program MATCHES "(g|clang|c)\\+\\+")
    list(PREPEND COMMAND "$ENV{LAPTIME_TEST_CCACHE}")
  endif()
  execute_process(COMMAND ${COMMAND} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${shown}\n${out}\n${err}")
  endif()
  set(all "${out}${err}")
endif()
if(RUN)
  execute_process(COMMAND ${RUN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${RUN} failed (${rc})\n${out}\n${err}")
  endif()
  set(all "${out}${err}")
endif()
if(DEFINED EXPECT AND NOT all MATCHES "${EXPECT}")
  message(FATAL_ERROR "output does not match '${EXPECT}':\n${all}")
endif()
if(DEFINED ALLOW)
  string(REGEX REPLACE "${ALLOW}" "" all "${all}")
endif()
if(DEFINED FORBID AND all MATCHES "${FORBID}")
  message(FATAL_ERROR "output matches '${FORBID}' (${CMAKE_MATCH_0}):\n${all}")
endif()
message(STATUS "OK: ${shown}")
