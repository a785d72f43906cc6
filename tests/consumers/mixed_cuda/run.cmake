# Two files of one program, one compiled where cuda.h is visible and one where it is not, linked
# both ways and run with the toolkit's stub driver (it loads, and cuInit fails) and with none:
# both files must report the same CUDA status, and the program must neither crash nor misread.
# cmake -DCXX=... -DINCLUDE=<laptime include> -DCUDA_INCLUDE=<toolkit include> -DSTUB=<stub
#       libcuda.so> -DWORK=<dir> -DSOURCE=<this dir> -P run.cmake
include(${CMAKE_CURRENT_LIST_DIR}/../run_command.cmake)

file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK}/shim)
# The compiler's own search list without the directories that hold cuda.h (/usr/local/include
# may link it there), and NVTX back through a directory of its own, so that only cuda.h differs.
execute_process(COMMAND ${CXX} -x c++ -E -v /dev/null OUTPUT_QUIET ERROR_VARIABLE search)
string(REGEX REPLACE ".*#include <...> search starts here:\n" "" search "${search}")
string(REGEX REPLACE "End of search list.*" "" search "${search}")
string(REPLACE "\n" ";" search "${search}")
set(hidden -nostdinc -isystem ${WORK}/shim)
foreach(dir IN LISTS search)
  string(STRIP "${dir}" dir)
  if(dir AND NOT EXISTS ${dir}/cuda.h)
    list(APPEND hidden -isystem ${dir})
  endif()
endforeach()
file(CREATE_LINK ${CUDA_INCLUDE}/nvtx3 ${WORK}/shim/nvtx3 SYMBOLIC)
set(flags -std=c++17 -O2 -I${INCLUDE})
run(${CXX} ${flags} ${hidden} -E ${SOURCE}/data.cpp -o ${WORK}/data.ii)
file(READ ${WORK}/data.ii text)
if(text MATCHES "/cuda\\.h\"")
  message(FATAL_ERROR "data.cpp still sees cuda.h: the test would prove nothing")
endif()
run(${CXX} ${flags} ${hidden} -c ${SOURCE}/data.cpp -o ${WORK}/data.o)
run(${CXX} ${flags} -isystem ${CUDA_INCLUDE} -c ${SOURCE}/main.cpp -o ${WORK}/main.o)
run(${CXX} ${WORK}/main.o ${WORK}/data.o -o ${WORK}/main_first -pthread -ldl)
run(${CXX} ${WORK}/data.o ${WORK}/main.o -o ${WORK}/data_first -pthread -ldl)
foreach(program main_first data_first)
  foreach(driver ${STUB} /nonexistent/libcuda.so.1)
    execute_process(COMMAND ${CMAKE_COMMAND} -E env LAPTIME_CUDA_DRIVER=${driver}
                            ${WORK}/${program} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                            ERROR_VARIABLE err)
    if(NOT rc EQUAL 0 OR NOT out MATCHES "same in both files: yes"
       OR NOT out MATCHES "\"iterations_measured\": 3")
      message(FATAL_ERROR "${program} with ${driver}: exit ${rc}\n${out}\n${err}")
    endif()
    message(STATUS "${program} with ${driver}: ${out}")
  endforeach()
endforeach()
