// laptime internals: turning numbers into text (report units, JSON). Pure functions.
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "laptime/config.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

/// A duration in nanoseconds with a unit chosen for readability: "812 ns", "3.41 µs", "17.2 ms",
/// "723 s". Three significant digits.
inline std::string format_duration(double ns) {
  const double a = std::fabs(ns);
  const char* unit = "ns";
  double v = ns;
  if (a >= 1e9) {
    unit = "s";
    v = ns / 1e9;
  } else if (a >= 1e6) {
    unit = "ms";
    v = ns / 1e6;
  } else if (a >= 1e3) {
    unit = "\xC2\xB5s";  // µs
    v = ns / 1e3;
  }
  const double av = std::fabs(v);
  if (av >= 100 || v == 0) return fmt::format("{:.0f} {}", v, unit);
  if (av >= 10) return fmt::format("{:.1f} {}", v, unit);
  return fmt::format("{:.2f} {}", v, unit);
}

/// A figure that may be unavailable: "n/a" then.
inline std::string format_optional(std::optional<double> v, const char* spec_suffix) {
  if (!v || !std::isfinite(*v)) return "n/a";
  return fmt::format("{:.1f}{}", *v, spec_suffix);
}

/// Appends `s` as a JSON string literal. Bytes that are not valid UTF-8 become U+FFFD, so the
/// output is always valid JSON whatever a name contains (names are arbitrary bytes).
inline void json_string(std::string& out, std::string_view s) {
  out += '"';
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* end = p + s.size();
  while (p < end) {
    const unsigned char c = *p;
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
      ++p;
    } else if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\u{:04x}", c);
      ++p;
    } else if (c < 0x80) {
      out += static_cast<char>(c);
      ++p;
    } else {
      // validate one UTF-8 sequence
      int len = (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
      bool ok = len != 0 && p + len <= end;
      for (int i = 1; ok && i < len; ++i) ok = (p[i] & 0xc0) == 0x80;
      if (ok && len == 2 && c < 0xc2) ok = false;                   // overlong
      if (ok && len == 3 && c == 0xe0 && p[1] < 0xa0) ok = false;   // overlong
      if (ok && len == 3 && c == 0xed && p[1] >= 0xa0) ok = false;  // surrogate
      if (ok && len == 4 && c == 0xf0 && p[1] < 0x90) ok = false;   // overlong
      if (ok && len == 4 && (c > 0xf4 || (c == 0xf4 && p[1] >= 0x90))) ok = false;
      if (ok) {
        out.append(reinterpret_cast<const char*>(p), static_cast<std::size_t>(len));
        p += len;
      } else {
        out += "\xEF\xBF\xBD";
        ++p;
      }
    }
  }
  out += '"';
}

/// Appends a JSON number, or null for a missing or non-finite value.
inline void json_number(std::string& out, std::optional<double> v) {
  if (!v || !std::isfinite(*v)) {
    out += "null";
    return;
  }
  out += fmt::format("{:.9g}", *v);
}

}  // namespace detail
LAPTIME_END_NAMESPACE
