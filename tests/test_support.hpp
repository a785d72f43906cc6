// Shared helpers for laptime's doctest suites.
#pragma once

#include <doctest/doctest.h>
#include <stdlib.h>

#include <algorithm>
#include <clocale>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "laptime/config.hpp"

// Behavioural test cases need the instrumentation compiled in; in the LAPTIME_DISABLE build of
// the suite they compile (proving the API is unchanged) and are reported as skipped.
#define LAPTIME_NEEDS_ENABLED doctest::skip(!LAPTIME_ENABLED)

namespace laptime_test {
/// Sets the whole locale to `name` ("de_DE.UTF-8"), generating it with localedef into a temporary
/// folder named by LOCPATH where the machine lacks it (the definitions are Debian's `locales`,
/// which scripts/deps.sh installs); false if that fails too.
inline bool use_locale(const std::string& name) {
  if (std::setlocale(LC_ALL, name.c_str()) != nullptr) return true;
  static const std::string dir = [] {
    char tmpl[] = "/tmp/laptime-locale-XXXXXX";
    return std::string(::mkdtemp(tmpl) != nullptr ? tmpl : "");
  }();
  if (dir.empty()) return false;
  const std::string command = "localedef -i " + name.substr(0, name.find('.')) + " -f UTF-8 " +
                              dir + "/" + name + " > /dev/null 2>&1";
  if (std::system(command.c_str()) != 0) return false;
  ::setenv("LOCPATH", dir.c_str(), 1);
  return std::setlocale(LC_ALL, name.c_str()) != nullptr;
}

/// use_locale for a scope (a REQUIRE names the package where it cannot), then "C" again.
struct LocaleScope {
  explicit LocaleScope(const std::string& name) {
    REQUIRE_MESSAGE(use_locale(name), name << ": not available, and localedef could not make it "
                                              "(Debian: apt-get install locales)");
  }
  LocaleScope(const LocaleScope&) = delete;
  LocaleScope& operator=(const LocaleScope&) = delete;
  ~LocaleScope() { std::setlocale(LC_ALL, "C"); }
};

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
