// Kernels of known length for the GPU tests: one thread spins on the GPU's global nanosecond timer.
#include "gpu_kernels.hpp"

namespace {

__device__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void spin_kernel(unsigned long long ns) {
  const unsigned long long t0 = global_ns();
  while (global_ns() - t0 < ns) {
  }
}

}  // namespace

cudaError_t launch_spin(double ms, cudaStream_t stream) {
  spin_kernel<<<1, 1, 0, stream>>>(static_cast<unsigned long long>(ms * 1e6));
  return cudaGetLastError();
}
