// laptime internals: the Stopwatch's one-time measurements (start_one_time_measurement), one part
// of its process-wide state (stopwatch_parts.hpp). one_time_mutex is this part's lock (held across
// fork, so that a child gets the list whole); start_one_time and end_one_time
// (stopwatch_config.hpp) write under it. The implementation part.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "laptime/config.hpp"
#include "laptime/results.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

struct OneTime {
  std::string name;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  bool running = true;
};

struct OneTimeLog {
  std::mutex one_time_mutex;
  std::vector<OneTime> one_time;
  // Names that were running at reset(): each one's end is dropped without an error, once, as an
  // interval's across reset() is (docs/guarantees.md).
  std::vector<std::string> dropped_by_reset;

  /// The one-time measurements for a report (a running one counts 0 ns).
  std::vector<OneTimeResult> one_time_results() {
    std::vector<OneTimeResult> out;
    std::lock_guard<std::mutex> lock(one_time_mutex);
    for (const OneTime& o : one_time) {
      out.push_back(
          {o.name, static_cast<double>(o.running ? 0 : o.end_ns - o.start_ns), o.running});
    }
    return out;
  }

  /// reset(): the one-time measurements so far are forgotten.
  void clear_one_time() {
    std::lock_guard<std::mutex> lock(one_time_mutex);
    for (OneTime& o : one_time) {
      if (o.running) dropped_by_reset.push_back(std::move(o.name));
    }
    one_time.clear();
  }

  /// Whether `name` ran at a reset(): its end is then dropped (once). Under one_time_mutex.
  bool take_dropped(std::string_view name) {
    for (auto it = dropped_by_reset.begin(); it != dropped_by_reset.end(); ++it) {
      if (*it == name) {
        dropped_by_reset.erase(it);
        return true;
      }
    }
    return false;
  }

  // Fork (StopwatchState::before_fork): held across it, released on both sides.
  void lock_one_time_for_fork() { one_time_mutex.lock(); }
  void unlock_one_time_after_fork() { one_time_mutex.unlock(); }
};

}  // namespace detail
LAPTIME_END_NAMESPACE
