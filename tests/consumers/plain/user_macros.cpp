// Macros that trainers define before including laptime: CUDA samples' N, the T and V of one-file
// GPT trainers, a callable F, X11's Bool. laptime's headers use none of these names, so the file
// compiles with every one of them defined (the standard library's own names are reserved ones).
#if __has_include(<bits/stdc++.h>)
#include <bits/stdc++.h>
#endif

#define N 1024
#define T float
#define V 50257
#define F 4
#define Bool int
#include <laptime/laptime.hpp>

int main() {
  T weights[N] = {};
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  for (int i = 0; i < 3; ++i) {
    {
      LAPTIME_MEAS("step");
      LAPTIME_RANGE("step range");
      weights[i] += static_cast<T>(V + F);
    }
    sw.finish_iter();
  }
  const Bool ok = sw.results().measurements.size() == (LAPTIME_ENABLED ? 1u : 0u);
  return ok ? 0 : 1;
}
