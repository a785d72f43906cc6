// laptime internals: the loop's time (between finish_iter() calls) and the live progress line
// ("laptime: iter 1200/5000 | 41.7 it/s | ETA 1m31s | loop p50 23.9 ms p90 25.1 ms (last 100) |
// CPU 112 %"). The line's figures and text, and the choice between a rewritten line and plain
// lines, are pure functions tested in tests/progress-test.cpp; the terminal itself is asked in
// Printer::print_line (impl/stopwatch_printer.hpp: isatty), and a real pseudo-terminal is in
// that test too.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "laptime/config.hpp"
#include "laptime/detail/env_vars.hpp"
#include "laptime/detail/histogram.hpp"
#include "laptime/impl/format.hpp"
#include "laptime/results.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

/// LAPTIME_PROGRESS: "report" | "line" | "off" (any case); nullopt for anything else.
inline std::optional<ProgressMode> parse_progress(std::string_view text) {
  // The table's values are in ProgressMode's order.
  const std::optional<int> i = parse_choice(env_var(Env::progress), text);
  if (!i) return std::nullopt;
  return static_cast<ProgressMode>(*i);
}

/// The loop's time: each iteration is the time between two finish_iter() calls. The statistics
/// keep the iterations after warm-up; the window keeps the last kWindow of all (warm-up too), for
/// the progress line's rolling figures. Guarded by IterationLog::iter_mutex.
struct LoopTimes {
  static constexpr std::size_t kWindow = 100;
  std::int64_t last_end_ns = 0;  // the previous finish_iter; 0: none since enable()/reset()
  IntervalStats stats;
  std::array<std::int64_t, kWindow> window{};
  std::size_t window_size = 0, window_next = 0;

  /// finish_iter() at `now_ns`; `measured`: the iteration it ends is after warm-up.
  void add(std::int64_t now_ns, bool measured) {
    if (last_end_ns != 0 && now_ns >= last_end_ns) {
      const std::int64_t dt = now_ns - last_end_ns;
      if (measured) stats.add(static_cast<std::uint64_t>(dt));
      window[window_next] = dt;
      window_next = (window_next + 1) % kWindow;
      window_size = std::min(window_size + 1, kWindow);
    }
    last_end_ns = now_ns;
  }
  void clear() {
    last_end_ns = 0;
    stats.clear();
    window_size = window_next = 0;
  }
  /// The loop figures for Results (none before an iteration after warm-up was timed).
  std::optional<LoopFigures> figures() const {
    if (stats.count() == 0) return std::nullopt;
    LoopFigures f;
    f.count = stats.count();
    f.total_ns = static_cast<double>(stats.total_ns());
    f.mean_ns = stats.mean_ns();
    f.min_ns = static_cast<double>(stats.min_ns());
    f.median_ns = stats.quantile_ns(0.5);
    f.p90_ns = stats.quantile_ns(0.9);
    f.max_ns = static_cast<double>(stats.max_ns());
    return f;
  }
};

/// The figures of one progress line.
struct ProgressFigures {
  std::int64_t finished = 0;          ///< iterations finished, warm-up included
  std::optional<std::int64_t> total;  ///< Stopwatch::set_total_iters
  std::size_t window = 0;             ///< iterations in the rolling figures
  double window_total_ns = 0;         ///< their summed time
  double p50_ns = 0, p90_ns = 0;      ///< over the window (exact)
  std::optional<double> cpu_percent;  ///< process tree, % of one core, since the last line
};

/// The rolling figures of `t` (exact quantiles of the window: a hundred numbers, sorted here).
inline void window_figures(const LoopTimes& t, ProgressFigures& f) {
  std::array<std::int64_t, LoopTimes::kWindow> v{};
  const std::size_t n = t.window_size;
  std::copy(t.window.begin(), t.window.begin() + static_cast<std::ptrdiff_t>(n), v.begin());
  std::sort(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n));
  f.window = n;
  f.window_total_ns = 0;
  for (std::size_t i = 0; i < n; ++i) f.window_total_ns += static_cast<double>(v[i]);
  // Linear between the two closest ranks, as the report's percentiles (numpy's default).
  auto rank = [&](double q) {
    const double h = q * static_cast<double>(n - 1);
    const auto lo = static_cast<std::size_t>(h);
    const std::size_t hi = std::min(lo + 1, n - 1);
    return static_cast<double>(v[lo]) +
           (h - static_cast<double>(lo)) * static_cast<double>(v[hi] - v[lo]);
  };
  f.p50_ns = n > 0 ? rank(0.5) : 0.0;
  f.p90_ns = n > 0 ? rank(0.9) : 0.0;
}

