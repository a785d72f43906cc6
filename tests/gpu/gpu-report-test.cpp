// What a report says about GPU time (docs/stopwatch.md), on a GPU: results() and to_json() wait for
// the intervals already ended, so they hold every one of them; the periodic report (finish_iter)
// never waits and counts, per name, the intervals still pending; names not selected for GPU
// timing (enable_gpu_timing_for) carry no GPU figure.
#include <cstdio>
#include <optional>
#include <string>

#include "gpu_kernels.hpp"
#include "laptime/cuda.hpp"
#include "laptime/impl/stopwatch_state.hpp"  // the internals this test looks at
#include "laptime/stopwatch.hpp"

#if LAPTIME_ENABLED
namespace {

constexpr double kForwardMs = 2.0;
constexpr double kBackwardMs = 1.0;
constexpr int kIters = 30;

const laptime::MeasurementResult* find(const laptime::Results& r, const char* name) {
  for (const auto& m : r.measurements) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

}  // namespace
#endif

int main() {
#if !LAPTIME_ENABLED
  std::printf("SKIP gpu-report-test: laptime is compiled out (LAPTIME_DISABLE)\n");
  return kSkip;
#else
  if (const int rc = skip_without_gpu("gpu-report-test")) return rc;
  GPU_CHECK(cudaSetDevice(0));
  GPU_CHECK(cudaFree(nullptr));
  cudaStream_t stream = nullptr;  // the trainer's own stream, as llm.c and PyTorch use
  GPU_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  sw.set_gpu_stream(stream);
  sw.enable_gpu_timing_for("forward");
  sw.enable_gpu_timing_for("backward");
  for (int i = 0; i < kIters; ++i) {  // the GPU falls behind: 3 ms of kernels per iteration
    sw.start_meas("data fetch");
    sw.end_meas("data fetch");
    sw.start_meas("forward");
    GPU_CHECK(launch_spin(kForwardMs, stream));
    sw.end_meas("forward");
    sw.start_meas("backward");
    GPU_CHECK(launch_spin(kBackwardMs, stream));
    sw.end_meas("backward");
    sw.finish_iter();
  }
  // What the periodic report sees: no wait, pending counted per name.
  const laptime::Results live = laptime::detail::stopwatch_state().results(false);
  const auto* lf = find(live, "forward");
  const auto* lb = find(live, "backward");
  const std::size_t timer_pending = laptime::cuda::GpuEventTimer::instance().stats().pending;
  bool ok = lf != nullptr && lb != nullptr && lf->gpu && lb->gpu;
  const unsigned long long pf = ok ? lf->gpu->pending : 0, pb = ok ? lb->gpu->pending : 0;
  ok = ok && pf > 0 && pb > 0 && pf + pb == timer_pending && pf + lf->gpu->count == kIters &&
       pb + lb->gpu->count == kIters;
  // A report: waits for the GPU, so every interval ended so far is in it.
  const laptime::Results r = sw.results();
  const auto* f = find(r, "forward");
  const auto* b = find(r, "backward");
  const auto* d = find(r, "data fetch");
  const bool drained = f != nullptr && b != nullptr && d != nullptr && f->gpu && b->gpu &&
                       f->gpu->count == kIters && b->gpu->count == kIters && f->gpu->pending == 0 &&
                       b->gpu->pending == 0 && !d->gpu;
  const double fwd_ms = drained ? f->gpu->median_ns / 1e6 : 0;
  const double bwd_ms = drained ? b->gpu->median_ns / 1e6 : 0;
  const bool accurate = drained && fwd_ms > 0.95 * kForwardMs && fwd_ms < 1.05 * kForwardMs &&
                        bwd_ms > 0.95 * kBackwardMs && bwd_ms < 1.05 * kBackwardMs;
  const std::string json = sw.to_json();
  const bool json_ok = json.find("\"pending\": 0") != std::string::npos;
  ok = ok && drained && accurate && json_ok;
  std::printf(
      "RESULT gpu-report-test pending_forward=%llu pending_backward=%llu timer_pending=%zu "
      "report_forward_count=%llu report_backward_count=%llu forward_ms=%.4f backward_ms=%.4f "
      "data_fetch_gpu=%s %s\n",
      pf, pb, timer_pending, drained ? static_cast<unsigned long long>(f->gpu->count) : 0ull,
      drained ? static_cast<unsigned long long>(b->gpu->count) : 0ull, fwd_ms, bwd_ms,
      d != nullptr && d->gpu ? "yes" : "no", ok ? "PASS" : "FAIL");
  GPU_CHECK(cudaStreamSynchronize(stream));
  GPU_CHECK(cudaStreamDestroy(stream));
  return ok ? 0 : 1;
#endif
}
