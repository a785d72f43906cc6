# Files that disagree on the NVTX headers, linked both ways: enable() warns in both programs, and
# not in a program whose files agree.
# cmake -DCXX=... -DINCLUDE=<laptime include> -DCUDA_INCLUDE=<toolkit include> -DWORK=<dir>
#       -DSOURCE=<this dir> -P run.cmake
include(${CMAKE_CURRENT_LIST_DIR}/../run_command.cmake)

file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
set(flags -std=c++17 -O0 -I${INCLUDE})  # what the warning needs, not speed
run(${CXX} ${flags} -isystem ${CUDA_INCLUDE} -c ${SOURCE}/main.cpp -o ${WORK}/main.o)
run(${CXX} ${flags} -isystem ${CUDA_INCLUDE} -c ${SOURCE}/ranges.cpp -o ${WORK}/ranges.o)
run(${CXX} ${flags} -DLAPTIME_HAVE_NVTX=0 -c ${SOURCE}/data.cpp -o ${WORK}/data.o)
run(${CXX} ${WORK}/main.o ${WORK}/data.o -o ${WORK}/main_first -pthread -ldl)
run(${CXX} ${WORK}/data.o ${WORK}/main.o -o ${WORK}/data_first -pthread -ldl)
run(${CXX} ${WORK}/main.o ${WORK}/ranges.o -o ${WORK}/agree -pthread -ldl)
set(warning "files disagree on the NVTX headers")
foreach(program main_first data_first agree)
  execute_process(COMMAND ${WORK}/${program} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  string(FIND "${err}" "${warning}" at)
  set(warned TRUE)
  if(at EQUAL -1)
    set(warned FALSE)
  endif()
  set(expected TRUE)
  if(program STREQUAL "agree")
    set(expected FALSE)
  endif()
  if(NOT rc EQUAL 0 OR NOT warned STREQUAL expected)
    message(FATAL_ERROR "${program}: exit ${rc}, warned: ${warned}, expected: ${expected}\n"
                        "stdout:\n${out}\nstderr:\n${err}")
  endif()
  message(STATUS "${program}: as expected")
endforeach()
