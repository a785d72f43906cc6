// What a user compiles with a bare compiler command and no build system: no definitions, no
// libraries but the system's. laptime finds the NVTX3 and CUDA headers on the include path by
// itself (the CUDA toolkit's directory, as nvcc passes it) and needs nothing else to link.
#include <laptime/laptime.hpp>

#include <cstdio>

int main() {
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(1, std::nullopt, false);
  for (int i = 0; i < 3; ++i) {
    sw.start_meas("plain loop");
    sw.end_meas("plain loop");
    sw.finish_iter();
  }
  std::printf("enabled=%d have_nvtx=%d have_cuda_headers=%d\n%s\n", LAPTIME_ENABLED,
              LAPTIME_HAVE_NVTX, LAPTIME_HAVE_CUDA_HEADERS, sw.to_json().c_str());
  return 0;
}
