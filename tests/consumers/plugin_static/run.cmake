# A shared object built with -fvisibility=hidden that links the static liblaptime.a exports
# laptime's functions (the library is compiled with default visibility); linked with
# -Wl,--exclude-libs,liblaptime.a it exports none of them (docs/build.md). Either way it shares
# the Stopwatch of the program that loads it, which has a copy of its own.
# cmake -DCXX=... -DINCLUDE=<laptime include> -DLIB=<liblaptime.a> -DWORK=<dir> -DSOURCE=<this dir>
#       -P run.cmake
include(${CMAKE_CURRENT_LIST_DIR}/../run_command.cmake)

file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
set(flags -std=c++17 -O1 -Wall -Wextra -Werror -I${INCLUDE})
run(${CXX} ${flags} -o ${WORK}/main ${SOURCE}/main.cpp -pthread -ldl)
foreach(variant exported hidden)
  set(link)
  if(variant STREQUAL "hidden")
    get_filename_component(lib_name ${LIB} NAME)
    set(link -Wl,--exclude-libs,${lib_name})
  endif()
  run(${CXX} ${flags} -fPIC -shared -fvisibility=hidden -fvisibility-inlines-hidden
      ${SOURCE}/plugin.cpp ${LIB} ${link} -o ${WORK}/lib${variant}.so -pthread -ldl)
  run(nm -D --defined-only ${WORK}/lib${variant}.so)
  string(REGEX MATCHALL "[^\n]*laptime[^\n]*" symbols "${last_output}")
  list(LENGTH symbols count)
  if(variant STREQUAL "hidden" AND NOT count EQUAL 0)
    message(FATAL_ERROR "lib${variant}.so exports ${count} laptime symbols:\n${symbols}")
  elseif(variant STREQUAL "exported" AND count EQUAL 0)
    message(FATAL_ERROR "lib${variant}.so exports no laptime symbol: docs/build.md says it does")
  endif()
  run(${WORK}/main ${WORK}/lib${variant}.so)
  if(NOT last_output MATCHES "main 1\nplugin 2\n")
    message(FATAL_ERROR "lib${variant}.so: not one Stopwatch state:\n${last_output}")
  endif()
  message(STATUS "lib${variant}.so: ${count} laptime symbols exported; one state")
endforeach()
