// The bottleneck verdict on a GPU (docs/stopwatch.md, "Bottleneck verdict"): three real loops with
// GPU event timing on "forward" (the kernel launches only), each iteration ending with a stream
// sync as a trainer's loss.item() does. GPU-bound: 3 ms of kernels, a 0.2 ms fetch.
// Compute-bound: 3 ms of host work ("host work", not GPU-timed) and a 0.3 ms kernel. Data-bound:
// a 3 ms fetch and a 0.5 ms kernel.
#include <cstdio>
#include <optional>
#include <string>

#include "gpu_kernels.hpp"
#include "laptime/laptime.hpp"

#if LAPTIME_ENABLED
namespace {

struct Case {
  const char* expected;
  double data_ms, host_step_ms, kernel_ms;
};

// Runs one loop and prints its verdict; true when its kind is the expected one.
bool run(const Case& c, cudaStream_t stream) {
  laptime::detail::testing_reset_stopwatch();
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(3, std::nullopt, false);
  sw.set_gpu_stream(stream);
  sw.enable_gpu_timing_for("forward");
  for (int i = 0; i < 33; ++i) {
    sw.start_meas("data fetch");
    host_spin(c.data_ms);
    sw.end_meas("data fetch");
    sw.start_meas("host work");
    host_spin(c.host_step_ms);
    sw.end_meas("host work");
    sw.start_meas("forward");
    GPU_CHECK(launch_spin(c.kernel_ms, stream));
    sw.end_meas("forward");
    sw.start_meas("loss.item");
    GPU_CHECK(cudaStreamSynchronize(stream));
    sw.end_meas("loss.item");
    sw.finish_iter();
  }
  const laptime::Results r = sw.results();
  const bool ok = r.verdict && r.verdict->kind == c.expected;
  std::printf(
      "RESULT gpu-verdict-test expected=%s kind=%s data_share=%.3f gpu_share=%.3f %s\n  %s\n",
      c.expected, r.verdict ? r.verdict->kind.c_str() : "(none)",
      r.verdict && r.verdict->data_share ? *r.verdict->data_share : -1.0,
      r.verdict && r.verdict->gpu_share ? *r.verdict->gpu_share : -1.0, ok ? "PASS" : "FAIL",
      r.verdict ? r.verdict->text.c_str() : "");
  return ok;
}

}  // namespace
#endif

int main() {
#if !LAPTIME_ENABLED
  std::printf("SKIP gpu-verdict-test: laptime is compiled out (LAPTIME_DISABLE)\n");
  return kSkip;
#else
  if (const int rc = skip_without_gpu("gpu-verdict-test")) return rc;
  GPU_CHECK(cudaSetDevice(0));
  GPU_CHECK(cudaFree(nullptr));
  cudaStream_t stream = nullptr;
  GPU_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  bool ok = run({"gpu-bound", 0.2, 0.0, 3.0}, stream);
  ok = run({"compute-bound", 0.2, 3.0, 0.3}, stream) && ok;
  ok = run({"data-bound", 3.0, 0.0, 0.5}, stream) && ok;
  GPU_CHECK(cudaStreamDestroy(stream));
  return ok ? 0 : 1;
#endif
}
