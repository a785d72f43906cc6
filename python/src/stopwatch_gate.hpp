// When a Stopwatch method called from Python has nothing to do in C++: before the first enable(),
// nothing at all (one load, as the seed's "not enabled" cost asks). After a disable(), start_meas
// and end_meas still reach C++, which marks an interval started while off and drops an interval
// that spans the switch, instead of calling its end misuse: a correctly paired Python thread gets
// no error from another thread's disable(), enable() or reset() (docs/stopwatch.md).
#pragma once

#include <atomic>

#include <laptime/stopwatch.hpp>

inline bool stopwatch_never_enabled() noexcept {
#if LAPTIME_ENABLED
  return laptime::detail::stopwatch_core().power.load(std::memory_order_relaxed) ==
         laptime::detail::kNeverEnabled;
#else
  return true;
#endif
}
