// What one timestamp costs on this machine, three ways, and which clock laptime chose: the figures
// behind the "cheaper than the clock" row (cycle-counter pair <= 0.75x the clock pair), which
// depends on the host as much as on laptime (a virtual machine may make the cycle counter or the
// vDSO clock slow).
//
//   g++ -std=c++17 -O2 -I include bench/probe/clock_probe.cpp -o /tmp/clock_probe &&
//   /tmp/clock_probe
#include <laptime/laptime.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <thread>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace {
template <class F>
double ns_per_call(F&& f) {
  constexpr int kCalls = 2'000'000;
  double best = 1e30;
  for (int rep = 0; rep < 7; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    std::uint64_t sink = 0;
    for (int i = 0; i < kCalls; ++i) sink += static_cast<std::uint64_t>(f());
    const auto t1 = std::chrono::steady_clock::now();
    asm volatile("" : : "r"(sink));
    const double ns = std::chrono::duration<double, std::nano>(t1 - t0).count() / kCalls;
    if (ns < best) best = ns;
  }
  return best;
}
}  // namespace

int main() {
  (void)laptime::detail::now_ns();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  (void)laptime::detail::now_ns();  // the second anchor: the scale is published
  std::printf("laptime %s\n", laptime::detail::clock_description().c_str());
#if defined(__x86_64__)
  std::printf("rdtsc                    %6.1f ns per call (best of 7)\n",
              ns_per_call([] { return __rdtsc(); }));
#endif
  std::printf("steady_clock::now()      %6.1f ns per call\n", ns_per_call([] {
                return std::chrono::steady_clock::now().time_since_epoch().count();
              }));
  std::printf("laptime detail::now_ns() %6.1f ns per call\n",
              ns_per_call([] { return laptime::detail::now_ns(); }));
  return 0;
}
