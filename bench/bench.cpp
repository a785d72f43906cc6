// laptime_bench: the cost of every hot path next to its raw baseline, measured in the same run
// (the cost contract: docs/performance.md). bench/run.sh runs it and prints the table;
// bench/README.md explains the figures.
//
// The Stopwatch and the NVTX wrapper are process-wide singletons, so every benchmark puts them in
// the state it measures before its loop (thread 0 does it; Google Benchmark starts the timed loop
// of all threads together, after that). The compiled-out (LAPTIME_DISABLE) variants live in
// bench_disabled.cpp, compiled with that definition into this same binary; the NVTX rows in
// bench_nvtx.cpp, the /proc and memory rows in bench_resources.cpp; bench_tracking.cpp holds the
// accuracy rows of tracked intervals.
#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bench_support.hpp"
#include "laptime/laptime.hpp"

namespace {

using laptime::Stopwatch;
using laptime_bench::enable_stopwatch;
using laptime_bench::thread_cpu_s;

// ---- Baselines ------------------------------------------------------------------------------

void BM_EmptyLoop(benchmark::State& state) {
  for (auto _ : state) {
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_EmptyLoop);

// What a start/end pair must at least do: read the clock twice.
void BM_SteadyClockPair(benchmark::State& state) {
  for (auto _ : state) {
    auto a = std::chrono::steady_clock::now();
    auto b = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(a);
    benchmark::DoNotOptimize(b);
  }
}
BENCHMARK(BM_SteadyClockPair)->Threads(1)->Threads(2);

void BM_ClockGettimePair(benchmark::State& state) {
  for (auto _ : state) {
    timespec a;
    timespec b;
    ::clock_gettime(CLOCK_MONOTONIC, &a);
    ::clock_gettime(CLOCK_MONOTONIC, &b);
    benchmark::DoNotOptimize(a);
    benchmark::DoNotOptimize(b);
  }
}
BENCHMARK(BM_ClockGettimePair);

// For scale next to the /proc sampler: the process CPU clock (a system call, no vDSO).
void BM_ProcessCpuClock(benchmark::State& state) {
  for (auto _ : state) {
    timespec t;
    ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    benchmark::DoNotOptimize(t);
  }
}
BENCHMARK(BM_ProcessCpuClock);

// ---- Stopwatch --------------------------------------------------------------------------------

// Before enable(): what instrumentation left in a training run costs.
void BM_StopwatchPair_NotEnabled(benchmark::State& state) {
  if (state.thread_index() == 0) laptime::detail::testing_reset_stopwatch();
  if (Stopwatch::instance().is_enabled()) state.SkipWithError("the Stopwatch is enabled");
  for (auto _ : state) {
    Stopwatch::instance().start_meas("not enabled");
    Stopwatch::instance().end_meas("not enabled");
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_StopwatchPair_NotEnabled);

// After enable() and disable(): a name the thread used while enabled. A start made while disabled
// is remembered (its end after another thread's enable() must not raise), so this costs a slot
// look-up, not just a branch.
void BM_StopwatchPair_AfterDisable(benchmark::State& state) {
  if (state.thread_index() == 0) {
    enable_stopwatch();
    Stopwatch::instance().start_meas("disabled");
    Stopwatch::instance().end_meas("disabled");
    Stopwatch::instance().disable();
  }
  for (auto _ : state) {
    Stopwatch::instance().start_meas("disabled");
    Stopwatch::instance().end_meas("disabled");
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_StopwatchPair_AfterDisable);

// Enabled, a name the thread has already used: each thread its own name.
void BM_StopwatchPair_Enabled(benchmark::State& state) {
  static constexpr std::array<std::string_view, 4> kNames = {"enabled 0", "enabled 1", "enabled 2",
                                                             "enabled 3"};
  if (state.thread_index() == 0) enable_stopwatch();
  const std::string_view name = kNames[static_cast<std::size_t>(state.thread_index()) % 4];
  for (auto _ : state) {
    Stopwatch::instance().start_meas(name);
    Stopwatch::instance().end_meas(name);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_StopwatchPair_Enabled)->Threads(1)->Threads(2);

// Enabled with interval recording (enable_recording): the pair plus one write to the thread's
// ring of the last intervals (it wraps many times here). Goal: <= 1.3 x the plain pair.
void BM_StopwatchPair_Recording(benchmark::State& state) {
  if (state.thread_index() == 0) {
    enable_stopwatch();
    Stopwatch::instance().enable_recording(4096);
  }
  for (auto _ : state) {
    Stopwatch::instance().start_meas("recorded");
    Stopwatch::instance().end_meas("recorded");
    benchmark::ClobberMemory();
  }
  if (state.thread_index() == 0) Stopwatch::instance().enable_recording(0);
}
BENCHMARK(BM_StopwatchPair_Recording);

// A report with recording on and the ring full: every report, a periodic one too, reads each
// recorded interval (its samples and the slow tail), so its cost grows with the ring (ns per
// report, informative; docs/stopwatch.md, enable_recording).
void BM_Report_Recorded(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  Stopwatch& sw = Stopwatch::instance();
  enable_stopwatch();
  sw.enable_recording(n);
  for (std::size_t i = 0; i < n; ++i) {
    sw.start_meas("recorded for the report");
    sw.end_meas("recorded for the report");
    if (i % 16 == 15) sw.finish_iter();
  }
  for (auto _ : state) benchmark::DoNotOptimize(sw.results().to_text());
  sw.enable_recording(0);
}
BENCHMARK(BM_Report_Recorded)->Arg(1 << 16)->Arg(1 << 20);

// Enabled, every thread times the same name (each thread has its own slot for it).
void BM_StopwatchPair_Enabled_SameName(benchmark::State& state) {
  if (state.thread_index() == 0) enable_stopwatch();
  for (auto _ : state) {
    Stopwatch::instance().start_meas("enabled same name");
    Stopwatch::instance().end_meas("enabled same name");
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_StopwatchPair_Enabled_SameName)->Threads(1)->Threads(2);

// Enabled, the name's text at a different address each time (a name built at run time, as a
// Python f-string is): the pointer cache misses and the thread's map finds the name by content.
void BM_StopwatchPair_Enabled_DynamicName(benchmark::State& state) {
  if (state.thread_index() == 0) enable_stopwatch();
  std::vector<std::string> names(1024, std::string("dynamic name"));
  std::size_t i = 0;
  for (auto _ : state) {
    const std::string& name = names[i];
    i = (i + 1) % names.size();
    Stopwatch::instance().start_meas(name);
    Stopwatch::instance().end_meas(name);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_StopwatchPair_Enabled_DynamicName);

// Every name layout costs no more than the clock pair (docs/performance.md, goal 2). 64 one-word
// literals declared side by side (their addresses a few bytes apart: the layout a direct-mapped
// cache collided on), one std::string buffer whose text is rewritten between pairs (same address,
// another name), and 1000 distinct names in turn (more names than the per-thread cache holds).
#define LAPTIME_BENCH_W8(p) #p "0", #p "1", #p "2", #p "3", #p "4", #p "5", #p "6", #p "7"
constexpr const char* kDenseLiterals[64] = {
    LAPTIME_BENCH_W8(a), LAPTIME_BENCH_W8(b), LAPTIME_BENCH_W8(c), LAPTIME_BENCH_W8(d),
    LAPTIME_BENCH_W8(e), LAPTIME_BENCH_W8(f), LAPTIME_BENCH_W8(g), LAPTIME_BENCH_W8(h)};
#undef LAPTIME_BENCH_W8

void BM_StopwatchPair_DenseLiterals(benchmark::State& state) {
  enable_stopwatch();
  std::size_t i = 0;
  for (auto _ : state) {
    const char* name = kDenseLiterals[i];
    i = (i + 1) & 63;
    Stopwatch::instance().start_meas(name);
    Stopwatch::instance().end_meas(name);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_StopwatchPair_DenseLiterals);

void BM_StopwatchPair_ReusedBuffer(benchmark::State& state) {
  enable_stopwatch();
  const char* texts[4] = {"decode", "augment", "collate", "transfer"};
  std::string buffer;
  buffer.reserve(32);
  std::size_t i = 0;
  for (auto _ : state) {
    buffer.assign(texts[i]);  // same storage, another text
    i = (i + 1) & 3;
    Stopwatch::instance().start_meas(buffer);
    Stopwatch::instance().end_meas(buffer);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_StopwatchPair_ReusedBuffer);

void BM_StopwatchPair_RoundRobin1000(benchmark::State& state) {
  enable_stopwatch();
  std::vector<std::string> names;
  for (int k = 0; k < 1000; ++k) names.push_back("round robin name " + std::to_string(k));
  std::size_t i = 0;
  for (auto _ : state) {
    const std::string& name = names[i];
    i = i + 1 == names.size() ? 0 : i + 1;
    Stopwatch::instance().start_meas(name);
    Stopwatch::instance().end_meas(name);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_StopwatchPair_RoundRobin1000);

// The pair in a worker process (docs/workers.md): a forked child of the process that enabled the
// Stopwatch keeps its slots in the shared file its parent reads (impl/worker_share.hpp). Both
// rows time batches of pairs with the same loop and the thread's CPU clock, one in the parent, one
// in a child that the parent asks for each batch over a pipe; each iteration reports one pair
// (manual time: the batch's time / its pairs). Goal: the child's pair <= 1.1 x the parent's.
constexpr int kPairBatch = 2000;

// Timed by the thread's CPU clock: wall time would also count the time the thread waited for a
// core, differently in the two processes.
double time_pair_batch() {
  const double t0 = thread_cpu_s();
  for (int i = 0; i < kPairBatch; ++i) {
    Stopwatch::instance().start_meas("worker pair");
    Stopwatch::instance().end_meas("worker pair");
    benchmark::ClobberMemory();
  }
  return (thread_cpu_s() - t0) / kPairBatch;
}

void BM_StopwatchPair_ParentBatch(benchmark::State& state) {
  enable_stopwatch();
  (void)time_pair_batch();
  for (auto _ : state) state.SetIterationTime(time_pair_batch());
}
BENCHMARK(BM_StopwatchPair_ParentBatch)->Iterations(2000)->UseManualTime();

void BM_StopwatchPair_WorkerBatch(benchmark::State& state) {
  enable_stopwatch();
  int ask[2], answer[2];
  if (::pipe(ask) != 0 || ::pipe(answer) != 0) {
    state.SkipWithError("pipe");
    return;
  }
  std::fflush(stdout);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(ask[1]);
    ::close(answer[0]);
    if (!Stopwatch::instance().is_worker()) ::_exit(1);  // not measuring for the parent
    (void)time_pair_batch();
    char c = 0;
    while (::read(ask[0], &c, 1) == 1) {
      const double t = time_pair_batch();
      if (::write(answer[1], &t, sizeof t) != static_cast<ssize_t>(sizeof t)) break;
    }
    ::_exit(0);
  }
  ::close(ask[0]);
  ::close(answer[1]);
  for (auto _ : state) {
    const char c = 1;
    double t = 0;
    if (::write(ask[1], &c, 1) != 1 || ::read(answer[0], &t, sizeof t) != sizeof t) {
      state.SkipWithError("the worker did not answer (not a worker?)");
      break;
    }
    state.SetIterationTime(t);
  }
  ::close(ask[1]);
  ::close(answer[0]);
  ::waitpid(pid, nullptr, 0);
}
BENCHMARK(BM_StopwatchPair_WorkerBatch)->Iterations(2000)->UseManualTime();

// end_meas of an interval another thread started (docs/stopwatch.md: a start in one callback, the
// end in another, as the seed allowed). Only the end is timed (manual time): a helper thread starts
// each interval and waits until this thread has ended it. The baseline is the same-thread pair
// above.
void BM_StopwatchEnd_OtherThread(benchmark::State& state) {
  enable_stopwatch();
  std::atomic<int> turn{0};  // 0: helper starts one; 1: started, this thread ends it; 2: stop
  std::thread helper([&] {
    for (;;) {
      int t;
      while ((t = turn.load(std::memory_order_acquire)) == 1) {
      }
      if (t == 2) return;
      Stopwatch::instance().start_meas("ended elsewhere");
      turn.store(1, std::memory_order_release);
    }
  });
  for (auto _ : state) {
    while (turn.load(std::memory_order_acquire) != 1) {
    }
    const auto a = std::chrono::steady_clock::now();
    Stopwatch::instance().end_meas("ended elsewhere");
    const auto b = std::chrono::steady_clock::now();
    turn.store(0, std::memory_order_release);
    state.SetIterationTime(std::chrono::duration<double>(b - a).count());
  }
  while (turn.load(std::memory_order_acquire) != 1) {
  }
  Stopwatch::instance().end_meas("ended elsewhere");
  turn.store(2, std::memory_order_release);
  helper.join();
}
BENCHMARK(BM_StopwatchEnd_OtherThread)->UseManualTime();

// The RAII form: LAPTIME_MEAS times the rest of its scope.
void BM_ScopedMeasurement_Enabled(benchmark::State& state) {
  if (state.thread_index() == 0) enable_stopwatch();
  for (auto _ : state) {
    LAPTIME_MEAS("scoped");
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_ScopedMeasurement_Enabled);

// The pair compiled into a shared object as a Python extension is (bench_plugin.cpp), next to the
// clock pair in the same object: both through the same indirect call.
struct Plugin {
  void (*stopwatch_pair)(const char*, std::size_t) = nullptr;
  long long (*clock_pair)() = nullptr;
};

// nullptr when `path` is null (not built) or cannot be loaded.
Plugin* load_plugin(const char* path) {
  void* lib = path != nullptr ? ::dlopen(path, RTLD_NOW | RTLD_LOCAL) : nullptr;
  if (lib == nullptr) return nullptr;
  auto* p = new Plugin;  // lives as long as the process, as the library does
  p->stopwatch_pair = reinterpret_cast<void (*)(const char*, std::size_t)>(
      ::dlsym(lib, "laptime_bench_stopwatch_pair"));
  p->clock_pair = reinterpret_cast<long long (*)()>(::dlsym(lib, "laptime_bench_clock_pair"));
  return p->stopwatch_pair != nullptr && p->clock_pair != nullptr ? p : nullptr;
}

#ifndef LAPTIME_BENCH_PLUGIN
#define LAPTIME_BENCH_PLUGIN nullptr
#endif
#ifndef LAPTIME_BENCH_PLUGIN_TLSDESC
#define LAPTIME_BENCH_PLUGIN_TLSDESC nullptr
#endif

// The shared object as built by default: thread_local through __tls_get_addr.
const Plugin* plugin() {
  static const Plugin* p = load_plugin(LAPTIME_BENCH_PLUGIN);
  return p;
}

// The same, built with -mtls-dialect=gnu2 (TLS descriptors; x86-64 only): a build option of the
// extension, shown here for its effect on the pair.
const Plugin* plugin_tlsdesc() {
  static const Plugin* p = load_plugin(LAPTIME_BENCH_PLUGIN_TLSDESC);
  return p;
}

void BM_SteadyClockPair_SharedObject(benchmark::State& state) {
  const Plugin* p = plugin();
  if (p == nullptr) {
    state.SkipWithError("cannot load laptime_bench_plugin");
    return;
  }
  for (auto _ : state) {
    benchmark::DoNotOptimize(p->clock_pair());
  }
}
BENCHMARK(BM_SteadyClockPair_SharedObject);

void stopwatch_pair_in(const Plugin* p, benchmark::State& state) {
  if (p == nullptr) {
    state.SkipWithError("cannot load the plugin (not built for this target?)");
    return;
  }
  if (state.thread_index() == 0) enable_stopwatch();
  constexpr std::string_view name = "shared object";
  for (auto _ : state) {
    p->stopwatch_pair(name.data(), name.size());
    benchmark::ClobberMemory();
  }
}

void BM_StopwatchPair_Enabled_SharedObject(benchmark::State& state) {
  stopwatch_pair_in(plugin(), state);
}
BENCHMARK(BM_StopwatchPair_Enabled_SharedObject);

#if defined(__x86_64__)
void BM_StopwatchPair_Enabled_SharedObject_TlsDesc(benchmark::State& state) {
  stopwatch_pair_in(plugin_tlsdesc(), state);
}
BENCHMARK(BM_StopwatchPair_Enabled_SharedObject_TlsDesc);
#endif

// ---- The histogram's insert (docs/performance.md) ----------------------------------------------

// The percentile histogram's insert (detail::Histogram::add, on every end_meas), values spread
// over 1 µs .. 16 ms; next to it the layout it replaced (a dense array of 2752 64-bit counts,
// 22 KiB), inserting the same values.
constexpr std::size_t kHistValues = 4096;
std::array<std::uint64_t, kHistValues> histogram_values() {
  std::array<std::uint64_t, kHistValues> v{};
  std::uint64_t x = 88172645463325252ull;
  for (auto& e : v) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    e = (std::uint64_t{1000} << (x % 14)) + (x >> 40) % 1000;  // 1 µs .. 16 ms, 14 octaves
  }
  return v;
}

void BM_HistogramAdd(benchmark::State& state) {
  static const auto values = histogram_values();
  laptime::detail::Histogram h;
  std::size_t i = 0;
  for (auto _ : state) {
    h.add(values[i]);
    i = (i + 1) % kHistValues;
  }
  benchmark::DoNotOptimize(h.total_count());
}
BENCHMARK(BM_HistogramAdd);

void BM_HistogramAdd_Dense(benchmark::State& state) {
  using H = laptime::detail::Histogram;
  static const auto values = histogram_values();
  auto counts = std::make_unique<std::array<std::atomic<std::uint64_t>, H::kBuckets>>();
  for (auto& c : *counts) c.store(0);
  std::size_t i = 0;
  for (auto _ : state) {
    laptime::detail::single_writer_add<std::uint64_t>((*counts)[H::bucket_of(values[i])], 1);
    i = (i + 1) % kHistValues;
  }
  benchmark::DoNotOptimize((*counts)[0].load());
}
BENCHMARK(BM_HistogramAdd_Dense);

}  // namespace

int main(int argc, char** argv) {
  const char* injection = std::getenv("NVTX_INJECTION64_PATH");
  benchmark::AddCustomContext("nvtx_tool", injection != nullptr ? injection : "none");
  benchmark::AddCustomContext("laptime_nvtx_headers", LAPTIME_HAVE_NVTX ? "yes" : "no");
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
