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
/// The exact nearest-rank quantile q of `v`: what a histogram's quantile is checked against.
inline double exact_quantile(std::vector<std::uint64_t> v, double q) {
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size())));
  return static_cast<double>(v[std::max<std::size_t>(rank, 1) - 1]);
}

/// An environment of the given variables, for settings_from_env.
inline auto env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}
}  // namespace laptime_test
