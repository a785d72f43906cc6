// laptime: everything in one include.
//
//   #include <laptime/laptime.hpp>
//
// Stopwatch (timing per iteration, percentiles, CPU and I/O of tracked names, GPU time),
// NVTXRangeWrapper (ranges for Nsight Systems with order checks), resources (/proc sampling),
// cuda (run-time driver access: sync, events, profiler capture), settings (configure from the
// environment). docs/ has the user guide.
#pragma once

#include "laptime/config.hpp"
#include "laptime/cuda.hpp"
#include "laptime/error.hpp"
#include "laptime/nvtx.hpp"
#include "laptime/resources.hpp"
#include "laptime/results.hpp"
#include "laptime/settings.hpp"
#include "laptime/stopwatch.hpp"
