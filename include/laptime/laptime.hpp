// laptime: everything in one include, the implementation part with it.
//
//   #include <laptime/laptime.hpp>
//
// Stopwatch (timing per iteration, percentiles, CPU and I/O of tracked names, GPU time),
// NVTXRangeWrapper (ranges for Nsight Systems with order checks), resources (/proc sampling),
// cuda (run-time driver access: sync, events, profiler capture), settings (configure from the
// environment), counters (CPU and I/O as NVTX counters). docs/ has the user guide.
//
// A single-file program needs nothing else: no library, no define. A program of several files
// may include this in each of them (the implementation's functions are weak, linked once), or,
// to compile faster, include only <laptime/stopwatch.hpp> where it measures and let the CMake
// target laptime::laptime, or laptime/src/laptime.cpp on the command line, bring the
// implementation (docs/build.md). Linking the target defines LAPTIME_IMPL_LINKED, and this header
// then leaves the implementation to the library.
#pragma once

#include "laptime/config.hpp"
#include "laptime/counters.hpp"
#include "laptime/cuda.hpp"
#include "laptime/error.hpp"
#include "laptime/nvtx.hpp"
#include "laptime/resources.hpp"
#include "laptime/results.hpp"
#include "laptime/settings.hpp"
#include "laptime/stopwatch.hpp"

// The implementation part, unless it is linked: LAPTIME_IMPL_LINKED says that the program links
// it compiled once (the CMake target laptime::laptime defines it for its users, or a build adds
// src/laptime.cpp and defines it), so this include then costs what the light headers cost.
// Compiled out (LAPTIME_DISABLE) there is no implementation part: every body is inline and empty.
// nvcc's device pass (__CUDA_ARCH__ defined) compiles laptime out too (config.hpp): laptime's
// functions are host code, compiled by the host pass (docs/build.md).
#if LAPTIME_ENABLED && !defined(LAPTIME_IMPL_LINKED)
#include "laptime/impl/implementation.hpp"
#endif
