// Accuracy of tracked intervals, as counters (the time columns only say how long a row ran):
//   - TrackedCpuError: the process tree's CPU of short intervals against every process's own
//     kernel CPU clock read at the same boundaries, with child processes busy inside the
//     intervals only (loader workers); error_pct is the median, abs_p90_pct the 90th percentile
//     of |error| over the row's intervals (one interval per iteration);
//   - TrackedIntervalTime: how much shorter than a steady_clock timing around start_meas..end_meas
//     an interval of 1 ms of work reads, tracked and untracked (median over the iterations).
// The measuring code is the test's (tests/tracking_support.hpp): tests/tracking-test.cpp asserts
// what these rows report.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "laptime/laptime.hpp"
#include "tracking_support.hpp"

namespace {

void BM_TrackedCpuError(benchmark::State& state) {
  laptime_test::LoaderChildren kids(static_cast<int>(state.range(1)));
  if (!kids.ok()) state.SkipWithError("fork() failed");
  (void)laptime::resources::sample();  // starts the children sampler
  std::vector<double> errors;
  for (auto _ : state) {
    const auto one = laptime_test::tree_cpu_errors(kids, state.range(0) * 1000000, 1);
    errors.insert(errors.end(), one.begin(), one.end());
  }
  std::vector<double> abs_errors;
  for (const double e : errors) abs_errors.push_back(std::fabs(e));
  std::sort(abs_errors.begin(), abs_errors.end());
  state.counters["error_pct"] = laptime_test::median_of(errors) * 100;
  state.counters["abs_p90_pct"] =
      abs_errors.empty() ? 0 : abs_errors[(abs_errors.size() * 9) / 10] * 100;
}
BENCHMARK(BM_TrackedCpuError)
    ->ArgNames({"interval_ms", "children"})
    ->ArgsProduct({{1, 5, 20, 100}, {0, 4, 16}})
    ->Iterations(21)
    ->Unit(benchmark::kMillisecond);

void BM_TrackedIntervalTime(benchmark::State& state) {
  laptime::detail::testing_reset_stopwatch();
  laptime::Stopwatch& sw = laptime::Stopwatch::instance();
  sw.enable(0);
  sw.enable_recording(4096);
  sw.track_cpu_usage("tracked");
  std::vector<double> tracked, untracked;
  for (auto _ : state) {
    const auto t = laptime_test::interval_shortfalls("tracked", 1000000, 1);
    const auto u = laptime_test::interval_shortfalls("untracked", 1000000, 1);
    tracked.insert(tracked.end(), t.end() - std::min<std::ptrdiff_t>(1, t.size()), t.end());
    untracked.insert(untracked.end(), u.end() - std::min<std::ptrdiff_t>(1, u.size()), u.end());
  }
  state.counters["tracked_short_pct"] = laptime_test::median_of(tracked) * 100;
  state.counters["untracked_short_pct"] = laptime_test::median_of(untracked) * 100;
  laptime::detail::testing_reset_stopwatch();
}
BENCHMARK(BM_TrackedIntervalTime)->Iterations(101)->Unit(benchmark::kMillisecond);

}  // namespace
