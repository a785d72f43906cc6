// laptime_gpu_bench: the host cost of laptime's GPU features next to their raw CUDA baselines,
// measured in one run on a real GPU (docs/performance.md, goals 7a-7d). scripts/gpu-check.sh runs
// it and prints the ratios with their goals (bench/gpu/ratios.py).
//
//   BM_RawEventRecordPair        two cudaEventRecord on one stream: the baseline
//   BM_RawEventTimedPair         the same with what reading the time takes by hand: 64 pairs of
//                                events, and every 64 pairs cudaEventElapsedTime of each
//   BM_GpuTimerInterval          GpuEventTimer start + stop (+ its poll every 64 intervals, as an
//                                iteration's end would): one event-timed interval, time read
//   BM_StopwatchPair_RawEvents   a Stopwatch pair plus two cudaEventRecord written by hand
//   BM_StopwatchPair_GpuTiming   a Stopwatch pair with enable_gpu_timing(stream): the same work
//                                done by laptime (finish_iter every 64 pairs in both rows)
//   BM_StopwatchPair_TwoSyncs    a Stopwatch pair plus two cudaDeviceSynchronize by hand
//   BM_StopwatchPair_CudaSync    a Stopwatch pair with do_cuda_sync (a sync before each timestamp)
//
// Every row synchronises the stream every 64 pairs, so no row lets the GPU's queue grow.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <optional>

#include "laptime/laptime.hpp"

namespace {

constexpr int kEvery = 64;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "laptime_gpu_bench: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

struct Gpu {
  cudaStream_t stream{};
  cudaEvent_t a{}, b{};
  Gpu() {
    check(cudaSetDevice(0), "cudaSetDevice");
    check(cudaFree(nullptr), "context");  // creates the primary context, current on this thread
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    check(cudaEventCreate(&a), "cudaEventCreate");
    check(cudaEventCreate(&b), "cudaEventCreate");
  }
};

Gpu& gpu() {
  static Gpu g;
  return g;
}

void enable(bool do_cuda_sync, bool gpu_timing) {
  laptime::detail::testing_reset_stopwatch();
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(/*num_warmup_iters=*/0, /*print_every_n_iters=*/std::nullopt, do_cuda_sync);
  if (gpu_timing) sw.enable_gpu_timing(gpu().stream);
}

void BM_RawEventRecordPair(benchmark::State& state) {
  Gpu& g = gpu();
  int i = 0;
  for (auto _ : state) {
    cudaEventRecord(g.a, g.stream);
    cudaEventRecord(g.b, g.stream);
    if (++i % kEvery == 0) cudaStreamSynchronize(g.stream);
  }
  cudaStreamSynchronize(g.stream);
}
BENCHMARK(BM_RawEventRecordPair);

void BM_RawEventTimedPair(benchmark::State& state) {
  Gpu& g = gpu();
  static cudaEvent_t ev[2 * kEvery];
  static bool created = false;
  if (!created) {
    for (cudaEvent_t& e : ev) check(cudaEventCreate(&e), "cudaEventCreate");
    created = true;
  }
  double sum_ms = 0;
  int i = 0;
  for (auto _ : state) {
    const int k = i % kEvery;
    cudaEventRecord(ev[2 * k], g.stream);
    cudaEventRecord(ev[2 * k + 1], g.stream);
    if (++i % kEvery == 0) {
      cudaStreamSynchronize(g.stream);
      for (int j = 0; j < kEvery; ++j) {
        float ms = 0;
        cudaEventElapsedTime(&ms, ev[2 * j], ev[2 * j + 1]);
        sum_ms += ms;
      }
    }
  }
  cudaStreamSynchronize(g.stream);
  benchmark::DoNotOptimize(sum_ms);
}
BENCHMARK(BM_RawEventTimedPair);

void BM_GpuTimerInterval(benchmark::State& state) {
  Gpu& g = gpu();
  auto& timer = laptime::cuda::GpuEventTimer::instance();
  timer.reserve(256);
  std::uint64_t resolved = 0;
  int i = 0;
  for (auto _ : state) {
    const std::uint32_t t = timer.start(g.stream);
    timer.stop(t, g.stream, /*tag=*/1);
    if (++i % kEvery == 0) {
      cudaStreamSynchronize(g.stream);
      timer.poll([&](std::uint64_t, std::uint64_t) { ++resolved; });
    }
  }
  timer.drain([&](std::uint64_t, std::uint64_t) { ++resolved; });
  if (resolved != static_cast<std::uint64_t>(i)) state.SkipWithError("not every interval resolved");
  state.counters["events_created"] = static_cast<double>(timer.stats().events_created);
}
BENCHMARK(BM_GpuTimerInterval);

void BM_StopwatchPair_RawEvents(benchmark::State& state) {
  Gpu& g = gpu();
  enable(false, false);
  auto& sw = laptime::Stopwatch::instance();
  int i = 0;
  for (auto _ : state) {
    sw.start_meas("step");
    cudaEventRecord(g.a, g.stream);
    cudaEventRecord(g.b, g.stream);
    sw.end_meas("step");
    if (++i % kEvery == 0) {
      cudaStreamSynchronize(g.stream);
      sw.finish_iter();
    }
  }
  cudaStreamSynchronize(g.stream);
}
BENCHMARK(BM_StopwatchPair_RawEvents);

void BM_StopwatchPair_GpuTiming(benchmark::State& state) {
  Gpu& g = gpu();
  enable(false, true);
  auto& sw = laptime::Stopwatch::instance();
  int i = 0;
  for (auto _ : state) {
    sw.start_meas("step");
    sw.end_meas("step");
    if (++i % kEvery == 0) {
      cudaStreamSynchronize(g.stream);
      sw.finish_iter();
    }
  }
  cudaStreamSynchronize(g.stream);
  const laptime::Results r = sw.results();
  bool timed = false;
  for (const auto& m : r.measurements) timed |= m.name == "step" && m.gpu && m.gpu->count > 0;
  if (!timed) state.SkipWithError("no GPU intervals");
  sw.disable_gpu_timing();
}
BENCHMARK(BM_StopwatchPair_GpuTiming);

void BM_StopwatchPair_TwoSyncs(benchmark::State& state) {
  gpu();
  enable(false, false);
  auto& sw = laptime::Stopwatch::instance();
  for (auto _ : state) {
    cudaDeviceSynchronize();
    sw.start_meas("step");
    cudaDeviceSynchronize();
    sw.end_meas("step");
  }
}
BENCHMARK(BM_StopwatchPair_TwoSyncs);

void BM_StopwatchPair_CudaSync(benchmark::State& state) {
  gpu();
  enable(true, false);
  auto& sw = laptime::Stopwatch::instance();
  for (auto _ : state) {
    sw.start_meas("step");
    sw.end_meas("step");
  }
}
BENCHMARK(BM_StopwatchPair_CudaSync);

}  // namespace

int main(int argc, char** argv) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::puts("laptime_gpu_bench: no GPU, nothing measured");
    return 77;
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
