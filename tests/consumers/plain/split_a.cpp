// Two copies of laptime in one program whose Stopwatch states differ in layout (here
// LAPTIME_MAX_NAMES; in the field a plugin built with another libstdc++ ABI): each keeps its own
// state, and the process is told so once on stderr. This file is the copy with another layout.
#define LAPTIME_MAX_NAMES 64
#include <laptime/laptime.hpp>

void measure_in_the_other_copy() {
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  sw.start_meas("a");
  sw.end_meas("a");
}
