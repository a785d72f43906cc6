// The hot loop: five names, as a trainer times them; only the light header.
#include <laptime/stopwatch.hpp>

void train(int iterations) {
  auto& sw = laptime::Stopwatch::instance();
  for (int i = 0; i < iterations; ++i) {
    sw.start_meas("step");
    { LAPTIME_MEAS("data fetch"); }
    { LAPTIME_MEAS("forward"); }
    { LAPTIME_MEAS("backward"); }
    sw.start_meas("optimizer update");
    sw.end_meas("optimizer update");
    sw.end_meas("step");
    sw.finish_iter();
  }
}

// A usage error caught by its type: the light headers declare what they throw.
bool end_without_start() {
  try {
    laptime::Stopwatch::instance().end_meas("never started");
  } catch (const laptime::UsageError&) {
    return true;
  }
  return false;
}
