// do_cuda_sync on a GPU: a kernel of known length launched inside a measured interval is part of
// the interval's host time with do_cuda_sync, and is not without it (the launch returns at once).
//
//   gpu-sync-test sync     host time per interval >= the kernel's length
//   gpu-sync-test nosync   host time per interval < 10 % of it
#include <cstdio>
#include <cstring>
#include <optional>

#include "gpu_kernels.hpp"
#include "laptime/cuda.hpp"
#include "laptime/results.hpp"
#include "laptime/stopwatch.hpp"

int main(int argc, char** argv) {
  const bool sync = argc > 1 && std::strcmp(argv[1], "sync") == 0;
  if (const int rc = skip_without_gpu("gpu-sync-test")) return rc;
  // The framework makes its device current (the runtime's primary context); laptime syncs that.
  GPU_CHECK(cudaSetDevice(0));
  GPU_CHECK(cudaFree(nullptr));

  constexpr double kKernelMs = 20.0;
  constexpr int kWarmup = 2;
  constexpr int kIters = 10;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(kWarmup, std::nullopt, /*do_cuda_sync=*/sync);
  for (int i = 0; i < kWarmup + kIters; ++i) {
    sw.start_meas("kernel");
    GPU_CHECK(launch_spin(kKernelMs, nullptr));
    sw.end_meas("kernel");
    sw.finish_iter();
  }
  GPU_CHECK(cudaDeviceSynchronize());

  double mean_ms = -1;
  long long count = 0;
  for (const auto& m : sw.results().measurements) {
    if (m.name == "kernel") {
      mean_ms = m.mean_per_interval_ns / 1e6;
      count = static_cast<long long>(m.count);
    }
  }
  const bool ok =
      count == kIters && (sync ? mean_ms >= kKernelMs * 0.99 && mean_ms < kKernelMs * 1.5
                               : mean_ms >= 0 && mean_ms < kKernelMs * 0.1);
  std::printf("RESULT gpu-sync-test mode=%s kernel_ms=%.1f host_mean_ms=%.3f intervals=%lld %s\n",
              sync ? "sync" : "nosync", kKernelMs, mean_ms, count, ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
