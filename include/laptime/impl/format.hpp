// laptime internals: turning numbers and names into text (report units, JSON, messages). Pure
// functions over std::to_chars and string appends: no formatting library to compile or link, and
// no locale (a program's setlocale(LC_NUMERIC, "de_DE") must not turn "3.41" into "3,41", which
// printf-family calls would do).
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include "laptime/config.hpp"
#include "laptime/detail/env.hpp"    // parse_plain_decimal
#include "laptime/detail/names.hpp"  // append_escaped, escaped

LAPTIME_BEGIN_NAMESPACE
namespace detail {

/// Appends `v` with `digits` digits after the point, as printf's "%.Nf" does in the C locale.
inline void append_fixed(std::string& out, double v, int digits) {
  char buf[400];  // the largest double has 309 integer digits
  const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, digits);
  out.append(buf, r.ec == std::errc() ? r.ptr : buf);
}

/// Appends `v` with at most `digits` significant digits, as printf's "%.Ng" does in the C locale.
inline void append_general(std::string& out, double v, int digits) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general, digits);
  out.append(buf, r.ec == std::errc() ? r.ptr : buf);
}

/// Appends an integer in decimal.
template <class Int>
void append_int(std::string& out, Int v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

/// The columns `s` takes on a terminal: one per code point, two for East Asian wide ones (the
/// ranges fmt used when it laid out the report), so that padding lines up µs and CJK names.
inline std::size_t display_width(std::string_view s) {
  std::size_t width = 0;
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* end = p + s.size();
  while (p < end) {
    const unsigned char c = *p;
    const int len = c < 0x80           ? 1
                    : (c >> 5) == 0x6  ? 2
                    : (c >> 4) == 0xe  ? 3
                    : (c >> 3) == 0x1e ? 4
                                       : 1;
    std::uint32_t cp = c;
    if (len > 1 && p + len <= end) {
      cp = c & (0x7f >> len);
      for (int i = 1; i < len; ++i) cp = (cp << 6) | (p[i] & 0x3f);
      p += len;
    } else {
      ++p;
    }
    const bool wide =
        cp >= 0x1100 && (cp <= 0x115f || cp == 0x2329 || cp == 0x232a ||
                         (cp >= 0x2e80 && cp <= 0xa4cf && cp != 0x303f) ||
                         (cp >= 0xac00 && cp <= 0xd7a3) || (cp >= 0xf900 && cp <= 0xfaff) ||
                         (cp >= 0xfe10 && cp <= 0xfe19) || (cp >= 0xfe30 && cp <= 0xfe6f) ||
                         (cp >= 0xff00 && cp <= 0xff60) || (cp >= 0xffe0 && cp <= 0xffe6) ||
                         (cp >= 0x20000 && cp <= 0x2fffd) || (cp >= 0x30000 && cp <= 0x3fffd) ||
                         (cp >= 0x1f300 && cp <= 0x1f64f) || (cp >= 0x1f900 && cp <= 0x1f9ff));
    width += wide ? 2 : 1;
  }
  return width;
}

/// Appends `s` left-aligned in `width` columns (no truncation).
inline void append_left(std::string& out, std::string_view s, std::size_t width) {
  out += s;
  const std::size_t w = display_width(s);
  if (w < width) out.append(width - w, ' ');
}

/// Appends `s` right-aligned in `width` columns (no truncation).
inline void append_right(std::string& out, std::string_view s, std::size_t width) {
  const std::size_t w = display_width(s);
  if (w < width) out.append(width - w, ' ');
  out += s;
}

/// Whether `v` is a finite number, from its exponent bits: std::isfinite is folded to true where
/// the including file is built with -ffast-math (-ffinite-math-only), and NaN and infinity would
/// then reach the JSON, which has no words for them.
inline bool finite_bits(double v) noexcept {
  std::uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return ((bits >> 52) & 0x7ff) != 0x7ff;
}

/// A duration in nanoseconds with a unit chosen for readability: "812 ns", "3.41 µs", "17.2 ms",
/// "723 s". Three significant digits.
inline std::string format_duration(double ns) {
  if (!finite_bits(ns)) return "n/a";
  static constexpr double kScale[] = {1, 1e3, 1e6, 1e9};
  static constexpr const char* kUnit[] = {"ns", "\xC2\xB5s", "ms", "s"};  // µs
  const double a = std::fabs(ns);
  int u = a >= 1e9 ? 3 : a >= 1e6 ? 2 : a >= 1e3 ? 1 : 0;
  std::string out;
  if (a >= 1e13) {  // 10,000 s and more: three significant digits, not every digit ("1.7e+299 s")
    append_general(out, ns / 1e9, 3);
    return out + " s";
  }
  // Three significant digits of the figure as printed: where rounding reaches 100, 10 or the
  // next unit (999.5 ns), the decimals and the unit follow the rounded figure ("1.00 µs").
  for (int decimals = 2;;) {
    const double v = ns / kScale[u];
    const double av = std::fabs(v);
    decimals = std::min(decimals, (av >= 100 || av <= 0.0) ? 0 : av >= 10 ? 1 : 2);
    out.clear();
    append_fixed(out, v, decimals);
    const double shown =
        parse_plain_decimal(std::string_view(out).substr(out[0] == '-' ? 1 : 0)).value_or(0);
    if (shown >= 1000 && u < 3) {
      ++u;
      decimals = 2;
    } else if ((shown >= 100 && decimals > 0) || (shown >= 10 && decimals > 1)) {
      --decimals;
    } else {
      break;
    }
  }
  out += ' ';
  out += kUnit[u];
  return out;
}

/// A figure that may be unavailable: "n/a" then.
inline std::string format_optional(std::optional<double> v, const char* suffix) {
  if (!v || !finite_bits(*v)) return "n/a";
  std::string out;
  append_fixed(out, *v, 1);
  out += suffix;
  return out;
}

/// Appends `s` as a JSON string literal. Bytes that are not valid UTF-8 become U+FFFD, so the
/// output is always valid JSON whatever a name contains (names are arbitrary bytes).
inline void json_string(std::string& out, std::string_view s) {
  out += '"';
  append_escaped(out, s, /*json=*/true);
  out += '"';
}

/// Appends a JSON number with `digits` significant digits, or null for a missing or non-finite
/// value. Exact figures (totals, means, min, max) take 9; quantiles, which come from histogram
/// buckets good to 1 %, take 3: the digits they have.
inline void json_number(std::string& out, std::optional<double> v, int digits = 9) {
  if (!v || !finite_bits(*v)) {
    out += "null";
    return;
  }
  append_general(out, *v, digits);
}

}  // namespace detail
LAPTIME_END_NAMESPACE
