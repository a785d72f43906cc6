// One small training-loop file, compiled in several variants by bench/compile/run.sh to measure
// what each instrumentation adds to its compile time (goals: docs/build.md). VARIANT picks what is
// included:
//   0 plain
//   1 nvtx3::scoped_range, five names
//   2 the Stopwatch as a file of a multi-file program includes it: <laptime/stopwatch.hpp> (the
//     API and the inline hot path; the implementation comes from the CMake target's library or
//     laptime/src/laptime.cpp): five names start/end, finish_iter, print_eval_times, write_json
//   3 the same with <laptime/laptime.hpp>, the single-include way (the implementation compiled
//     into this file)
//   4 the NVTX wrapper alone (LAPTIME_RANGE)
// LAPTIME_DISABLE on top of 2 is the compiled-out variant.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#if VARIANT == 1
#include <nvtx3/nvtx3.hpp>
#elif VARIANT == 2
#include <laptime/stopwatch.hpp>
#elif VARIANT == 3
#include <laptime/laptime.hpp>
#elif VARIANT == 4
#include <laptime/nvtx.hpp>
#endif

#define STOPWATCH (VARIANT == 2 || VARIANT == 3)

#if VARIANT == 1
#define SECTION_BEGIN(name) \
  {                         \
    nvtx3::scoped_range range_(name);
#define SECTION_END(name) }
#elif STOPWATCH
#define SECTION_BEGIN(name) \
  {                         \
    laptime::Stopwatch::instance().start_meas(name);
#define SECTION_END(name)                        \
  laptime::Stopwatch::instance().end_meas(name); \
  }
#elif VARIANT == 4
#define SECTION_BEGIN(name) \
  {                         \
    LAPTIME_RANGE(name);
#define SECTION_END(name) }
#else
#define SECTION_BEGIN(name) {
#define SECTION_END(name) }
#endif

static double step(std::vector<double>& v, double x) {
  for (double& e : v) e = e * 0.5 + x;
  return v.empty() ? 0.0 : v.front();
}

int main() {
#if STOPWATCH
  laptime::Stopwatch::instance().enable(2, std::nullopt, false);
#endif
  std::vector<double> data(1000, 1.0);
  std::string label = "run";
  double acc = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int it = 0; it < 100; ++it) {
    SECTION_BEGIN("training loop")
    SECTION_BEGIN("data fetch")
    acc += step(data, 1.0);
    SECTION_END("data fetch")
    SECTION_BEGIN("forward")
    acc += step(data, 2.0);
    SECTION_END("forward")
    SECTION_BEGIN("backward")
    acc += step(data, 3.0);
    SECTION_END("backward")
    SECTION_BEGIN("optimizer step")
    acc += step(data, 4.0);
    SECTION_END("optimizer step")
    SECTION_END("training loop")
#if STOPWATCH
    laptime::Stopwatch::instance().finish_iter();
#endif
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%s: %g in %g s\n", label.c_str(), acc, s);
#if STOPWATCH
  laptime::Stopwatch::instance().print_eval_times();
  laptime::Stopwatch::instance().write_json("tu-results.json");
#endif
  return 0;
}
