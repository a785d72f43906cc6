// The trainer's file that sees the CUDA toolkit (as a .cu file under nvcc does); data.cpp, linked
// with it, does not (a .cpp file under g++ on a machine where CUDA lives in /usr/local/cuda only).
// Both include <laptime/laptime.hpp>: they must share one CUDA layer whatever the link order.
#include <laptime/laptime.hpp>

#include <cstdio>
#include <string>

void load_batch();
std::string data_cuda_status();
bool data_driver_available();

int main() {
  const std::string here = laptime::cuda::status();
  const std::string there = data_cuda_status();
  const bool same = here == there && laptime::cuda::driver_available() == data_driver_available();
  std::printf("status: %s\nsame in both files: %s\n", here.c_str(), same ? "yes" : "no");
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  sw.enable_gpu_timing();
  for (int i = 0; i < 3; ++i) {
    load_batch();
    sw.finish_iter();
  }
  std::printf("%s\n", sw.to_json().c_str());
  return same ? 0 : 1;
}
