// What a user's project compiles: laptime through its CMake package.
#include <laptime/laptime.hpp>

#include <iostream>

int main() {
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(1, std::nullopt, false);
  for (int i = 0; i < 3; ++i) {
    LAPTIME_MEAS("consumer step");
    LAPTIME_RANGE("consumer range");
  }
  for (int i = 0; i < 3; ++i) {
    sw.start_meas("consumer loop");
    sw.end_meas("consumer loop");
    sw.finish_iter();
  }
  const auto r = sw.results();
  if (r.iterations_measured != 2) return 1;
  std::cout << sw.to_json() << "\n";
  return 0;
}
