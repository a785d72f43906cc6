// A static-pie program (g++ -static-pie): it has no loader, and no PT_PHDR from which laptime could
// learn its load bias. Its first use of laptime must not read the dynamic section at its
// unrelocated address (it did: a crash at the first enable()).
#include <laptime/laptime.hpp>

#include <cstdio>

int main() {
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  sw.start_meas("a");
  sw.end_meas("a");
  std::printf("static-pie: %zu name\n", sw.results().measurements.size());
  return 0;
}
