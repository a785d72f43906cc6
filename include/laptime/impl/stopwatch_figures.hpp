// laptime internals: the statistics-to-figures mapping of a report, the one place where the
// Stopwatch's per-name statistics become the numbers of Results (docs/stopwatch.md,
// docs/reports.md). Pure functions of plain data, tested with known data (tests/stats-test.cpp).
#pragma once

#include <cstdint>

#include "laptime/config.hpp"
#include "laptime/detail/histogram.hpp"
#include "laptime/resources.hpp"
#include "laptime/results.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

/// Per measured iteration: `total` spread over the iterations after warm-up (0 before the first).
inline double per_iteration(double total, std::int64_t iterations_measured) {
  return iterations_measured > 0 ? total / static_cast<double>(iterations_measured) : 0.0;
}

/// The host figures of one name: count, total, min, max and the means exact; median, p90 and p99
/// from the histogram (within 1 %).
inline void set_host_figures(MeasurementResult& out, const IntervalStats& st,
                             std::int64_t iterations_measured) {
  out.count = st.count();
  out.total_ns = static_cast<double>(st.total_ns());
  out.mean_per_iter_ns = per_iteration(out.total_ns, iterations_measured);
  out.mean_per_interval_ns = st.mean_ns();
  out.min_ns = static_cast<double>(st.min_ns());
  out.median_ns = st.quantile_ns(0.5);
  out.p90_ns = st.quantile_ns(0.9);
  out.p99_ns = st.quantile_ns(0.99);
  out.max_ns = static_cast<double>(st.max_ns());
}

/// The GPU figures of one name from the resolved event pairs (`st`: none yet gives zeros), with
/// the pairs still pending.
inline GpuFigures gpu_figures(const IntervalStats* st, std::int64_t iterations_measured,
                              std::uint64_t pending) {
  GpuFigures g;
  if (st != nullptr) {
    g.count = st->count();
    g.total_ns = static_cast<double>(st->total_ns());
    g.mean_per_interval_ns = st->mean_ns();
    g.mean_per_iter_ns = per_iteration(g.total_ns, iterations_measured);
    g.min_ns = static_cast<double>(st->min_ns());
    g.median_ns = st->quantile_ns(0.5);
    g.max_ns = static_cast<double>(st->max_ns());
  }
  g.pending = pending;
  return g;
}

/// The CPU and I/O figures of a tracked name (`u`: nullptr when none was sampled: all absent).
inline ResourceFigures resource_figures(const resources::Usage* u) {
  ResourceFigures f;
  if (u != nullptr) {
    f.process_percent = u->process_percent();
    f.process_cores = u->process_cores();
    f.main_cores = u->main_cores();
    f.child_processes = u->child_processes();
    f.system_percent = u->system_percent();
    f.read_mb_per_s = u->read_mb_per_s();
    f.write_mb_per_s = u->write_mb_per_s();
    f.rchar_mb_per_s = u->rchar_mb_per_s();
    f.wchar_mb_per_s = u->wchar_mb_per_s();
  }
  return f;
}

}  // namespace detail
LAPTIME_END_NAMESPACE
