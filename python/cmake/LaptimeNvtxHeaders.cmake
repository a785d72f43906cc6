# laptime_find_nvtx_headers(DIR_VAR SOURCE_VAR): a directory holding nvtx3/nvToolsExt.h for the
# Python extension, and where it was found; both empty when none is. NVTX3 is header-only (it
# finds the profiler at run time), so headers are all a build needs. Searched in this order:
#   1. LAPTIME_NVTX_INCLUDE_DIR, where the user set it;
#   2. LAPTIME_CUDA_INCLUDE_DIR, the CUDA toolkit the top-level CMakeLists.txt found;
#   3. $CUDA_HOME/include, $CUDA_PATH/include;
#   4. NVIDIA's NVTX wheels importable by Python_EXECUTABLE, where pip users have them (PyTorch
#      depends on one; pyproject.toml makes one a build requirement): nvidia-nvtx-cu12 installs
#      nvidia/nvtx/include/nvtx3, nvidia-nvtx (CUDA 13) nvidia/cu13/include/nvtx3.
# Also usable in script mode (cmake -P), which python/tests/test_build_info.py relies on.
function(laptime_find_nvtx_headers dir_var source_var)
  set(candidates)
  set(sources)
  if(LAPTIME_NVTX_INCLUDE_DIR)
    list(APPEND candidates "${LAPTIME_NVTX_INCLUDE_DIR}")
    list(APPEND sources "LAPTIME_NVTX_INCLUDE_DIR")
  endif()
  if(LAPTIME_CUDA_INCLUDE_DIR)
    list(APPEND candidates "${LAPTIME_CUDA_INCLUDE_DIR}")
    list(APPEND sources "CUDA toolkit")
  endif()
  foreach(var IN ITEMS CUDA_HOME CUDA_PATH)
    if(NOT "$ENV{${var}}" STREQUAL "")
      list(APPEND candidates "$ENV{${var}}/include")
      list(APPEND sources "${var}")
    endif()
  endforeach()
  if(Python_EXECUTABLE)
    # `nvidia` is a namespace package: every site directory that has one contributes a path.
    execute_process(
      COMMAND "${Python_EXECUTABLE}" -c "import nvidia; print(';'.join(nvidia.__path__))"
      OUTPUT_VARIABLE roots
      RESULT_VARIABLE failed
      ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(NOT failed)
      foreach(root IN LISTS roots)
        file(GLOB others LIST_DIRECTORIES true "${root}/*/include")
        list(SORT others)
        foreach(dir IN ITEMS "${root}/nvtx/include" "${root}/cu13/include" ${others})
          list(APPEND candidates "${dir}")
          list(APPEND sources "nvidia wheel")
        endforeach()
      endforeach()
    endif()
  endif()
  set(found "")
  set(source "")
  set(index 0)
  foreach(dir IN LISTS candidates)
    if(EXISTS "${dir}/nvtx3/nvToolsExt.h")
      get_filename_component(found "${dir}" ABSOLUTE)
      list(GET sources ${index} source)
      break()
    endif()
    math(EXPR index "${index} + 1")
  endforeach()
  set(${dir_var} "${found}" PARENT_SCOPE)
  set(${source_var} "${source}" PARENT_SCOPE)
endfunction()

# Script mode: cmake [-DPython_EXECUTABLE=...] -P LaptimeNvtxHeaders.cmake prints what is found.
if(CMAKE_SCRIPT_MODE_FILE STREQUAL CMAKE_CURRENT_LIST_FILE)
  laptime_find_nvtx_headers(dir source)
  message("nvtx_include_dir=${dir}")
  message("nvtx_source=${source}")
endif()
