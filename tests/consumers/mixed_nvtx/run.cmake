# Files that disagree on the NVTX headers, linked both ways, or the one without them in a shared
# object with hidden visibility: the profiler receives every range and counter in each program, as
# in a program whose files agree, with no warning. A program where no
# file sees nvtx3/ sends nothing and says so.
# cmake -DCXX=... -DINCLUDE=<laptime include> -DCUDA_INCLUDE=<toolkit include> -DTESTS=<tests/>
#       -DRECORDER=<nvtx_recorder library> -DWORK=<dir> -DSOURCE=<this dir> -P run.cmake
include(${CMAKE_CURRENT_LIST_DIR}/../run_command.cmake)

file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
set(flags -std=c++17 -O1 -Wall -Wextra -Werror -I${INCLUDE} -I${TESTS}
          "-DLAPTIME_NVTX_RECORDER_PATH=\"${RECORDER}\"")
run(${CXX} ${flags} -isystem ${CUDA_INCLUDE} -c ${SOURCE}/main.cpp -o ${WORK}/main.o)
run(${CXX} ${flags} -DLAPTIME_HAVE_NVTX=0 -c ${SOURCE}/main.cpp -o ${WORK}/main_without.o)
run(${CXX} ${flags} -isystem ${CUDA_INCLUDE} -c ${SOURCE}/ranges.cpp -o ${WORK}/ranges.o)
run(${CXX} ${flags} -DLAPTIME_HAVE_NVTX=0 -c ${SOURCE}/data.cpp -o ${WORK}/data.o)
run(${CXX} ${WORK}/main.o ${WORK}/data.o -o ${WORK}/main_first -pthread -ldl)
run(${CXX} ${WORK}/data.o ${WORK}/main.o -o ${WORK}/data_first -pthread -ldl)
run(${CXX} ${WORK}/main.o ${WORK}/ranges.o -o ${WORK}/agree -pthread -ldl)
run(${CXX} ${WORK}/main_without.o ${WORK}/data.o -o ${WORK}/none -pthread -ldl)
# The copy without the headers in a shared object of its own; both copies with hidden visibility,
# so that the shared object cannot see the program's table of NVTX calls (as no extension sees
# the Python interpreter's, or another extension's).
run(${CXX} ${flags} -DLAPTIME_HAVE_NVTX=0 -fPIC -shared -fvisibility=hidden
    -fvisibility-inlines-hidden ${SOURCE}/plugin.cpp -o ${WORK}/libdata.so -pthread -ldl)
run(${CXX} ${flags} -isystem ${CUDA_INCLUDE} -fvisibility=hidden -c ${SOURCE}/main.cpp
    -o ${WORK}/main_hidden.o)
run(${CXX} ${WORK}/main_hidden.o ${WORK}/libdata.so -Wl,-rpath,${WORK} -o ${WORK}/shared -pthread
    -ldl)
set(all "profiler saw: 3 'step' pushes, 3 'load batch' pushes, some counter samples")
set(nothing "profiler saw: 0 'step' pushes, 0 'load batch' pushes, no counter samples")
set(unavailable "compiled without the NVTX headers")
foreach(program main_first data_first agree shared none)
  execute_process(COMMAND ${WORK}/${program} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  if(program STREQUAL "none")
    set(expected "${nothing}")
  else()
    set(expected "${all}")
  endif()
  string(FIND "${out}" "${expected}" saw)
  string(FIND "${err}" "${unavailable}" warned)
  # Only the program with no NVTX at all says that ranges reach no profiler.
  if(program STREQUAL "none")
    set(ok_warning TRUE)
    if(warned EQUAL -1)
      set(ok_warning FALSE)
    endif()
  else()
    set(ok_warning FALSE)
    if(warned EQUAL -1)
      set(ok_warning TRUE)
    endif()
  endif()
  if(NOT rc EQUAL 0 OR saw EQUAL -1 OR NOT ok_warning)
    message(FATAL_ERROR "${program}: exit ${rc}; expected \"${expected}\"\n"
                        "stdout:\n${out}\nstderr:\n${err}")
  endif()
  message(STATUS "${program}: ${expected}")
endforeach()
