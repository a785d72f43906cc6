// Helpers shared by the GPU tests: a kernel of known length, error checks, the skip convention.
#pragma once

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

/// Enqueues one kernel that spins for `ms` milliseconds of GPU time on `stream`.
cudaError_t launch_spin(double ms, cudaStream_t stream);

/// ctest's SKIP_RETURN_CODE: reported as skipped, not failed.
constexpr int kSkip = 77;

#define GPU_CHECK(call)                                                         \
  do {                                                                          \
    const cudaError_t e_ = (call);                                              \
    if (e_ != cudaSuccess) {                                                    \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, \
                   cudaGetErrorString(e_));                                     \
      std::exit(1);                                                             \
    }                                                                           \
  } while (0)

/// Returns kSkip with a message saying why where there is no usable GPU, else 0.
inline int skip_without_gpu(const char* test) {
#ifdef LAPTIME_DISABLE
  std::printf("SKIP %s: laptime is compiled out (LAPTIME_DISABLE)\n", test);
  return kSkip;
#endif
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    std::printf("SKIP %s: needs a CUDA GPU (cudaGetDeviceCount: %s)\n", test,
                e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return kSkip;
  }
  return 0;
}

inline double now_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// Busy host work of `ms` milliseconds (a data loader, Python overhead, ...).
inline void host_spin(double ms) {
  const double end = now_ms() + ms;
  while (now_ms() < end) {
  }
}
