// Built with LAPTIME_DISABLE (see CMakeLists.txt).
#include <typeinfo>

#include "laptime/laptime.hpp"
#include "parts.hpp"

namespace compiled_out {
void run_loop(int iterations) {
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  for (int i = 0; i < iterations; ++i) {
    LAPTIME_MEAS("compiled_out step");
    LAPTIME_RANGE("compiled_out range");
  }
  sw.finish_iter();
}
std::string json() {
  return laptime::Stopwatch::instance().to_json();
}
const char* stopwatch_type() {
  return typeid(laptime::Stopwatch).name();
}
}  // namespace compiled_out
