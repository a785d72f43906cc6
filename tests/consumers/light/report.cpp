// A file that includes everything (<laptime/laptime.hpp>, the implementation with it), linked
// into the same program as laptime/src/laptime.cpp.
#include <laptime/laptime.hpp>

#include <string>

std::string summary() {
  const laptime::Results r = laptime::Stopwatch::instance().results();
  return std::to_string(r.measurements.size()) + " names";
}
