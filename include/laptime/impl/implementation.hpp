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
// nvcc -rdc=true rewrites every declaration of an inline function as `inline`, and g++ then warns
// that an inline declaration follows a `noinline` one (-Wattributes) for each out-of-line member
// marked LAPTIME_NOINLINE: nothing is wrong, and -Werror builds must not fail on it.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wattributes"
#endif
#include "laptime/impl/counters.hpp"
#include "laptime/impl/nvtx.hpp"
#include "laptime/impl/results.hpp"
#include "laptime/impl/settings.hpp"
#include "laptime/impl/stopwatch.hpp"
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif
