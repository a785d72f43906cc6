// laptime_bench: what a start/end pair costs when its name is past the name limit
// (set_max_names, LAPTIME_MAX_NAMES) under ErrorPolicy::Warn: not measured, told once, then
// counted (docs/configuration.md, LAPTIME_MAX_NAMES). A program that builds its names at run time
// (one per sample or file) runs into the limit on every call from then on.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "bench_support.hpp"
#include "laptime/laptime.hpp"

namespace {

using laptime::Stopwatch;

// state.range(0) names past the limit, in turn (1: one name on every call).
void BM_StopwatchPair_PastNameLimit(benchmark::State& state) {
  laptime_bench::enable_stopwatch();
  Stopwatch& sw = Stopwatch::instance();
  const laptime::ErrorPolicy policy = laptime::error_policy();
  laptime::set_error_policy(laptime::ErrorPolicy::Warn);
  // The limit goes down to the names known so far (never below them: one warning), so that every
  // name below is refused; it goes back up after the row. One name is known at least, also where
  // this row runs alone (a limit of 1 would otherwise take the first name below).
  sw.start_meas("within the limit");
  sw.end_meas("within the limit");
  sw.set_max_names(1);
  std::vector<std::string> names;
  for (int i = 0; i < state.range(0); ++i) names.push_back("past the limit " + std::to_string(i));
  std::size_t i = 0;
  for (auto _ : state) {
    const std::string& name = names[i];
    i = i + 1 == names.size() ? 0 : i + 1;
    sw.start_meas(name);
    sw.end_meas(name);
    benchmark::ClobberMemory();
  }
  sw.set_max_names(LAPTIME_MAX_NAMES);
  laptime::set_error_policy(policy);
}
BENCHMARK(BM_StopwatchPair_PastNameLimit)->Arg(1)->Arg(1000);

}  // namespace
