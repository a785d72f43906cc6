// Built normally.
#include <typeinfo>

#include "laptime/laptime.hpp"
#include "parts.hpp"

namespace instrumented {
void run_loop(int iterations) {
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  for (int i = 0; i < iterations; ++i) {
    LAPTIME_MEAS("instrumented step");
    LAPTIME_RANGE("instrumented range");
  }
  sw.finish_iter();
}
std::string json() {
  return laptime::Stopwatch::instance().to_json();
}
const char* stopwatch_type() {
  return typeid(laptime::Stopwatch).name();
}
}  // namespace instrumented
