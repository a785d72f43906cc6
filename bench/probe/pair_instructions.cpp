// Instructions per Stopwatch pair, counted by callgrind (repeatable whatever the machine's load):
// run with N and 2N pairs and take the difference over N.
//
//   g++ -std=c++17 -O2 -DNDEBUG -I include bench/probe/pair_instructions.cpp -o /tmp/pairs
//   -lpthread for n in 100000 200000; do
//     valgrind --tool=callgrind --callgrind-out-file=/dev/null /tmp/pairs $n 2>&1 | grep Collected
//   done
#include <laptime/laptime.hpp>

#include <cstdlib>

int main(int argc, char** argv) {
  const long n = argc > 1 ? std::atol(argv[1]) : 100000;
  laptime::Stopwatch& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  for (long i = 0; i < n; ++i) {
    sw.start_meas("step");
    sw.end_meas("step");
  }
  return 0;
}
