// laptime's implementation part, compiled once: what the CMake target laptime::laptime builds into
// its library, and what a build without CMake adds to its sources:
//
//   g++ -std=c++17 -O2 -Ilaptime/include main.cpp loader.cpp laptime/src/laptime.cpp -pthread -ldl
//
// so that the files that measure include only <laptime/stopwatch.hpp> (the API and the inline hot
// path) and compile fast. A single-file program may instead include <laptime/laptime.hpp>, which
// carries the same definitions (LAPTIME_IMPL: weak, so both ways link together).
#include "laptime/laptime.hpp"
// Explicitly: users of the CMake target define LAPTIME_IMPL_LINKED, which leaves the
// implementation out of laptime.hpp, and a build may pass it to every file, this one included.
#include "laptime/impl/implementation.hpp"
