// laptime internals: what the Stopwatch prints at the end of an iteration: the progress line
// (Stopwatch::set_progress, LAPTIME_PROGRESS; its text in progress.hpp) or the periodic report.
// The implementation part.
#pragma once

#include <cstdint>
#include <string>

#include "laptime/config.hpp"
#include "laptime/impl/progress.hpp"
#include "laptime/impl/seed_report.hpp"
#include "laptime/impl/stopwatch_parts.hpp"
#include "laptime/impl/stopwatch_report.hpp"
#include "laptime/resources.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

inline void StopwatchState::set_progress(ProgressMode mode, bool from_env) {
  // The user's LAPTIME_PROGRESS wins (docs/configuration.md).
  configure(progress_from_env, from_env,
            [&] { progress.store(static_cast<int>(mode), std::memory_order_relaxed); });
}

// The progress line follows the periodic-print rule; without print_every_n_iters it is refreshed
// at most twice a second (after warm-up, on rank 0 where printing is limited to it).
inline bool StopwatchState::line_due(std::int64_t finished, std::int64_t now) {
  if (print_every.load(std::memory_order_relaxed) > 0) return prints_after(finished);
  if (finished - iter_gate().warmup.load(std::memory_order_relaxed) <= 0) return false;
  if (!line_rested(now, 500000000)) return false;
  return !print_rank0_only.load(std::memory_order_relaxed) || rank_info().rank == 0;
}

inline void StopwatchState::print_progress(std::int64_t finished, std::int64_t now) {
  ProgressFigures f;
  f.finished = finished;
  if (const std::int64_t total = total_iters.load(std::memory_order_relaxed); total > 0) {
    f.total = total;
  }
  const resources::Sample cpu = resources::sample();  // the process tree: a /proc read
  take_line_figures(f, cpu, now);
  print_line(progress_line(f));
}

inline void StopwatchState::report_after_iteration(std::int64_t finished, std::int64_t now) {
  const auto mode = static_cast<ProgressMode>(progress.load(std::memory_order_relaxed));
  if (mode == ProgressMode::Line) {
    if (line_due(finished, now)) print_progress(finished, now);
  } else if (mode == ProgressMode::Report && prints_after(finished)) {
    print(report_text(results(/*wait_for_gpu=*/false), report_format.load()));
  }
}

}  // namespace detail
LAPTIME_END_NAMESPACE
