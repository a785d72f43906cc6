// data.cpp as a shared object built with hidden visibility and without the NVTX headers (a
// plugin, a Python extension): its copy of laptime shares no symbol with the program's, which sees
// nvtx3/. Its ranges reach the profiler through the calls the program's copy published in the
// process-wide state.
#include <laptime/laptime.hpp>

__attribute__((visibility("default"))) void load_batch() {
  LAPTIME_RANGE("load batch");
}
