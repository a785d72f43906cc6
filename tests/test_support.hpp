// Shared helpers for laptime's doctest suites.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "laptime/config.hpp"

// Behavioural test cases need the instrumentation compiled in; in the LAPTIME_DISABLE build of
// the suite they compile (proving the API is unchanged) and are reported as skipped.
#define LAPTIME_NEEDS_ENABLED doctest::skip(!LAPTIME_ENABLED)

namespace laptime_test {
/// The exact quantile q of `v`: what a histogram's quantile is checked against.
inline double exact_quantile(std::vector<std::uint64_t> v, double q) {
  // Linear between the closest ranks, as numpy's default: the median of an even count is the
  // mean of the middle two.
  std::sort(v.begin(), v.end());
  const double h = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(h);
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  return static_cast<double>(v[lo]) +
         (h - static_cast<double>(lo)) * (static_cast<double>(v[hi]) - static_cast<double>(v[lo]));
}

/// An environment of the given variables, for settings_from_env.
inline auto env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}
}  // namespace laptime_test
