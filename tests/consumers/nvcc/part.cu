// The second file of tests/consumers/nvcc/single.cu's two-file build (relocatable device code):
// it includes laptime.hpp too, so both files carry the implementation and the link keeps one.
#include <laptime/laptime.hpp>

// Device code in this file too, so that -rdc=true has two files' device code to link.
__device__ float part_scale = 2.0f;

void part_step() {
  LAPTIME_MEAS("part");
}
