// Shared helpers for laptime's doctest suites.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "laptime/config.hpp"

// Behavioural test cases need the instrumentation compiled in; in the LAPTIME_DISABLE build of
// the suite they compile (proving the API is unchanged) and are reported as skipped.
#define LAPTIME_NEEDS_ENABLED doctest::skip(!LAPTIME_ENABLED)

namespace laptime_test {
/// The exact nearest-rank quantile q of `v`: what a histogram's quantile is checked against.
inline double exact_quantile(std::vector<std::uint64_t> v, double q) {
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size())));
  return static_cast<double>(v[std::max<std::size_t>(rank, 1) - 1]);
}
}  // namespace laptime_test
