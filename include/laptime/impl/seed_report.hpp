// laptime internals: the report in the seed tool's layout (Stopwatch::set_report_format,
// LAPTIME_REPORT_FORMAT=seed; docs/stopwatch.md, "The seed's report layout"), for programs and
// scripts that read the seed's printed sections: its section titles, its backquoted names, its
// seconds written as Python writes a float. The figures are laptime's. The implementation part.
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "laptime/config.hpp"
#include "laptime/detail/names.hpp"  // append_escaped
#include "laptime/results.hpp"
#include "laptime/stopwatch.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

/// `v` as Python's repr() writes a float: the shortest digits that read back as `v`, positional
/// for exponents from -4 to 15 ("0.034242291450500485", "100.0"), scientific otherwise
/// ("1e-05", "1.5e+16").
inline void append_python_float(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "nan";
    return;
  }
  if (std::isinf(v)) {
    out += v < 0 ? "-inf" : "inf";
    return;
  }
  char buf[40];
  const auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string_view sci(buf, static_cast<std::size_t>(res.ptr - buf));  // "-3.42e-02"
  if (!sci.empty() && sci.front() == '-') {
    out += '-';
    sci.remove_prefix(1);
  }
  const std::size_t e_at = sci.find('e');
  std::string digits;
  for (const char c : sci.substr(0, e_at)) {
    if (c != '.') digits += c;
  }
  const int exp = std::atoi(std::string(sci.substr(e_at + 1)).c_str());
  if (exp < -4 || exp >= 16) {
    out += digits.front();
    if (digits.size() > 1) out.append(".").append(digits, 1, std::string::npos);
    out += exp < 0 ? "e-" : "e+";
    const int mag = std::abs(exp);
    if (mag < 10) out += '0';
    out += std::to_string(mag);
  } else if (exp < 0) {
    out.append("0.").append(static_cast<std::size_t>(-exp - 1), '0').append(digits);
  } else {
    const auto whole = static_cast<std::size_t>(exp) + 1;
    if (digits.size() <= whole) {
      out.append(digits).append(whole - digits.size(), '0').append(".0");
    } else {
      out.append(digits, 0, whole).append(".").append(digits, whole, std::string::npos);
    }
  }
}

/// One section of names: "  `name`: <seconds>" for each name measured after warm-up.
template <class Value>
void append_seed_section(std::string& out, const Results& r, const char* title, Value&& value) {
  out += ". . . . . . . . . . . . . . . . . . . . . . . . . \n";
  out += title;
  out += '\n';
  for (const MeasurementResult& m : r.measurements) {
    if (m.count == 0) continue;  // measured in warm-up only: the seed had dropped it
    out.append("  `");
    append_escaped(out, m.name, /*json=*/false);  // as the table layout: no control character
    out.append("`: ");
    append_python_float(out, value(m) * 1e-9);
    out += '\n';
  }
}

/// The seed's sections for the iterations measured after warm-up. Its CPU line was the whole
/// machine's CPU use (psutil.cpu_percent()) during the name: laptime's system_percent.
inline void append_seed_measured(std::string& out, const Results& r) {
  out += "Num. measured iterations: " + std::to_string(r.iterations_measured) + "\n";
  append_seed_section(out, r, "Average runtime per iteration:", [](const MeasurementResult& m) {
    return m.mean_per_iter_ns;
  });
  append_seed_section(out, r, "Average runtime per measured interval:",
                      [](const MeasurementResult& m) { return m.mean_per_interval_ns; });
  append_seed_section(out, r,
                      "Total runtime:", [](const MeasurementResult& m) { return m.total_ns; });
  out += ". . . . . . . . . . . . . . . . . . . . . . . . . \n";
  for (const MeasurementResult& m : r.measurements) {
    if (!m.resources) continue;
    out.append("Mean CPU usage during `");
    append_escaped(out, m.name, /*json=*/false);
    out.append("`: ");
    // nan where no CPU tick fell in the intervals: the line stays, for the parsers that read it.
    append_python_float(out, m.resources->system_percent.value_or(std::nan("")));
    out += '\n';
  }
}

/// The whole report in the seed's layout.
inline std::string seed_text(const Results& r) {
  const std::string rule(50, '~');
  std::string out = "######################### Stopwatch #########################\n" + rule + "\n";
  const std::int64_t warmup = r.num_warmup_iters;
  if (r.iterations_finished < warmup) {
    out += "warmup not finished (" + std::to_string(r.iterations_finished) + " out of " +
           std::to_string(warmup) + " warmup iterations finished)\n";
  } else if (r.iterations_finished == warmup) {
    out += "warmup finished (" + std::to_string(warmup) +
           " iterations), but no iterations were performed after that\n";
  } else {
    append_seed_measured(out, r);
  }
  if (!r.one_time.empty()) {
    out += rule + "\nOne-time measurements:\n";
    for (const OneTimeResult& t : r.one_time) {
      out.append("  `");
      append_escaped(out, t.name, /*json=*/false);
      out.append("`: ");
      if (t.running) {
        out += "running";
      } else {
        append_python_float(out, t.duration_ns * 1e-9);
      }
      out += '\n';
    }
  }
  out += rule + "\n" + std::string(61, '#') + "\n";
  return out;
}

/// The report as printed: laptime's table, or the seed's layout.
inline std::string report_text(const Results& r, int format) {
  return format == static_cast<int>(ReportFormat::Seed) ? seed_text(r) : r.to_text();
}

}  // namespace detail
LAPTIME_END_NAMESPACE
