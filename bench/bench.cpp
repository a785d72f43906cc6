// laptime_bench: the cost of every hot path next to its raw baseline, measured in the same run
// (the cost contract: docs/performance.md). bench/run.sh runs it and prints the table;
// bench/README.md explains the figures.
//
// The Stopwatch and the NVTX wrapper are process-wide singletons, so every benchmark puts them in
// the state it measures before its loop (thread 0 does it; Google Benchmark starts the timed loop
// of all threads together, after that). The compiled-out (LAPTIME_DISABLE) variants live in
// bench_disabled.cpp, compiled with that definition into this same binary.
#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
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

// Measuring on, no warm-up, no periodic report, no CUDA sync: the plain enabled path.
void enable_stopwatch() {
  laptime::detail::testing_reset_stopwatch();
  Stopwatch::instance().enable(/*num_warmup_iters=*/0, /*print_every_n_iters=*/std::nullopt,
                               /*do_cuda_sync=*/false);
}

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

// The calling thread's CPU time: on a loaded machine wall time also counts the time the thread
// waited for a core, differently in the two processes.
double thread_cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double time_pair_batch() {
  const double t0 = thread_cpu_seconds();
  for (int i = 0; i < kPairBatch; ++i) {
    Stopwatch::instance().start_meas("worker pair");
    Stopwatch::instance().end_meas("worker pair");
    benchmark::ClobberMemory();
  }
  return (thread_cpu_seconds() - t0) / kPairBatch;
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

// ---- /proc sampling ---------------------------------------------------------------------------

void BM_CpuSample_Self(benchmark::State& state) {
  for (auto _ : state) {
    laptime::resources::Sample s = laptime::resources::sample();
    benchmark::DoNotOptimize(s);
  }
}
BENCHMARK(BM_CpuSample_Self);

// The sampler walks the process tree: 8 children (a DataLoader's workers), blocked on a pipe.
void BM_CpuSample_Tree8(benchmark::State& state) {
  int fds[2];
  if (::pipe(fds) != 0) {
    state.SkipWithError("pipe() failed");
    return;
  }
  std::vector<pid_t> children;
  for (int i = 0; i < 8; ++i) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(fds[1]);
      char c;
      while (::read(fds[0], &c, 1) < 0) {
      }
      ::_exit(0);
    }
    if (pid > 0) children.push_back(pid);
  }
  ::close(fds[0]);
  if (children.size() != 8) state.SkipWithError("fork() failed");
  for (auto _ : state) {
    laptime::resources::Sample s = laptime::resources::sample();
    benchmark::DoNotOptimize(s);
  }
  state.counters["processes"] = static_cast<double>(laptime::resources::sample().processes);
  for (const pid_t pid : children) ::kill(pid, SIGKILL);
  for (const pid_t pid : children) ::waitpid(pid, nullptr, 0);
  ::close(fds[1]);
}
BENCHMARK(BM_CpuSample_Tree8);

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

// ---- The histogram's insert and memory per (thread, name) (docs/performance.md) --------------

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

// Resident memory per (thread, name): 64 threads each time 256 names (a few intervals each), and
// the growth of RSS (/proc/self/statm) and of malloc'd bytes between each thread's first name and
// its 256th is divided by 64 x 255 (the threads stay alive in between). Counters:
// rss_bytes_per_pair (goal: <= 2048, 2 KiB per (thread, name)), malloc_bytes_per_pair.
long statm_rss_bytes() {
  long size = 0, rss = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &size, &rss) != 2) rss = 0;
    std::fclose(f);
  }
  return rss * ::sysconf(_SC_PAGESIZE);
}

