// A program whose files disagree on the NVTX headers (docs/build.md): main.cpp and ranges.cpp see
// nvtx3/, data.cpp is compiled with LAPTIME_HAVE_NVTX=0 (a .cpp file under g++ where the toolkit
// lives in /usr/local/cuda only). All include <laptime/laptime.hpp>, and so compile laptime's
// implementation: the linker keeps one copy of each function, and enable() must say so.
#include <laptime/laptime.hpp>

void load_batch();  // data.cpp, or ranges.cpp

int main() {
  auto& nvtx = laptime::NVTXRangeWrapper::instance();
  nvtx.enable(false, false, true);
  for (int i = 0; i < 3; ++i) {
    LAPTIME_RANGE("step");
    load_batch();
  }
  return 0;
}
