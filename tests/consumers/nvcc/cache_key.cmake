# nvcc's preprocessed text (nvcc -E: the device pass's, where laptime is compiled out) must differ
# between builds whose host pass compiles laptime differently. Compiler caches key a .cu file on
# that text: ccache gave a LAPTIME_DISABLE build the object of a normal one when it did not.
#   cmake -DNVCC=<nvcc> -DINCLUDE=<laptime/include> -DSOURCE=<file.cu> -P cache_key.cmake
# "-" is the plain build.
set(variants - -DLAPTIME_DISABLE -DLAPTIME_IMPL_LINKED -DLAPTIME_MAX_NAMES=100)
set(seen "")
foreach(v IN LISTS variants)
  set(flag ${v})
  if(v STREQUAL "-")
    set(flag "")
  endif()
  execute_process(COMMAND ${NVCC} -std=c++17 -arch=sm_90 -I${INCLUDE} ${flag} -E ${SOURCE}
                  OUTPUT_VARIABLE text RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "nvcc -E ${v} failed (${rc}):\n${err}")
  endif()
  string(SHA256 key "${text}")
  list(FIND seen ${key} at)
  if(NOT at EQUAL -1)
    list(GET variants ${at} same)
    message(FATAL_ERROR "nvcc -E gives the same text with '${v}' as with '${same}': a compiler "
                        "cache would share their objects")
  endif()
  list(APPEND seen ${key})
endforeach()
list(LENGTH variants n)
message(STATUS "nvcc -E: ${n} configurations, ${n} different texts")
