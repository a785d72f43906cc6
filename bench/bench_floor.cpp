// laptime_bench: where the Stopwatch pair's time goes. Each BM_Floor_* loop is the one before it
// plus one thing start_meas/end_meas do, written out with laptime's own parts (the clock, the
// thread's record, the name lookup, the statistics) and nothing else, so that the difference
// between two steps is what that feature costs. bench/features.py prints them as a table (under
// bench/table.py's goals), ending with laptime's real pairs (bench.cpp's BM_StopwatchPair_*).
//
//   Tsc               read the cycle counter twice (the read now_ns() makes: detail::cycle_counter,
//                     plain rdtsc on x86-64), add the difference to a thread-local total
//   Clock             the same through detail::now_ns(): the counter scaled to nanoseconds
//   Record            + the calling thread's record, at start and at end (threads.local(), and the
//                     count of running intervals the pair keeps there)
//   Lookup_<names>    + the name's lookup at start and at end (StopwatchCore::lookup: the thread's
//                     NameCache, behind it its TextTable), the start kept in the name's slot
//   Histogram_<names> + the slot's statistics (IntervalStats::add: count, total, min, max and the
//                     histogram) instead of the thread-local total
//
// <names> are the layouts of the goals: one literal, a reused std::string buffer (rewritten
// between pairs, as BM_StopwatchPair_ReusedBuffer does), 1000 names round-robin (as
// BM_StopwatchPair_RoundRobin1000). What the real pair does beyond the last step (the enabled
// test, the epoch and run flag, the name's seen flag, the warm-up gate, the features word, the
// statistics generation) is the difference to its BM_StopwatchPair_* row.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bench_support.hpp"
#include "laptime/laptime.hpp"

