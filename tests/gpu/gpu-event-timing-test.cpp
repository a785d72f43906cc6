// GPU event timing on a GPU: the Stopwatch reports a kernel's GPU time within 5 % while the host
// loop runs on without stalling (loop time within 10 % of the same loop without GPU timing), and
// an interval that runs while GPU timing is switched off stops its events at its end.
//
// Each iteration launches a 2 ms kernel and does 1 ms of host work, so the GPU falls behind the
// host: a loop that waited for the GPU anywhere (a sync, a blocking event query) would take about
// 2 ms per iteration instead of 1 ms. The third phase shows that stall on purpose (do_cuda_sync).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include "gpu_kernels.hpp"
#include "laptime/cuda.hpp"
#include "laptime/results.hpp"
#include "laptime/stopwatch.hpp"

namespace {

constexpr double kKernelMs = 2.0;
constexpr double kHostMs = 1.0;
constexpr int kWarmup = 5;
constexpr int kIters = 100;

struct Loop {
  double wall_ms = 0;        // whole loop, host clock
  double max_finish_ms = 0;  // slowest finish_iter (where GPU results are polled)
  std::size_t pending_at_end = 0;
};

Loop run_loop(cudaStream_t stream) {
  auto& sw = laptime::Stopwatch::instance();
  Loop l;
  const double t0 = now_ms();
  for (int i = 0; i < kWarmup + kIters; ++i) {
    sw.start_meas("step");
    GPU_CHECK(launch_spin(kKernelMs, stream));
    host_spin(kHostMs);
    sw.end_meas("step");
    const double f0 = now_ms();
    sw.finish_iter();
    l.max_finish_ms = std::max(l.max_finish_ms, now_ms() - f0);
  }
  l.wall_ms = now_ms() - t0;
  l.pending_at_end = laptime::cuda::GpuEventTimer::instance().stats().pending;
  return l;
}

const laptime::MeasurementResult* find(const laptime::Results& r, const char* name) {
  for (const auto& m : r.measurements) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

}  // namespace

int main() {
  if (const int rc = skip_without_gpu("gpu-event-timing-test")) return rc;
  GPU_CHECK(cudaSetDevice(0));
  GPU_CHECK(cudaFree(nullptr));
  cudaStream_t stream = nullptr;  // a framework's stream (PyTorch's current stream, say)
  GPU_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(kWarmup, std::nullopt, /*do_cuda_sync=*/false);

  // Phase 1: host timing only.
  (void)run_loop(stream);  // warms up the GPU clocks and the code paths
  GPU_CHECK(cudaStreamSynchronize(stream));
  sw.reset();
  const Loop plain = run_loop(stream);
  GPU_CHECK(cudaStreamSynchronize(stream));

  // Phase 2: the same loop with GPU event timing on the framework's stream.
  sw.reset();
  sw.enable_gpu_timing(stream);
  const Loop timed = run_loop(stream);
  sw.wait_for_gpu_timings();  // report time: blocking is fine here
  const laptime::Results r = sw.results();
  const laptime::MeasurementResult* step = find(r, "step");
  const laptime::cuda::GpuEventTimer::Stats ts = laptime::cuda::GpuEventTimer::instance().stats();
  GPU_CHECK(cudaStreamSynchronize(stream));

  // GPU timing switched off while an interval runs: its end still stops its events.
  sw.start_meas("switched off");
  GPU_CHECK(launch_spin(0.1, stream));
  sw.disable_gpu_timing();
  sw.end_meas("switched off");
  const std::size_t in_flight = laptime::cuda::GpuEventTimer::instance().stats().in_flight;

  // Phase 3, for contrast: do_cuda_sync makes the host wait for the GPU in every interval.
  sw.disable();
  sw.enable(kWarmup, std::nullopt, /*do_cuda_sync=*/true);
  sw.reset();
  const Loop synced = run_loop(stream);
  GPU_CHECK(cudaStreamSynchronize(stream));

  bool ok = step != nullptr && step->gpu.has_value();
  double gpu_median = 0, gpu_min = 0, gpu_max = 0, host_mean = 0;
  unsigned long long gpu_count = 0;
  if (ok) {
    gpu_median = step->gpu->median_ns / 1e6;
    gpu_min = step->gpu->min_ns / 1e6;
    gpu_max = step->gpu->max_ns / 1e6;
    gpu_count = step->gpu->count;
    host_mean = step->mean_per_interval_ns / 1e6;
  }
  const double ratio = timed.wall_ms / plain.wall_ms;
  const bool accurate = std::fabs(gpu_median - kKernelMs) <= 0.05 * kKernelMs &&
                        std::fabs(gpu_min - kKernelMs) <= 0.05 * kKernelMs &&
                        std::fabs(gpu_max - kKernelMs) <= 0.05 * kKernelMs;
  const bool no_stall = ratio <= 1.10 && timed.pending_at_end > 0;
  ok =
      ok && gpu_count == kIters && accurate && no_stall && ts.grown_in_start <= 1 && in_flight == 0;
  std::printf(
      "RESULT gpu-event-timing-test kernel_ms=%.1f gpu_median_ms=%.4f gpu_min_ms=%.4f "
      "gpu_max_ms=%.4f gpu_count=%llu host_mean_ms=%.4f\n",
      kKernelMs, gpu_median, gpu_min, gpu_max, gpu_count, host_mean);
  std::printf(
      "RESULT gpu-event-timing-test loop_plain_ms=%.2f loop_gpu_timing_ms=%.2f ratio=%.4f "
      "loop_do_cuda_sync_ms=%.2f pending_at_loop_end=%zu max_finish_iter_ms=%.4f "
      "events_created=%zu grown_in_start=%zu in_flight_after_switch_off=%zu %s\n",
      plain.wall_ms, timed.wall_ms, ratio, synced.wall_ms, timed.pending_at_end,
      timed.max_finish_ms, ts.events_created, ts.grown_in_start, in_flight, ok ? "PASS" : "FAIL");
  GPU_CHECK(cudaStreamDestroy(stream));
  return ok ? 0 : 1;
}