/// "1h02m", "5m06s", "42s"; 100000 hours or more (or not a number): "> 99999h", so that the
/// conversion to an integer never overflows (a huge set_total_iters).
inline std::string format_eta(double seconds) {
  constexpr double kShownBelow = 100000.0 * 3600;
  if (!(seconds + 0.5 < kShownBelow)) return "> 99999h";
  std::string s;
  const auto t = static_cast<std::int64_t>(seconds + 0.5);
  if (t >= 3600) {
    append_int(s, t / 3600);
    s += 'h';
    if (t % 3600 / 60 < 10) s += '0';
    append_int(s, t % 3600 / 60);
    s += 'm';
  } else if (t >= 60) {
    append_int(s, t / 60);
    s += 'm';
    if (t % 60 < 10) s += '0';
    append_int(s, t % 60);
    s += 's';
  } else {
    append_int(s, t);
    s += 's';
  }
  return s;
}

/// The progress line, without a line end:
/// "laptime: iter 1200/5000 | 41.7 it/s | ETA 1m31s | loop p50 23.9 ms p90 25.1 ms (last 100) |
/// CPU 112 %". Without a total: no "/N" and no ETA; a figure not known yet: "n/a".
inline std::string progress_line(const ProgressFigures& f) {
  std::string s = "laptime: iter ";
  append_int(s, f.finished);
  if (f.total) {
    s += '/';
    append_int(s, *f.total);
  }
  s += " | ";
  const double mean = f.window > 0 ? f.window_total_ns / static_cast<double>(f.window) : 0.0;
  if (mean > 0) {
    const double rate = 1e9 / mean;
    if (rate >= 999.5) {                  // what 3 digits would print as 1e+03
      append_int(s, std::llround(rate));  // whole iterations, never "1.5e+06"
    } else {
      append_general(s, rate, 3);
    }
    s += " it/s";
  } else {
    s += "n/a it/s";
  }
  if (f.total) {
    s += " | ETA ";
    const std::int64_t left = *f.total > f.finished ? *f.total - f.finished : 0;
    s += mean > 0 ? format_eta(static_cast<double>(left) * mean * 1e-9) : std::string("n/a");
  }
  s += " | loop p50 ";
  s += f.window > 0 ? format_duration(f.p50_ns) : std::string("n/a");
  s += " p90 ";
  s += f.window > 0 ? format_duration(f.p90_ns) : std::string("n/a");
  s += " (last ";
  append_int(s, f.window);
  s += ") | CPU ";
  if (f.cpu_percent) {
    append_fixed(s, *f.cpu_percent, 0);
    s += " %";
  } else {
    s += "n/a";
  }
  return s;
}

/// Whether the progress line rewrites itself (a carriage return, then clear to the end of the line)
/// rather than printing plain lines: only on a terminal (`is_tty`: isatty on the destination; never
/// through a user print function), and not where a launcher or CI captures the output: TERM
/// unset, empty or "dumb", or CI set to anything but "", "0" or "false".
inline bool rewrites_line(bool is_tty, bool user_print_function, const char* term, const char* ci) {
  if (!is_tty || user_print_function) return false;
  if (term == nullptr || std::string_view(term).empty() || std::string_view(term) == "dumb") {
    return false;
  }
  if (ci != nullptr) {
    const std::string_view c(ci);
    if (!c.empty() && c != "0" && c != "false" && c != "False" && c != "FALSE") return false;
  }
  return true;
}

}  // namespace detail
LAPTIME_END_NAMESPACE
