// laptime internals: the GPU event timer's counters (laptime::cuda::GpuEventTimer::Stats), a
// plain struct of its own so that cuda.hpp has it compiled out too, with no machinery.
#pragma once

#include <cstddef>

#include "laptime/config.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

struct GpuEventStats {
  std::size_t events_created = 0;  // total cuEventCreate calls, all contexts
  std::size_t contexts = 0;        // pools, one per context seen at start()
  std::size_t in_flight = 0;       // started, not yet stopped
  std::size_t pending = 0;         // stopped, not yet resolved
  std::size_t resolved = 0;        // handed to on_done so far
  std::size_t dropped = 0;         // could not be resolved (driver error, destroyed context)
  std::size_t grown_in_start = 0;  // pool batches created inside start() (not ahead of time)
};

}  // namespace detail
LAPTIME_END_NAMESPACE
