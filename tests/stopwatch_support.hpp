// Shared helpers of the Stopwatch's doctest suites: a fresh singleton per test case, a result
// found by name, the message of a usage error.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "laptime/error.hpp"
#include "laptime/results.hpp"
#include "laptime/stopwatch.hpp"
#include "test_support.hpp"

namespace laptime_test {

/// Busy for `d` (a measured interval that must last at least that long).
inline void spin_for(std::chrono::microseconds d) {
  const auto until = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < until) {
  }
}

/// Puts the Stopwatch back to its state before the first enable(), before and after a test case;
/// usage errors throw.
#if LAPTIME_ENABLED
struct Fresh {
  Fresh() {
    laptime::detail::testing_reset_stopwatch();
    laptime::set_error_policy(laptime::ErrorPolicy::Throw);
  }
  ~Fresh() { laptime::detail::testing_reset_stopwatch(); }
  Fresh(const Fresh&) = delete;
  Fresh& operator=(const Fresh&) = delete;
};
#else
struct Fresh {
  Fresh() {}  // user-provided: no unused-variable warning in the compiled-out build
};
#endif

/// A copy of the measurement `name` of `r` (callers pass temporaries), or nullptr.
inline std::unique_ptr<const laptime::MeasurementResult> find(const laptime::Results& r,
                                                              const std::string& name) {
  for (const auto& m : r.measurements) {
    if (m.name == name) return std::make_unique<const laptime::MeasurementResult>(m);
  }
  return nullptr;
}

/// How many intervals of `name` the Stopwatch counted (0: none, or no such name).
inline std::uint64_t count_of(const std::string& name) {
  const auto m = find(laptime::Stopwatch::instance().results(), name);
  return m ? m->count : 0;
}

/// Spins until `stage` reaches `value` (threads of a test taking turns).
inline void wait_for(const std::atomic<int>& stage, int value) {
  while (stage.load() < value) std::this_thread::yield();
}

/// The message of the UsageError `f` raises; empty when it raises none.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const laptime::UsageError& e) {
    return e.what();
  }
  return "";
}

}  // namespace laptime_test
