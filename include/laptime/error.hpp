// laptime: usage errors and what happens on them (docs/stopwatch.md, errors).
//
//   laptime::set_error_policy(laptime::ErrorPolicy::Warn);  // production: never die of it
//   try {
//     sw.end_meas("never started");
//   } catch (const laptime::UsageError& e) {
//     ...  // e.what(): "laptime: end_meas('never started'): ... [thread 1234]"
//   }
//
// One route for every message laptime prints or throws: usage_error() for misuse (by policy),
// warn_once() for warnings. Calls are named as the user wrote them, "<call>(<args>)":
// "laptime: range_pop('forward'): ...", "laptime: finish_iter(): ...".
#pragma once

#include "laptime/config.hpp"
#include "laptime/detail/error_policy.hpp"  // UsageError, ErrorPolicy, the policy's names
#if LAPTIME_ENABLED
#include "laptime/detail/report.hpp"  // the process's policy, warn_once
#endif

LAPTIME_BEGIN_NAMESPACE

// Defined in detail/error_policy.hpp, below every component (each reports through them):
//   class UsageError : public std::logic_error
//       thrown on misuse of the API (a measurement ended that never started, a range popped out
//       of order, ...); the message names the call, the measurement or range, and the thread.
//   enum class ErrorPolicy { Throw, Warn, Abort }
//       what a usage error does: throw UsageError (default), print one line to stderr and carry
//       on, or abort the process. Also set by LAPTIME_ON_ERROR=throw|warn|abort.
//   std::optional<ErrorPolicy> parse_error_policy(std::string_view name) noexcept
//   const char* error_policy_name(ErrorPolicy policy) noexcept
//       the one parser of the policy's names ("throw", "warn", "abort") and its inverse.

/// Sets what a usage error does, for the whole process (every copy of laptime in it).
template <int = 0>
void set_error_policy(ErrorPolicy policy) noexcept {
#if LAPTIME_ENABLED
  detail::error_state().policy.store(static_cast<int>(policy), std::memory_order_relaxed);
#else
  (void)policy;
#endif
}

/// The policy now in force.
template <int = 0>
ErrorPolicy error_policy() noexcept {
#if LAPTIME_ENABLED
  return static_cast<ErrorPolicy>(detail::error_state().policy.load(std::memory_order_relaxed));
#else
  return ErrorPolicy::Throw;
#endif
}

LAPTIME_END_NAMESPACE
