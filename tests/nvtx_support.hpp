// Shared by the NVTX suites (nvtx-test, nvtx-order-test): the recorder's log read per thread, a
// fresh wrapper per case, and main(), which puts every case under tests/nvtx_recorder.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "laptime/detail/thread.hpp"  // current_tid
#include "laptime/error.hpp"
#include "laptime/nvtx.hpp"
#include "laptime/results.hpp"
#include "laptime/stopwatch.hpp"
#include "nvtx_recorder_api.hpp"
#include "test_support.hpp"

// Behavioural cases that read the recorder: skipped in the LAPTIME_DISABLE build and where the
// NVTX headers (hence the recorder) are missing.
#if LAPTIME_ENABLED && LAPTIME_HAVE_NVTX && defined(LAPTIME_NVTX_RECORDER_PATH)
#define NEEDS_RECORDER doctest::skip(false)
#else
#define NEEDS_RECORDER doctest::skip(true)
#endif

namespace nvtx_test {

using laptime::NVTXRangeWrapper;

inline bool have_recorder() {
  return recorder_api() != nullptr;
}

inline std::vector<std::string> all_events() {
  return recorder_events();
}

/// The events the thread `tid` made, without their " tid=..." suffix.
inline std::vector<std::string> events_of(long tid) {
  const std::string suffix = " tid=" + std::to_string(tid);
  std::vector<std::string> out;
  for (const std::string& e : all_events()) {
    if (e.size() >= suffix.size() &&
        e.compare(e.size() - suffix.size(), suffix.size(), suffix) == 0) {
      out.push_back(e.substr(0, e.size() - suffix.size()));
    }
  }
  return out;
}

inline std::vector<std::string> my_events() {
  return events_of(laptime::detail::current_tid());
}

inline std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += l + "\n";
  return out;
}

/// Compares as text, so that a failure prints both sequences readably.
#define CHECK_EVENTS(actual, ...) \
  CHECK(joined(actual) == joined(std::vector<std::string> __VA_ARGS__))

inline void clear_events() {
  recorder_clear();
}

/// A fresh, disabled wrapper and an empty log; the error policy back to Throw afterwards.
struct Fresh {
  Fresh() {
    laptime::detail::nvtx_reset_for_testing();
    laptime::set_error_policy(laptime::ErrorPolicy::Throw);
    clear_events();
  }
  ~Fresh() {
    laptime::set_error_policy(laptime::ErrorPolicy::Throw);
    laptime::detail::nvtx_reset_for_testing();
  }
};

inline std::string usage_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const laptime::UsageError& e) {
    return e.what();
  }
  return "(no UsageError)";
}

/// With order tracking on: a pop that skips the innermost range and a pop with none open are
/// usage errors, and the right pops go through.
inline void check_order_errors(NVTXRangeWrapper& nvtx) {
  nvtx.range_push("outer");
  nvtx.range_push("inner");
  CHECK(usage_error_of([&] { nvtx.range_pop("outer"); }).find("'outer' > 'inner'") !=
        std::string::npos);
  CHECK_NOTHROW(nvtx.range_pop("inner"));
  CHECK_NOTHROW(nvtx.range_pop("outer"));
  CHECK(usage_error_of([&] { nvtx.range_pop(); }) != "(no UsageError)");
}

inline void instrumented_function() {
  LAPTIME_FUNC_RANGE();
}

#if LAPTIME_ENABLED
/// A fresh wrapper and Stopwatch (measuring from the first iteration); both reset afterwards.
struct FreshUnified : Fresh {
  FreshUnified() { laptime::detail::testing_reset_stopwatch(); }
  ~FreshUnified() { laptime::detail::testing_reset_stopwatch(); }
};

inline std::int64_t count_of(const std::string& name) {
  for (const auto& m : laptime::Stopwatch::instance().results().measurements) {
    if (m.name == name) return m.count;
  }
  return -1;
}
#endif

/// main() of the NVTX suites. NVTX reads NVTX_INJECTION64_PATH at its first call, which comes
/// later: every case runs under the recorder (but in a copy started with
/// LAPTIME_TEST_NO_NVTX_TOOL set, which leaves NVTX without a tool).
inline int run_under_recorder(int argc, char** argv) {
#ifdef LAPTIME_NVTX_RECORDER_PATH
  if (std::getenv("LAPTIME_TEST_NO_NVTX_TOOL") == nullptr) {
    ::setenv("NVTX_INJECTION64_PATH", LAPTIME_NVTX_RECORDER_PATH, 1);
  }
#endif
  doctest::Context context(argc, argv);
  return context.run();
}

}  // namespace nvtx_test
