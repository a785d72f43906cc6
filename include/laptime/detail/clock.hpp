// laptime internals: the clock every timestamp of the Stopwatch is read from.
//
// now_ns() is steady_clock's nanoseconds, read through the CPU's cycle counter where that is
// cheaper and as good: the invariant TSC on x86-64 (constant_tsc and nonstop_tsc in
// /proc/cpuinfo: one rate, synchronised across cores, ticking through sleep states) and
// cntvct_el0 on AArch64 (the architected timer, always invariant). The counter is converted with
// a scale calibrated against steady_clock, anchored in steady_clock's epoch, so a TSC timestamp
// and a steady_clock one can be compared (a process may mix them: see the calibration below).
//
//   - Hot path: two loads, the counter read, one multiply and a shift; one predictable branch.
//   - Calibration is lazy and never spins: the first call takes a (counter, steady_clock) anchor
//     and answers from steady_clock; the first call at least kCalibrationWindowNs later takes a
//     second anchor and publishes the scale. Each anchor is the tightest of a few
//     counter/steady_clock/counter brackets, so a preemption cannot skew it.
//   - Drift: clock_info() (report time) compares the counter with steady_clock over the whole run;
//     past kMaxDrift the process falls back to steady_clock for good and says so.
//   - Plain rdtsc (and a plain mrs), not rdtscp or lfence+rdtsc: those wait for earlier
//     instructions to complete, and a Stopwatch pair with them costs as much as with steady_clock
//     (whose vDSO reads the TSC ordered): 1.04-1.11x two steady_clock::now() against 0.58-0.69x
//     unordered (docs/performance.md). The price: the read may execute before earlier loads
//     complete. A timestamp read right after seeing another core's may then be earlier than it
//     by up to that load's cache miss (85-273 ns measured here; tests/clock-test.cpp bounds it);
//     the Stopwatch clamps an interval at 0, so one ended on another thread just after a hand-off
//     may lose that much but is never negative. Intervals on one thread, and a thread that
//     migrates (a context switch serialises), are unaffected.
//   - fork: the child inherits the scale with its memory; TSC and CLOCK_MONOTONIC are the
//     machine's, so the child's timestamps stay in the parent's epoch.
//   - LAPTIME_CLOCK=steady|tsc overrides the choice (tsc: even without the invariant flags).
//
// The scale is process-wide (detail::process_singleton): every copy of the header (shared objects,
// Python extensions) converts alike, so an interval may start in one and end in another.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "laptime/config.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

#if defined(__x86_64__) || defined(_M_X64)
inline constexpr bool kHaveTsc = true;  // a counter whose invariance /proc/cpuinfo tells
inline constexpr bool kHaveArchCounter = false;
#elif defined(__aarch64__)
inline constexpr bool kHaveTsc = false;
inline constexpr bool kHaveArchCounter = true;  // cntvct_el0: invariant by the architecture
#else
inline constexpr bool kHaveTsc = false;
inline constexpr bool kHaveArchCounter = false;
#endif

/// steady_clock in nanoseconds (CLOCK_MONOTONIC via the vDSO): the reference and the fallback.
LAPTIME_ALWAYS_INLINE std::int64_t steady_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// The cycle counter (0 where there is none).
LAPTIME_ALWAYS_INLINE std::uint64_t cycle_counter() noexcept {
#if defined(__x86_64__) || defined(_M_X64)
  return __builtin_ia32_rdtsc();  // not ordered: see the top of this file
#elif defined(__aarch64__)
  std::uint64_t v;
  asm volatile("mrs %0, cntvct_el0" : "=r"(v));
  return v;
#else
  return 0;
#endif
}

/// Counter to nanoseconds: ns = offset + (counter * mult) >> 32. mult 0: not (or no longer)
/// usable, now_ns() takes its cold path. Written once (offset first, mult released last); a
/// fall-back only zeroes mult.
struct ClockScale {
  std::atomic<std::uint64_t> mult{0};
  std::int64_t offset = 0;
  std::atomic<bool> steady{false};  // decided: steady_clock for good (read inline, no call)
};

__extension__ typedef unsigned __int128 uint128_for_clock;  // GCC/Clang; one mul on x86-64

LAPTIME_ALWAYS_INLINE std::int64_t scale_cycles(std::uint64_t cycles, std::uint64_t mult,
                                                std::int64_t offset) noexcept {
  return offset + static_cast<std::int64_t>((static_cast<uint128_for_clock>(cycles) * mult) >> 32);
}

// The sentinel every copy of the code starts from (mult 0: the cold path), then the process-wide
// scale. Constant-initialised, so now_ns() has no guard variable.
inline ClockScale clock_unset_scale;
inline std::atomic<ClockScale*>& clock_scale_pointer() noexcept {
  static std::atomic<ClockScale*> p{&clock_unset_scale};
  return p;
}

/// The cold half of now_ns(): decides the clock and calibrates (impl/clock.hpp).
LAPTIME_IMPL LAPTIME_COLD std::int64_t now_ns_cold() noexcept;

/// The monotonic clock, in nanoseconds in steady_clock's epoch: the calibrated cycle counter
/// where it is invariant, else steady_clock (see the top of this file).
LAPTIME_ALWAYS_INLINE std::int64_t now_ns() noexcept {
  const ClockScale& s = *clock_scale_pointer().load(std::memory_order_acquire);
  const std::uint64_t mult = s.mult.load(std::memory_order_acquire);
  if (LAPTIME_LIKELY(mult != 0)) return scale_cycles(cycle_counter(), mult, s.offset);
  if (s.steady.load(std::memory_order_relaxed)) return steady_ns();
  return now_ns_cold();
}

}  // namespace detail
LAPTIME_END_NAMESPACE