void BM_MemoryPerThreadName(benchmark::State& state) {
  constexpr int kThreads = 64, kNames = 256;
  // New names each run (repetitions): names are never forgotten, and a name's slots and
  // histograms, once allocated, are reused by later runs.
  static int run = 0;
  std::vector<std::string> names;
  for (int n = 0; n < kNames; ++n) {
    names.push_back("memory " + std::to_string(run) + " name " + std::to_string(n));
  }
  ++run;
  for (auto _ : state) {
    enable_stopwatch();
    std::atomic<int> arrived{0}, phase{0};
    auto wait_phase = [&](int p) {
      arrived.fetch_add(1);
      while (phase.load() < p) std::this_thread::sleep_for(std::chrono::microseconds(200));
    };
    auto time_names = [&](int from, int to) {
      for (int n = from; n < to; ++n) {
        for (int k = 0; k < 4; ++k) {
          Stopwatch::instance().start_meas(names[static_cast<std::size_t>(n)]);
          Stopwatch::instance().end_meas(names[static_cast<std::size_t>(n)]);
        }
      }
    };
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&] {
        time_names(0, 1);
        wait_phase(1);
        time_names(1, kNames);
        wait_phase(2);
      });
    }
    while (arrived.load() < kThreads) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const long rss0 = statm_rss_bytes();
    const std::size_t heap0 = ::mallinfo2().uordblks;
    phase.store(1);
    while (arrived.load() < 2 * kThreads) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const long rss1 = statm_rss_bytes();
    const std::size_t heap1 = ::mallinfo2().uordblks;
    phase.store(2);
    for (auto& t : threads) t.join();
    const double pairs = double{kThreads} * (kNames - 1);
    state.counters["rss_bytes_per_pair"] = static_cast<double>(rss1 - rss0) / pairs;
    state.counters["malloc_bytes_per_pair"] = static_cast<double>(heap1 - heap0) / pairs;
  }
  laptime::detail::testing_reset_stopwatch();
}
BENCHMARK(BM_MemoryPerThreadName)->Iterations(1)->UseRealTime();
// The raw reads a no-child sample() needs, for its ratio: /proc/stat (the machine's CPU) and
// /proc/self/io, each a pread at offset 0 of a descriptor kept open, as the sampler does. (Its
// CPU clocks come from clock_gettime and getrusage, not from files.)
void BM_ProcFilesRaw(benchmark::State& state) {
  const int stat = ::open("/proc/stat", O_RDONLY | O_CLOEXEC);
  const int io = ::open("/proc/self/io", O_RDONLY | O_CLOEXEC);
  if (stat < 0 || io < 0) state.SkipWithError("cannot open /proc/stat or /proc/self/io");
  char buf[4096];
  for (auto _ : state) {
    benchmark::DoNotOptimize(::pread(stat, buf, sizeof buf, 0));
    benchmark::DoNotOptimize(::pread(io, buf, sizeof buf, 0));
    benchmark::ClobberMemory();
  }
  if (stat >= 0) ::close(stat);
  if (io >= 0) ::close(io);
}
BENCHMARK(BM_ProcFilesRaw);

// The same files the way the sampler read them before (open, read, close each time), for scale.
void BM_ProcFilesOpenRead(benchmark::State& state) {
  char buf[4096];
  for (auto _ : state) {
    for (const char* path : {"/proc/stat", "/proc/self/io"}) {
      const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
      benchmark::DoNotOptimize(::read(fd, buf, sizeof buf));
      ::close(fd);
    }
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_ProcFilesOpenRead);

double process_cpu_s() {
  timespec t{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}
double thread_cpu_s() {
  timespec t{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// A Stopwatch pair of a CPU-tracked name (track_cpu_usage: a resources::sample() at each end)
// with state.range(0) live child processes that spin (DataLoader workers at work; at nice 19, so
// that on a small machine the benchmark thread still gets a core). The counter sampler_us is the
// CPU the children sampler thread used per pair (the process's CPU beyond this thread's):
// cpu_time, like every row, is this thread's.
void BM_CpuTrackedPair(benchmark::State& state) {
  std::vector<pid_t> children;
  for (int i = 0; i < state.range(0); ++i) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      if (::nice(19) == -1) {  // best effort: the children only need to be busy
      }
      ::alarm(600);  // never outlives a crashed benchmark
      volatile std::uint64_t sink = 0;
      for (;;) sink = sink + 1;
    }
    if (pid > 0) children.push_back(pid);
  }
  if (children.size() != static_cast<std::size_t>(state.range(0))) {
    state.SkipWithError("fork() failed");
  }
  enable_stopwatch();
  Stopwatch::instance().track_cpu_usage("tracked");
  for (int i = 0; i < 50; ++i) {  // the children sampler starts and takes its first readings
    Stopwatch::instance().start_meas("tracked");
    Stopwatch::instance().end_meas("tracked");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const double process0 = process_cpu_s(), thread0 = thread_cpu_s();
  for (auto _ : state) {
    Stopwatch::instance().start_meas("tracked");
    Stopwatch::instance().end_meas("tracked");
    benchmark::ClobberMemory();
  }
  const double others = (process_cpu_s() - process0) - (thread_cpu_s() - thread0);
  state.counters["sampler_us"] = others * 1e6 / static_cast<double>(state.iterations());
  state.counters["processes"] = static_cast<double>(laptime::resources::sample().processes);
  for (const pid_t pid : children) ::kill(pid, SIGKILL);
  for (const pid_t pid : children) ::waitpid(pid, nullptr, 0);
  laptime::detail::testing_reset_stopwatch();
}
BENCHMARK(BM_CpuTrackedPair)->ArgName("children")->Arg(0)->Arg(16);

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
