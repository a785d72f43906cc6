// laptime_bench, compiled-out variants: this file is built with LAPTIME_DISABLE (bench/CMakeLists),
// so it sees the empty-bodied API in its own inline namespace, next to the real one in bench.cpp.
// The goal (compiled out: no code, docs/performance.md) is no code at all: each loop should cost
// what BM_EmptyLoop costs.
#include <benchmark/benchmark.h>

#include "laptime/laptime.hpp"

#ifndef LAPTIME_DISABLE
#error "bench_disabled.cpp must be compiled with LAPTIME_DISABLE"
#endif
static_assert(!LAPTIME_ENABLED, "LAPTIME_DISABLE must compile laptime out");

namespace {

void BM_StopwatchPair_Disabled(benchmark::State& state) {
  for (auto _ : state) {
    laptime::Stopwatch::instance().start_meas("disabled");
    laptime::Stopwatch::instance().end_meas("disabled");
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_StopwatchPair_Disabled);

void BM_ScopedMeasurement_Disabled(benchmark::State& state) {
  for (auto _ : state) {
    LAPTIME_MEAS("disabled");
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_ScopedMeasurement_Disabled);

void BM_NvtxWrapperPushPop_Disabled(benchmark::State& state) {
  for (auto _ : state) {
    laptime::NVTXRangeWrapper::instance().range_push("disabled");
    laptime::NVTXRangeWrapper::instance().range_pop("disabled");
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_NvtxWrapperPushPop_Disabled);

}  // namespace
