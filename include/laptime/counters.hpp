// laptime: CPU and I/O on the Nsight Systems timeline, as NVTX counters (docs/nvtx.md).
//
//   laptime::enable_nvtx_counters();      // each tracked interval's figures, at its end
//   laptime::enable_nvtx_counters(10);    // the same, and the whole process tree 10 times a second
//
// For every name the Stopwatch tracks (Stopwatch::track_cpu_usage), the end of each of its
// intervals publishes that interval's figures as four NVTX counters: "<name>: process tree CPU"
// and "<name>: system CPU" in %, "<name>: read" and "<name>: write" (storage) in MB/s. With a
// sample rate, a background thread also publishes the same four figures of the whole process tree
// ("process tree CPU", ...) over each period. LAPTIME_NVTX_COUNTERS=1 and LAPTIME_NVTX_COUNTERS_HZ
// switch it from the environment; LAPTIME_PROFILE=profiling turns it on at 10 Hz.
//
// Cost: off, one relaxed load per tracked interval end. On without a profiler attached (NVTX then
// gives laptime's domain no handle), the same: nothing is registered or published, and the
// background thread is not started. docs/resources.md has the counters, their units, their cost
// and the tests behind them.
#pragma once

#include "laptime/config.hpp"

LAPTIME_BEGIN_NAMESPACE

#if LAPTIME_ENABLED
namespace detail {
// The implementation part (impl/nvtx_counters.hpp, LAPTIME_IMPL: weak, linked once).
LAPTIME_IMPL void nvtx_counters_enable(double sample_hz);
LAPTIME_IMPL void nvtx_counters_disable();
LAPTIME_IMPL bool nvtx_counters_enabled();
}  // namespace detail

/// Publishes the CPU and I/O figures of tracked names as NVTX counters at the end of each tracked
/// interval; with `sample_hz` > 0 (at most 1000) also the process tree's, that many times a
/// second, from a background thread. A second call changes the rate. Counters are registered once
/// per process in laptime's NVTX domain: the NVTXRangeWrapper's named domain where it was enabled
/// with one before, "laptime" otherwise. A negative or too high rate is a usage error.
///
///   laptime::Stopwatch::instance().track_cpu_usage("data");
///   laptime::enable_nvtx_counters(10);
inline void enable_nvtx_counters(double sample_hz = 0) {
  detail::nvtx_counters_enable(sample_hz);
}

/// Stops publishing counters (the background thread ends within one period).
inline void disable_nvtx_counters() {
  detail::nvtx_counters_disable();
}

/// Whether enable_nvtx_counters is in effect.
inline bool nvtx_counters_enabled() {
  return detail::nvtx_counters_enabled();
}
#else
inline void enable_nvtx_counters(double = 0) {}
inline void disable_nvtx_counters() {}
inline bool nvtx_counters_enabled() {
  return false;
}
#endif

LAPTIME_END_NAMESPACE
