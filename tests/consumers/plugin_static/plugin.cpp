// A plugin built with hidden visibility over the static library laptime::laptime (liblaptime.a):
// it measures through the light header, the program that loads it through its own copy.
#include <laptime/stopwatch.hpp>

extern "C" __attribute__((visibility("default"))) void plugin_work() {
  auto& sw = laptime::Stopwatch::instance();
  sw.start_meas("plugin");
  sw.end_meas("plugin");
}