namespace {

namespace detail = laptime::detail;
using laptime::Stopwatch;
using laptime_bench::enable_stopwatch;

thread_local std::uint64_t tl_total = 0;  // the floor's "slot"

// Until the cycle counter is calibrated now_ns() answers from steady_clock (detail/clock.hpp):
// take the two anchors before timing it. False where laptime uses steady_clock for good.
bool clock_calibrated() {
  for (int i = 0; i < 100; ++i) {
    benchmark::DoNotOptimize(detail::now_ns());
    if (detail::clock_scale_pointer().load()->mult.load() != 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

void BM_Floor_Tsc(benchmark::State& state) {
  for (auto _ : state) {
    const std::uint64_t t0 = detail::cycle_counter();
    const std::uint64_t t1 = detail::cycle_counter();
    tl_total += t1 - t0;
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_Floor_Tsc);

void BM_Floor_Clock(benchmark::State& state) {
  if (!clock_calibrated()) state.SkipWithError("laptime's clock is steady_clock here");
  for (auto _ : state) {
    const std::int64_t t0 = detail::now_ns();
    const std::int64_t t1 = detail::now_ns();
    tl_total += static_cast<std::uint64_t>(t1 - t0);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_Floor_Clock);

void BM_Floor_Record(benchmark::State& state) {
  enable_stopwatch();
  if (!clock_calibrated()) state.SkipWithError("laptime's clock is steady_clock here");
  detail::StopwatchCore& core = detail::stopwatch_core();
  for (auto _ : state) {
    detail::ThreadRecord& r0 = core.threads.local();
    ++r0.running;
    const std::int64_t t0 = detail::now_ns();
    const std::int64_t t1 = detail::now_ns();
    detail::ThreadRecord& r1 = core.threads.local();
    --r1.running;
    tl_total += static_cast<std::uint64_t>(t1 - t0);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_Floor_Record);

// One pair of the Lookup (kHistogram false) or Histogram step for `name`.
template <bool kHistogram>
LAPTIME_ALWAYS_INLINE void floor_pair(detail::StopwatchCore& core, std::string_view name) {
  detail::ThreadRecord& r0 = core.threads.local();
  detail::Slot& s0 = *core.lookup(r0, name)->value;
  ++r0.running;
  s0.start_ns.store(detail::now_ns(), std::memory_order_relaxed);
  const std::int64_t t1 = detail::now_ns();
  detail::ThreadRecord& r1 = core.threads.local();
  detail::Slot& s1 = *core.lookup(r1, name)->value;
  --r1.running;
  const std::int64_t t0 = s1.start_ns.load(std::memory_order_relaxed);
  const auto dt = static_cast<std::uint64_t>(t1 > t0 ? t1 - t0 : 0);
  if constexpr (kHistogram) {
    s1.stats.add(dt);
  } else {
    tl_total += dt;
  }
}

// The Stopwatch enabled, each name started and ended once through it (its slot prepared, its
// histogram allocated, the cache filled), the clock calibrated; false after SkipWithError.
bool floor_setup(benchmark::State& state, const std::vector<std::string>& names) {
  enable_stopwatch();
  for (const std::string& name : names) {
    Stopwatch::instance().start_meas(name);
    Stopwatch::instance().end_meas(name);
  }
  if (!clock_calibrated()) {
    state.SkipWithError("laptime's clock is steady_clock here");
    return false;
  }
  return true;
}

template <bool kHistogram>
void floor_literal(benchmark::State& state) {
  constexpr std::string_view kName = "floor literal";
  if (!floor_setup(state, {std::string(kName)})) return;
  detail::StopwatchCore& core = detail::stopwatch_core();
  for (auto _ : state) {
    floor_pair<kHistogram>(core, kName);
    benchmark::ClobberMemory();
  }
}

template <bool kHistogram>
void floor_reused_buffer(benchmark::State& state) {
  const char* texts[4] = {"decode", "augment", "collate", "transfer"};
  if (!floor_setup(state, {})) return;
  std::string buffer;
  buffer.reserve(32);
  for (const char* text : texts) {
    buffer.assign(text);
    Stopwatch::instance().start_meas(buffer);
    Stopwatch::instance().end_meas(buffer);
  }
  detail::StopwatchCore& core = detail::stopwatch_core();
  std::size_t i = 0;
  for (auto _ : state) {
    buffer.assign(texts[i]);  // same storage, another text
    i = (i + 1) & 3;
    floor_pair<kHistogram>(core, buffer);
    benchmark::ClobberMemory();
  }
}

template <bool kHistogram>
void floor_round_robin(benchmark::State& state) {
  std::vector<std::string> names;
  for (int k = 0; k < 1000; ++k) names.push_back("round robin name " + std::to_string(k));
  if (!floor_setup(state, names)) return;
  detail::StopwatchCore& core = detail::stopwatch_core();
  std::size_t i = 0;
  for (auto _ : state) {
    const std::string& name = names[i];
    i = i + 1 == names.size() ? 0 : i + 1;
    floor_pair<kHistogram>(core, name);
    benchmark::ClobberMemory();
  }
}

void BM_Floor_Lookup_Literal(benchmark::State& state) {
  floor_literal<false>(state);
}
void BM_Floor_Histogram_Literal(benchmark::State& state) {
  floor_literal<true>(state);
}
void BM_Floor_Lookup_ReusedBuffer(benchmark::State& state) {
  floor_reused_buffer<false>(state);
}
void BM_Floor_Histogram_ReusedBuffer(benchmark::State& state) {
  floor_reused_buffer<true>(state);
}
void BM_Floor_Lookup_RoundRobin1000(benchmark::State& state) {
  floor_round_robin<false>(state);
}
void BM_Floor_Histogram_RoundRobin1000(benchmark::State& state) {
  floor_round_robin<true>(state);
}
BENCHMARK(BM_Floor_Lookup_Literal);
BENCHMARK(BM_Floor_Histogram_Literal);
BENCHMARK(BM_Floor_Lookup_ReusedBuffer);
BENCHMARK(BM_Floor_Histogram_ReusedBuffer);
BENCHMARK(BM_Floor_Lookup_RoundRobin1000);
BENCHMARK(BM_Floor_Histogram_RoundRobin1000);

}  // namespace
