// The second file of tests/consumers/nvcc/single.cu's two-file build (relocatable device code):
// it includes laptime.hpp too, so both files carry the implementation and the link keeps one.
#include <laptime/laptime.hpp>

__device__ float part_scale = 2.0f;

void part_step() {
  LAPTIME_MEAS("part");
}
