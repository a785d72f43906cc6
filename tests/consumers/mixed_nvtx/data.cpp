// Compiled without the NVTX headers (LAPTIME_HAVE_NVTX=0): see main.cpp.
#include <laptime/laptime.hpp>

void load_batch() {
  LAPTIME_RANGE("load batch");
}
