// A program whose files disagree on the NVTX headers (docs/build.md): main.cpp and ranges.cpp see
// nvtx3/, data.cpp is compiled with LAPTIME_HAVE_NVTX=0 (a .cpp file under g++ where the toolkit
// lives in /usr/local/cuda only). All include <laptime/laptime.hpp>, and so compile laptime's
// implementation: the linker keeps one copy of each function, whichever file it came from. Every
// range and counter must reach the profiler (here tests/nvtx_recorder, loaded as Nsight is) in
// either link order. Prints what the profiler received, for run.cmake to check.
#include <laptime/laptime.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "nvtx_recorder_api.hpp"

void load_batch();  // data.cpp, or ranges.cpp

namespace {
int count_lines(const char* prefix, const char* text) {
  int n = 0;
  for (const std::string& line : recorder_events()) {
    if (line.rfind(prefix, 0) == 0 && line.find(text) != std::string::npos) ++n;
  }
  return n;
}
}  // namespace

int main() {
  ::setenv("NVTX_INJECTION64_PATH", LAPTIME_NVTX_RECORDER_PATH, 1);  // before NVTX's first call
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0);
  sw.track_cpu_usage("step");
  laptime::enable_nvtx_counters();
  laptime::NVTXRangeWrapper::instance().enable(false, false, true);
  for (int i = 0; i < 3; ++i) {
    LAPTIME_RANGE("step");
    sw.start_meas("step");
    load_batch();
    sw.end_meas("step");
    sw.finish_iter();
  }
  std::printf("profiler saw: %d 'step' pushes, %d 'load batch' pushes, %s counter samples\n",
              count_lines("push", "step"), count_lines("push", "load batch"),
              count_lines("counter", "step: process tree CPU") > 0 ? "some" : "no");
  return 0;
}
