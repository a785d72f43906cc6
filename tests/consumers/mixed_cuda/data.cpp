// The loader's file, compiled where no cuda.h is visible (main.cpp says why).
#include <laptime/laptime.hpp>

#include <string>

void load_batch() {
  LAPTIME_MEAS("data fetch");
}
std::string data_cuda_status() {
  return laptime::cuda::status();
}
bool data_driver_available() {
  return laptime::cuda::driver_available();
}
