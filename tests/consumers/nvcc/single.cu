// A one-file CUDA program built the header-only way with plain nvcc, as a trainer's Makefile does:
//
//   nvcc -std=c++17 -O2 -Xcompiler -Wall,-Wextra,-Werror -I laptime/include single.cu -o single
//
// nvcc compiles the file twice, once for the device and once for the host; laptime's
// implementation is host code and is compiled by the host pass only. The kernel runs where a GPU
// is visible; the report is printed either way. With WITH_PART it is linked with part.cu, which
// includes laptime.hpp too (nvcc -rdc=true single.cu part.cu, as larger CUDA projects build).
#include <laptime/laptime.hpp>

#include <cstdio>

#include <cuda_runtime.h>

// nvcc's device pass compiles laptime out (config.hpp): kernels never call it.
#if defined(__CUDA_ARCH__) && LAPTIME_ENABLED
#error "laptime is compiled in nvcc's device pass"
#endif

#ifdef WITH_PART
void part_step();
#endif

__global__ void scale(float* x, float a, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}

int main() {
  int devices = 0;
  const bool gpu = cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
  float* x = nullptr;
  const int n = 1 << 16;
  if (gpu && cudaMalloc(&x, n * sizeof(float)) != cudaSuccess) x = nullptr;

  auto& sw = laptime::Stopwatch::instance();
  sw.enable(1, std::nullopt, /*do_cuda_sync=*/gpu);
  for (int i = 0; i < 4; ++i) {
    {
      LAPTIME_MEAS("step");
      if (x != nullptr) scale<<<(n + 255) / 256, 256>>>(x, 0.5f, n);
    }
#ifdef WITH_PART
    part_step();
#endif
    sw.finish_iter();
  }
  if (x != nullptr) cudaFree(x);
  std::printf("nvcc single include: gpu=%d\n", gpu ? 1 : 0);
  sw.print_eval_times();
  return 0;
}

// Each laptime macro above took one __COUNTER__ value in both passes (laptime compiled in by the
// host pass, out by the device pass), so both number what follows alike: a kernel or a doctest
// case named with __COUNTER__ here is the same function in the host's launch and in the device
// code. Before, the device pass took none, and a kernel launch found no kernel.
static_assert(__COUNTER__ == 1, "nvcc's two passes disagree on __COUNTER__ after laptime's macros");
