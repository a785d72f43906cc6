// Shared by laptime_bench's files (bench.cpp, bench_nvtx.cpp, bench_resources.cpp): the
// Stopwatch put in its plain enabled state, and the calling thread's CPU clock.
#pragma once

#include <time.h>

#include <optional>

#include "laptime/laptime.hpp"

namespace laptime_bench {

// Measuring on, no warm-up, no periodic report, no CUDA sync: the plain enabled path.
inline void enable_stopwatch() {
  laptime::detail::testing_reset_stopwatch();
  laptime::Stopwatch::instance().enable(/*num_warmup_iters=*/0,
                                        /*print_every_n_iters=*/std::nullopt,
                                        /*do_cuda_sync=*/false);
}

// The calling thread's CPU time in seconds: on a loaded machine wall time also counts the time
// the thread waited for a core.
inline double thread_cpu_s() {
  timespec t{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

}  // namespace laptime_bench
