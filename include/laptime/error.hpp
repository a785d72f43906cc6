// laptime: usage errors and what happens on them (SPEC §4).
//
//   laptime::set_error_policy(laptime::ErrorPolicy::Warn);  // production: never die of
//   instrumentation try { sw.end_meas("never started"); } catch (const laptime::UsageError& e) {
//   ... }
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_set>

#include "laptime/config.hpp"
#include "laptime/detail/process_singleton.hpp"
#include "laptime/detail/thread.hpp"

LAPTIME_BEGIN_NAMESPACE

/// Thrown on misuse of the API (a measurement ended that never started, a range popped out of
/// order, ...). The message names the call, the measurement or range, and the thread.
class UsageError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

/// What a usage error does: throw laptime::UsageError (default), print one line to stderr and
/// carry on, or abort the process. Also set by LAPTIME_ON_ERROR=throw|warn|abort.
enum class ErrorPolicy { Throw, Warn, Abort };

namespace detail {

struct ErrorState {
  ErrorState() {
    const char* env = std::getenv("LAPTIME_ON_ERROR");
    if (env == nullptr || *env == '\0') return;
    const std::string_view v(env);
    if (v == "throw") {
      policy.store(static_cast<int>(ErrorPolicy::Throw));
    } else if (v == "warn") {
      policy.store(static_cast<int>(ErrorPolicy::Warn));
    } else if (v == "abort") {
      policy.store(static_cast<int>(ErrorPolicy::Abort));
    } else {
      std::fprintf(stderr,
                   "laptime: warning: LAPTIME_ON_ERROR='%s' is not one of throw|warn|abort; "
                   "using throw\n",
                   env);
    }
  }
  std::atomic<int> policy{static_cast<int>(ErrorPolicy::Throw)};
  std::mutex warned_mutex;
  std::unordered_set<std::string> warned;
  std::atomic<bool> fork_handlers{false};  // installed once per process
};

inline ErrorState& error_state() {
  static ErrorState& state = []() -> ErrorState& {
    ErrorState& s = process_singleton<ErrorState>("errors");
    // fork() while another thread is inside warn_once (a DataLoader worker forked during a
    // warning) would leave the child a held lock and a half-updated set: hold the lock across
    // fork, so that both processes get it free and the set whole.
    if (!s.fork_handlers.exchange(true)) {
      ::pthread_atfork([] { error_state().warned_mutex.lock(); },
                       [] { error_state().warned_mutex.unlock(); },
                       [] { error_state().warned_mutex.unlock(); });
    }
    return s;
  }();
  return state;
}

/// Prints "laptime: warning: <message>" to stderr the first time `key` is seen in this process.
inline void warn_once(std::string_view key, std::string_view message) {
#if LAPTIME_ENABLED
  ErrorState& s = error_state();
  {
    std::lock_guard<std::mutex> lock(s.warned_mutex);
    if (!s.warned.emplace(key).second) return;
  }
  std::fprintf(stderr, "laptime: warning: %.*s\n", static_cast<int>(message.size()),
               message.data());
#else
  (void)key;
  (void)message;
#endif
}

/// Reports misuse of `call` according to the policy. The message gets the thread appended.
/// Returns normally only under ErrorPolicy::Warn; callers then leave their state unchanged.
[[gnu::cold]] inline void usage_error(std::string_view call, std::string_view what) {
  std::string message = "laptime: ";
  message += call;
  message += ": ";
  message += what;
  message += " [";
  message += thread_label();
  message += "]";
  switch (static_cast<ErrorPolicy>(error_state().policy.load(std::memory_order_relaxed))) {
    case ErrorPolicy::Warn:
      std::fprintf(stderr, "%s\n", message.c_str());
      return;
    case ErrorPolicy::Abort:
      std::fprintf(stderr, "%s (aborting: laptime error policy is Abort)\n", message.c_str());
      std::abort();
    case ErrorPolicy::Throw:
      break;
  }
  throw UsageError(message);
}

/// "'name'" with control characters escaped, for messages.
inline std::string quoted(std::string_view name) {
  std::string out = "'";
  for (const char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  out += "'";
  return out;
}

}  // namespace detail

/// Sets what a usage error does, for the whole process (every copy of laptime in it).
inline void set_error_policy(ErrorPolicy policy) noexcept {
#if LAPTIME_ENABLED
  detail::error_state().policy.store(static_cast<int>(policy), std::memory_order_relaxed);
#else
  (void)policy;
#endif
}

/// The policy now in force.
inline ErrorPolicy error_policy() noexcept {
#if LAPTIME_ENABLED
  return static_cast<ErrorPolicy>(detail::error_state().policy.load(std::memory_order_relaxed));
#else
  return ErrorPolicy::Throw;
#endif
}

LAPTIME_END_NAMESPACE
