// The program's own copy of laptime (the default layout); split_a.cpp has the other one.
#include <laptime/laptime.hpp>

#include <cstdio>

void measure_in_the_other_copy();  // split_a.cpp

int main() {
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  sw.start_meas("b");
  sw.end_meas("b");
  measure_in_the_other_copy();
  std::printf("names here: %zu\n", sw.results().measurements.size());
}
