# laptime_try_enable_cuda(WHAT): enables the CUDA language where a CUDA compiler is found (also
# when nvcc is not on PATH but the toolkit laptime found knows where it is) and sets
# LAPTIME_CUDA_OK; otherwise says that WHAT is not built. A macro: enable_language() must run in
# the calling directory's scope.
include(CheckLanguage)
macro(laptime_try_enable_cuda what)
  set(LAPTIME_CUDA_OK FALSE)
  if(NOT DEFINED CMAKE_CUDA_COMPILER AND CUDAToolkit_NVCC_EXECUTABLE
     AND EXISTS "${CUDAToolkit_NVCC_EXECUTABLE}")
    set(CMAKE_CUDA_COMPILER "${CUDAToolkit_NVCC_EXECUTABLE}" CACHE FILEPATH "CUDA compiler")
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      # Turing (CUDA 13's oldest) and Hopper machine code; PTX of the newest for anything later.
      set(CMAKE_CUDA_ARCHITECTURES 75-real 90)
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(LAPTIME_CUDA_OK TRUE)
  else()
    message(STATUS "laptime: no CUDA compiler found, ${what} not built")
  endif()
endmacro()
