// A trainer whose build turns on its linters' warnings (GCC's -Wuseless-cast, Clang's -Wcomma and
// the like) as errors: laptime's headers, the implementation included, must add none of them.
#include <laptime/laptime.hpp>

#include <cstdio>

int main() {
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(1, std::nullopt, false);
  for (int i = 0; i < 3; ++i) {
    LAPTIME_MEAS("lint step");
    LAPTIME_RANGE("lint range");
    sw.finish_iter();
  }
  std::printf("%s\n", sw.to_json().c_str());
  return 0;
}
