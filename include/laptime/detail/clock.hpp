// laptime internals: the clock every timestamp of the Stopwatch is read from.
#pragma once

#include <chrono>
#include <cstdint>

#include "laptime/config.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

/// The monotonic clock, in nanoseconds (std::chrono::steady_clock: CLOCK_MONOTONIC via the vDSO).
LAPTIME_ALWAYS_INLINE std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace detail
LAPTIME_END_NAMESPACE
