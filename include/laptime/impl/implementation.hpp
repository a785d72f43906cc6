// laptime's implementation part: the out-of-line half of every component (reports, JSON,
// configuration, /proc, CUDA and NVTX set-up). Included by <laptime/laptime.hpp> for the
// header-only way, and by src/laptime.cpp, which compiles it once for the library (the way
// nvToolsExt.h includes nvtxImpl.h). Its functions are weak (LAPTIME_IMPL): both copies link.
// The files listed here hold the out-of-line definitions (LAPTIME_IMPL), one per public header;
// the other files of impl/ hold state and inline functions, compiled only where used.
#pragma once

#include "laptime/config.hpp"

// Compiled out (LAPTIME_DISABLE) there is no implementation: every body of the API is empty and
// inline, so this compiles nothing and src/laptime.cpp is an empty library.
#if LAPTIME_ENABLED
#include "laptime/impl/counters.hpp"
#include "laptime/impl/nvtx.hpp"
#include "laptime/impl/results.hpp"
#include "laptime/impl/settings.hpp"
#include "laptime/impl/stopwatch.hpp"
#endif
