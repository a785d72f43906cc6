// laptime: usage errors and what happens on them (SPEC §4).
//
//   laptime::set_error_policy(laptime::ErrorPolicy::Warn);  // production: never die of
//   instrumentation try { sw.end_meas("never started"); } catch (const laptime::UsageError& e) {
//   ... }
#pragma once

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "laptime/config.hpp"
#include "laptime/detail/format.hpp"
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
      // Not through warn_once: that needs this object. The value is escaped: a variable's text
      // must not rewrite the terminal either.
      std::fprintf(stderr,
                   "laptime: warning: LAPTIME_ON_ERROR='%s' is not one of throw|warn|abort; "
                   "using throw\n",
                   escaped(v).c_str());
    }
  }
  std::atomic<int> policy{static_cast<int>(ErrorPolicy::Throw)};
  std::mutex warned_mutex;
  struct Warned {
    std::uint64_t repeats = 0;  ///< times seen after the first
    std::string repeat_note;    ///< "calls ... were not measured": what the count is of
  };
  std::unordered_map<std::string, Warned> warned;  ///< by cause
  std::atomic<bool> fork_handlers{false};          // installed once per process
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

/// The one route of every warning and warned usage error: true the first time `key` (a cause)
/// is seen in this process; later times are only counted, so that a cause repeated a million
/// times prints one line. With a `repeat_note`, repeated_warnings() reports the count.
inline bool first_time(std::string_view key, std::string_view repeat_note = {}) {
  ErrorState& s = error_state();
  std::lock_guard<std::mutex> lock(s.warned_mutex);
  auto [it, inserted] = s.warned.try_emplace(std::string(key));
  if (inserted) {
    it->second.repeat_note = std::string(repeat_note);
  } else {
    ++it->second.repeats;
  }
  return inserted;
}

/// Prints "laptime: warning: <message>" to stderr the first time `key` is seen in this process.
inline void warn_once(std::string_view key, std::string_view message,
                      std::string_view repeat_note = {}) {
#if LAPTIME_ENABLED
  if (!first_time(key, repeat_note)) return;
  std::fprintf(stderr, "laptime: warning: %.*s\n", static_cast<int>(message.size()),
               message.data());
#else
  (void)key;
  (void)message;
  (void)repeat_note;
#endif
}

/// "<count> more <note>" for each cause warned about once and then repeated (reports show it).
inline std::vector<std::string> repeated_warnings() {
  std::vector<std::string> out;
#if LAPTIME_ENABLED
  ErrorState& s = error_state();
  std::lock_guard<std::mutex> lock(s.warned_mutex);
  for (const auto& [key, w] : s.warned) {
    if (w.repeats == 0 || w.repeat_note.empty()) continue;
    out.push_back(std::to_string(w.repeats) + " more " + w.repeat_note);
  }
  std::sort(out.begin(), out.end());  // the map's order is not stable across runs
#endif
  return out;
}

/// Reports misuse of `call` according to the policy. The message gets the thread appended.
/// Returns normally only under ErrorPolicy::Warn; callers then leave their state unchanged.
/// A misuse that a program can repeat without bound (names past LAPTIME_MAX_NAMES) passes a
/// `once_key`: under Warn it prints once and is counted after that (see first_time).
[[gnu::cold]] inline void usage_error(std::string_view call, std::string_view what,
                                      std::string_view once_key = {},
                                      std::string_view repeat_note = {}) {
  const auto policy =
      static_cast<ErrorPolicy>(error_state().policy.load(std::memory_order_relaxed));
  if (policy == ErrorPolicy::Warn && !once_key.empty() && !first_time(once_key, repeat_note)) {
    return;
  }
  std::string message = "laptime: ";
  message += call;
  message += ": ";
  message += what;
  message += " [";
  message += thread_label();
  message += "]";
  switch (policy) {
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
