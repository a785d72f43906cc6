// laptime's implementation part: the out-of-line half of every component (reports, JSON,
// configuration, /proc, CUDA and NVTX set-up). Included by <laptime/laptime.hpp> for the
// header-only way, and by src/laptime.cpp, which compiles it once for the library (the way
// nvToolsExt.h includes nvtxImpl.h). Its functions are weak (LAPTIME_IMPL): both copies link.
#pragma once

#include "laptime/detail/nvtx_setup.hpp"
#include "laptime/detail/results_impl.hpp"
#include "laptime/detail/settings_impl.hpp"
#include "laptime/detail/stopwatch_impl.hpp"
