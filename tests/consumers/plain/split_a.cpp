// Two copies of laptime in one program whose Stopwatch states differ in layout (here
// LAPTIME_MAX_NAMES; in the field a plugin built with another libstdc++ ABI): each keeps its own
// state, and the process is told so once on stderr. This file is the copy with another layout.
// Its state takes part in fork handling too: a worker it forks measures for it.
#define LAPTIME_MAX_NAMES 64
#include <laptime/laptime.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

void measure_in_the_other_copy() {
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  sw.start_meas("a");
  sw.end_meas("a");
  sw.finish_iter();
  if (const pid_t worker = ::fork(); worker == 0) {
    for (int i = 0; i < 5; ++i) {
      sw.start_meas("a worker");
      sw.end_meas("a worker");
    }
    ::_exit(0);
  } else {
    ::waitpid(worker, nullptr, 0);
  }
  std::uint64_t count = 0;
  for (const auto& m : sw.results().measurements) {
    if (m.name == "a worker") count = m.count;
  }
  std::printf("the other copy's worker intervals: %llu\n", static_cast<unsigned long long>(count));
}
