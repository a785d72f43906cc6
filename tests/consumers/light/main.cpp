// The fast recipe for a program of several files (docs/build.md): files that measure include only
// <laptime/stopwatch.hpp>; the implementation is compiled once, from laptime/src/laptime.cpp on the
// command line (or by the CMake target). One file including <laptime/laptime.hpp> as well links
// with it (the implementation's functions are weak). Compiled out (LAPTIME_DISABLE) the same files
// build with no src/laptime.cpp and no library.
#include <laptime/stopwatch.hpp>

#include <cstdio>
#include <string>

void train(int iterations);  // loop.cpp
bool end_without_start();    // loop.cpp
std::string summary();       // report.cpp

int main(int argc, char** argv) {
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(/*num_warmup_iters=*/1, /*print_every_n_iters=*/std::nullopt, /*do_cuda_sync=*/false);
  train(4);
#if LAPTIME_ENABLED
  if (!end_without_start()) return 1;
#endif
  sw.print_eval_times();
  if (argc > 1) sw.write_json(argv[1]);
  std::printf("light: %s, %lld measured iterations\n", summary().c_str(),
              static_cast<long long>(sw.get_num_nonwarmup_iters_measured()));
  return 0;
}
