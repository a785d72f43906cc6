// laptime internals: the one route of every message laptime prints or throws, below every
// component: usage_error() for misuse (by the error policy), warn_once() for warnings, the
// process-wide warning table. The public names it reports through (UsageError, ErrorPolicy and
// the policy's names, detail/error_policy.hpp) are documented with the API in laptime/error.hpp,
// which builds on this file: a component's machinery includes this file and never the public
// header.
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "laptime/config.hpp"
#include "laptime/detail/env.hpp"
#include "laptime/detail/env_vars.hpp"
#include "laptime/detail/error_policy.hpp"
#include "laptime/detail/fork_plan.hpp"
#include "laptime/detail/names.hpp"
#include "laptime/detail/process_singleton.hpp"
#include "laptime/detail/thread.hpp"

LAPTIME_BEGIN_NAMESPACE

namespace detail {

// The functions below are templates (`template <int = 0>`, called as plain functions) so that a
// file which includes this header but never reports an error — one that only pushes NVTX ranges —
// does not compile them (the compile-cost goal of docs/build.md); ErrorState is one for the same
// reason.

template <int = 0>
struct BasicErrorState {
  BasicErrorState() {
    const EnvReading<int> chosen = env_choice<Env::on_error>();
    if (chosen.value) {
      policy.store(*chosen.value);  // the table's values are in ErrorPolicy's order
    } else if (!chosen.warning.empty()) {
      // Not through warn_once: that needs this object.
      std::fprintf(stderr, "laptime: warning: %s\n", chosen.warning.c_str());
    }
  }
  std::atomic<int> policy{static_cast<int>(ErrorPolicy::Throw)};
  std::mutex warned_mutex;
  struct Warned {
    std::string key;            ///< the cause
    std::uint64_t repeats = 0;  ///< times seen after the first
    std::string repeat_note;    ///< "calls ... were not measured": what the count is of
  };
  std::vector<Warned> warned;  ///< by cause, in first-seen order (causes are few: one per site)
};
using ErrorState = BasicErrorState<>;

/// The process-wide warning table and policy; joins the fork plan (kForkErrors) at first use.
template <int = 0>
ErrorState& error_state() {
  return process_singleton<ErrorState>("errors", [](ErrorState& state) {
    fork_participate(
        kForkErrors, &state, [] { error_state().warned_mutex.lock(); },
        [] { error_state().warned_mutex.unlock(); }, [] { error_state().warned_mutex.unlock(); });
  });
}

/// The one route of every warning and warned usage error: true the first time `key` (a cause)
/// is seen in this process; later times are only counted, so that a cause repeated a million
/// times prints one line. With a `repeat_note`, repeated_warnings() reports the count. Never
/// throws: warnings come from noexcept paths, out of memory among them.
template <int = 0>
bool first_time(std::string_view key, std::string_view repeat_note = {}) noexcept {
  ErrorState& s = error_state();
  std::lock_guard<std::mutex> lock(s.warned_mutex);
  for (ErrorState::Warned& w : s.warned) {
    if (w.key == key) {
      ++w.repeats;
      return false;
    }
  }
  try {
    s.warned.push_back(ErrorState::Warned{std::string(key), 0, std::string(repeat_note)});
  } catch (...) {  // no memory to remember it (a warning about that, often): said, not counted
  }
  return true;
}

/// Prints "laptime: warning: <message>" to stderr the first time `key` is seen in this process.
template <int = 0>
void warn_once(std::string_view key, std::string_view message,
               std::string_view repeat_note = {}) noexcept {
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
template <int = 0>
std::vector<std::string> repeated_warnings() {
  std::vector<std::string> out;
#if LAPTIME_ENABLED
  ErrorState& s = error_state();
  std::lock_guard<std::mutex> lock(s.warned_mutex);
  for (const ErrorState::Warned& w : s.warned) {
    if (w.repeats == 0 || w.repeat_note.empty()) continue;
    out.push_back(std::to_string(w.repeats) + " more " + w.repeat_note);
  }
  // Sorted (an insertion sort: a few lines, and no <algorithm> for every file that includes this).
  for (std::size_t i = 1; i < out.size(); ++i) {
    for (std::size_t j = i; j > 0 && out[j] < out[j - 1]; --j) out[j].swap(out[j - 1]);
  }
#endif
  return out;
}

/// Stopwatch::reset(): the repeats counted so far are dropped with the results they came with
/// (each cause is still told only once per process).
template <int = 0>
void clear_repeated_warnings() noexcept {
#if LAPTIME_ENABLED
  ErrorState& s = error_state();
  std::lock_guard<std::mutex> lock(s.warned_mutex);
  for (ErrorState::Warned& w : s.warned) w.repeats = 0;
#endif
}

/// Under ErrorPolicy::Warn, whether the misuse `once_key` was told already: it is then counted
/// (see first_time) and its caller returns without building the message. False otherwise: the
/// first time (now recorded), and under the other policies; the caller then calls usage_error
/// without a key.
template <int = 0>
bool usage_error_told(std::string_view once_key, std::string_view repeat_note) noexcept {
  return static_cast<ErrorPolicy>(error_state().policy.load(std::memory_order_relaxed)) ==
             ErrorPolicy::Warn &&
         !first_time(once_key, repeat_note);
}

/// Reports misuse of `call` according to the policy. The message gets the thread appended.
/// Returns normally only under ErrorPolicy::Warn; callers then leave their state unchanged.
/// A misuse that a program can repeat without bound (names past LAPTIME_MAX_NAMES) passes a
/// `once_key`: under Warn it prints once and is counted after that (see first_time).
/// Call it holding none of laptime's locks: under ErrorPolicy::Abort the SIGABRT handler writes
/// the results (LAPTIME_OUTPUT), through the locks that results() takes.
template <int = 0>
[[gnu::cold]] void usage_error(std::string_view call, std::string_view what,
                               std::string_view once_key = {}, std::string_view repeat_note = {}) {
  if (!once_key.empty() && usage_error_told(once_key, repeat_note)) return;
  const auto policy =
      static_cast<ErrorPolicy>(error_state().policy.load(std::memory_order_relaxed));
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

/// The rank of this process from its environment (detect_rank in detail/env.hpp, over getenv);
/// a malformed variable is warned about once. Here rather than in env.hpp because it warns.
template <int = 0>
RankInfo detect_rank() {
  std::vector<std::string> warnings;
  const RankInfo info = detect_rank(env_raw, &warnings);
  for (const std::string& w : warnings) warn_once("env:" + w.substr(0, w.find('=')), w);
  return info;
}

/// The value of a LAPTIME_* variable read through its table (detail/env_vars.hpp): a malformed
/// value is warned about once and ignored (nullopt). Here rather than there because it warns.
template <class Reading>
auto env_checked(Reading reading) {
  if (!reading.warning.empty()) warn_once(reading.warning, reading.warning);
  return std::move(reading.value);
}

}  // namespace detail

LAPTIME_END_NAMESPACE
