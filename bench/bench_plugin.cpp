// laptime_bench_plugin: the Stopwatch pair compiled into a shared object (-fPIC, hidden
// visibility, loaded with dlopen RTLD_LOCAL), as a Python extension compiles it. There the
// thread_local lookup goes through __tls_get_addr and the singleton through the environment, so
// this is the pair's cost as the Python binding sees it, minus the binding itself. The clock pair
// next to it is the baseline with the same indirect call around it.
#include <chrono>
#include <cstddef>
#include <string_view>

#include "laptime/stopwatch.hpp"

extern "C" __attribute__((visibility("default"))) void laptime_bench_stopwatch_pair(
    const char* name, std::size_t size) {
  const std::string_view text(name, size);
  laptime::Stopwatch::instance().start_meas(text);
  laptime::Stopwatch::instance().end_meas(text);
}

extern "C" __attribute__((visibility("default"))) long long laptime_bench_clock_pair() {
  const auto a = std::chrono::steady_clock::now();
  const auto b = std::chrono::steady_clock::now();
  return (b - a).count();
}
