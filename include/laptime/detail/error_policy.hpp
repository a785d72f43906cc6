// laptime internals: the public names of usage errors (UsageError, ErrorPolicy and the policy's
// names), documented with the API in laptime/error.hpp. Apart from detail/report.hpp, which
// reports through them, so that a compiled-out file (LAPTIME_DISABLE) gets the names without the
// machinery.
#pragma once

#include <optional>
#include <stdexcept>
#include <string_view>

#include "laptime/config.hpp"

LAPTIME_BEGIN_NAMESPACE

// header-only: no file of laptime's own to hold the vtable
LAPTIME_CLANG_ALLOW("-Wweak-vtables")
/// Thrown on misuse of the API (a measurement ended that never started, a range popped out of
/// order, ...). The message names the call, the measurement or range, and the thread.
class UsageError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};
LAPTIME_CLANG_ALLOW_END

/// What a usage error does: throw laptime::UsageError (default), print one line to stderr and
/// carry on, or abort the process. Also set by LAPTIME_ON_ERROR=throw|warn|abort.
enum class ErrorPolicy { Throw, Warn, Abort };

/// The name parse_error_policy() reads: "throw", "warn" or "abort" (LAPTIME_ON_ERROR's values).
inline const char* error_policy_name(ErrorPolicy policy) noexcept {
  switch (policy) {
    case ErrorPolicy::Warn:
      return "warn";
    case ErrorPolicy::Abort:
      return "abort";
    case ErrorPolicy::Throw:
      break;
  }
  return "throw";
}

/// The one parser of error-policy names, for LAPTIME_ON_ERROR and for the Python extension's
/// set_error_policy("warn"): the inverse of error_policy_name (exactly; nullopt for anything
/// else).
inline std::optional<ErrorPolicy> parse_error_policy(std::string_view name) noexcept {
  for (const ErrorPolicy p : {ErrorPolicy::Throw, ErrorPolicy::Warn, ErrorPolicy::Abort}) {
    if (name == error_policy_name(p)) return p;
  }
  return std::nullopt;
}

LAPTIME_END_NAMESPACE
