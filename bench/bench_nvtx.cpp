// laptime_bench's NVTX rows (bench.cpp says how the benchmark puts the singletons in the state
// each row measures): the wrapper's push and pop against NVTX's own, Stopwatch intervals as NVTX
// ranges against the same written by hand, and the counters of tracked names against a raw
// counter sample.
#include <benchmark/benchmark.h>

#include <utility>

#include "bench_support.hpp"
#include "laptime/laptime.hpp"

#if LAPTIME_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>
#endif
#if LAPTIME_HAVE_NVTX_COUNTERS
#include <nvtx3/nvToolsExtCounters.h>
#endif

namespace {

using laptime::NVTXRangeWrapper;
using laptime::Stopwatch;
using laptime_bench::enable_stopwatch;

// ---- NVTX -------------------------------------------------------------------------------------

#if LAPTIME_HAVE_NVTX
// What the wrapper wraps, with no tool attached (NVTX_INJECTION64_PATH unset).
void BM_NvtxRawPushPop(benchmark::State& state) {
  for (auto _ : state) {
    nvtxRangePushA("raw");
    nvtxRangePop();
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_NvtxRawPushPop);

// The calls the wrapper makes: a registered string in the global domain through the Ex API.
void BM_NvtxRawDomainPushPopEx(benchmark::State& state) {
  nvtxInitialize(nullptr);
  const nvtxStringHandle_t handle = nvtxDomainRegisterStringA(nullptr, "raw ex");
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  if (handle != nullptr) {
    a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    a.message.registered = handle;
  } else {
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = "raw ex";
  }
  for (auto _ : state) {
    nvtxDomainRangePushEx(nullptr, &a);
    nvtxDomainRangePop(nullptr);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_NvtxRawDomainPushPopEx);
#endif  // without the NVTX3 headers there is no raw baseline; the table shows it as absent

void enable_nvtx(bool track) {
  laptime::detail::nvtx_reset_for_testing();
  NVTXRangeWrapper::instance().enable(/*sync_on_push=*/false, /*sync_on_pop=*/false, track);
}

void BM_NvtxWrapperPushPop_NotEnabled(benchmark::State& state) {
  if (state.thread_index() == 0) laptime::detail::nvtx_reset_for_testing();
  if (NVTXRangeWrapper::instance().is_enabled()) state.SkipWithError("the wrapper is enabled");
  for (auto _ : state) {
    NVTXRangeWrapper::instance().range_push("not enabled");
    NVTXRangeWrapper::instance().range_pop();
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_NvtxWrapperPushPop_NotEnabled);

// Enabled, order tracking off.
void BM_NvtxWrapperPushPop(benchmark::State& state) {
  if (state.thread_index() == 0) enable_nvtx(false);
  for (auto _ : state) {
    NVTXRangeWrapper::instance().range_push("wrapper");
    NVTXRangeWrapper::instance().range_pop();
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_NvtxWrapperPushPop);

// Enabled, order tracking on: the pop checks the expected name against the thread's stack.
void BM_NvtxWrapperPushPop_Tracked(benchmark::State& state) {
  if (state.thread_index() == 0) enable_nvtx(true);
  for (auto _ : state) {
    NVTXRangeWrapper::instance().range_push("tracked");
    NVTXRangeWrapper::instance().range_pop("tracked");
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_NvtxWrapperPushPop_Tracked)->Threads(1)->Threads(2);

// The RAII form with a per-call-site registered name (LAPTIME_RANGE), order tracking on.
void BM_NvtxScopedRange_Tracked(benchmark::State& state) {
  if (state.thread_index() == 0) enable_nvtx(true);
  for (auto _ : state) {
    LAPTIME_RANGE("scoped");
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_NvtxScopedRange_Tracked);

// ---- Stopwatch intervals as NVTX ranges (Stopwatch::set_nvtx_ranges, docs/nvtx.md) ------------
// The same work two ways, in the same run: the option on, and the Stopwatch pair with the wrapper's
// push/pop written next to it by hand. Goal: unified <= by hand.

void enable_unified(bool on, bool track) {
  enable_stopwatch();
  enable_nvtx(track);
  Stopwatch::instance().set_nvtx_ranges(on);
}

void BM_UnifiedRange(benchmark::State& state) {
  if (state.thread_index() == 0) enable_unified(true, false);
  for (auto _ : state) {
    Stopwatch::instance().start_meas("unified");
    Stopwatch::instance().end_meas("unified");
    benchmark::ClobberMemory();
  }
  if (state.thread_index() == 0) Stopwatch::instance().set_nvtx_ranges(false);
}
BENCHMARK(BM_UnifiedRange);

void BM_ByHandRange(benchmark::State& state) {
  if (state.thread_index() == 0) enable_unified(false, false);
  for (auto _ : state) {
    NVTXRangeWrapper::instance().range_push("by hand");
    Stopwatch::instance().start_meas("by hand");
    Stopwatch::instance().end_meas("by hand");
    NVTXRangeWrapper::instance().range_pop();
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_ByHandRange);

// With order tracking (the debugging profile): the end checks the innermost range, as
// range_pop(name) does.
void BM_UnifiedRange_Tracked(benchmark::State& state) {
  if (state.thread_index() == 0) enable_unified(true, true);
  for (auto _ : state) {
    Stopwatch::instance().start_meas("unified tracked");
    Stopwatch::instance().end_meas("unified tracked");
    benchmark::ClobberMemory();
  }
  if (state.thread_index() == 0) Stopwatch::instance().set_nvtx_ranges(false);
}
BENCHMARK(BM_UnifiedRange_Tracked);

void BM_ByHandRange_Tracked(benchmark::State& state) {
  if (state.thread_index() == 0) enable_unified(false, true);
  for (auto _ : state) {
    NVTXRangeWrapper::instance().range_push("by hand tracked");
    Stopwatch::instance().start_meas("by hand tracked");
    Stopwatch::instance().end_meas("by hand tracked");
    NVTXRangeWrapper::instance().range_pop("by hand tracked");
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_ByHandRange_Tracked);

// ---- CPU and I/O as NVTX counters (laptime/counters.hpp, docs/resources.md) --------------------

#if LAPTIME_HAVE_NVTX_COUNTERS
// Two samples 10 ms apart, with every figure valid: what an interval's end publishes.
std::pair<laptime::resources::Sample, laptime::resources::Sample> counter_window() {
  laptime::resources::Sample a, b;
  a.tree_cpu_ok = b.tree_cpu_ok = a.system_ok = b.system_ok = a.io_ok = b.io_ok = true;
  a.tree_cpu_s = 1.0;
  b.tree_cpu_s = 1.005;
  a.system_total_ticks = 1000;
  b.system_total_ticks = 1002;
  b.system_busy_ticks = 1;
  b.read_bytes = b.write_bytes = 4096;
  a.taken_ns = 1'000'000'000;
  b.taken_ns = 1'010'000'000;
  return {a, b};
}

// The raw baseline: one nvtxCounterSampleFloat64 with no tool attached (NVTX's own no-tool path:
// a load of the extension's slot and a branch, after the first call).
void BM_NvtxCounterSampleRaw(benchmark::State& state) {
  const nvtxDomainHandle_t domain = nvtxDomainCreateA("laptime-bench");
  double v = 12.5;
  for (auto _ : state) {
    nvtxCounterSampleFloat64(domain, NVTX_COUNTER_ID_STATIC_START, v);
    benchmark::DoNotOptimize(v);
  }
}
BENCHMARK(BM_NvtxCounterSampleRaw);

// laptime publishing one window's four figures (the interval's Usage arithmetic, then four
// samples) with no tool attached: a counter set with ids, as a tool would have given.
void BM_NvtxCountersPublish_NoTool(benchmark::State& state) {
  namespace d = laptime::detail;
  d::NvtxCountersState& c = d::nvtx_counters_state();
  laptime::enable_nvtx_counters();  // the domain and the CPU count
  d::NvtxCounterSet set;
  for (int i = 0; i < d::kCounterFigures; ++i) {
    set.id[i] = NVTX_COUNTER_ID_STATIC_START + static_cast<std::uint64_t>(i);
  }
  set.any = true;
  const auto [a, b] = counter_window();
  for (auto _ : state) {
    d::nvtx_counters_publish(c, set, a, b, 10'000'000);
    benchmark::ClobberMemory();
  }
  laptime::disable_nvtx_counters();
}
BENCHMARK(BM_NvtxCountersPublish_NoTool);

// What a tracked interval's end adds (the Stopwatch's hook), counters off, and on with no tool
// attached (the name's counters got no id at registration: nothing is published).
void counters_interval_end(benchmark::State& state, bool on) {
  namespace d = laptime::detail;
  enable_stopwatch();
  Stopwatch::instance().track_cpu_usage("counted");
  if (on) laptime::enable_nvtx_counters();
  Stopwatch::instance().start_meas("counted");  // interns the name: its id and text
  Stopwatch::instance().end_meas("counted");
  d::StopwatchState& sw = d::stopwatch_state();
  std::uint32_t id = 0;
  while (id < LAPTIME_MAX_NAMES - 1) {
    const std::string* n = sw.names[id].load();
    if (n == nullptr || *n == "counted") break;
    ++id;
  }
  const auto [a, b] = counter_window();
  for (auto _ : state) {
    d::nvtx_counters_interval_end(id, sw.names[id], a, b, 10'000'000);
    benchmark::ClobberMemory();
  }
  laptime::disable_nvtx_counters();
  laptime::detail::testing_reset_stopwatch();
}
void BM_NvtxCountersIntervalEnd_Off(benchmark::State& state) {
  counters_interval_end(state, false);
}
BENCHMARK(BM_NvtxCountersIntervalEnd_Off);
void BM_NvtxCountersIntervalEnd_NoTool(benchmark::State& state) {
  counters_interval_end(state, true);
}
BENCHMARK(BM_NvtxCountersIntervalEnd_NoTool);
#endif  // LAPTIME_HAVE_NVTX_COUNTERS

}  // namespace
