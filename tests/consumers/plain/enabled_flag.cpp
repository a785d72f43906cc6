// Whether laptime is compiled in, as the build's LAPTIME_DISABLE left it: `-DLAPTIME_DISABLE=0` (a
// build system's off switch) keeps it in; defined empty or to 1 it compiles it out.
#include <laptime/stopwatch.hpp>

#include <cstdio>

int main() {
  std::printf("laptime enabled=%d\n", LAPTIME_ENABLED);
}
