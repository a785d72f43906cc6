// laptime internals: what the Stopwatch keeps of its iterations, one part of its process-wide
// state (stopwatch_parts.hpp): the loop's time (each iteration is the time between two
// finish_iter() calls), the ring of iteration ends that recording keeps, and when and at what CPU
// time the last progress line was printed. iter_mutex is this part's lock: finish_iter writes,
// reports and the progress line read. The implementation part.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <new>
#include <optional>
#include <utility>
#include <vector>

#include "laptime/config.hpp"
#include "laptime/impl/progress.hpp"
#include "laptime/resources.hpp"
#include "laptime/results.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

struct IterationLog {
  std::mutex iter_mutex;
  LoopTimes loop;
  // The last iter_capacity iteration ends (iteration, time), a ring: kept while recording.
  std::vector<std::pair<std::int64_t, std::int64_t>> iter_ends;
  std::size_t iter_next = 0;
  std::size_t iter_capacity = 0;
  bool iter_ends_broken = false;      // disable() since the last end: the next one is not kept
  resources::Sample progress_cpu;     // the CPU at the last progress line
  std::int64_t progress_line_ns = 0;  // when the last progress line was printed

  /// Iteration `iteration` (from 0) ended at `now`; `measured`: it is after warm-up. While
  /// recording (`capacity` > 0) its end is kept too, in a ring of `capacity`: one lock for both.
  void add_iteration(std::int64_t iteration, std::int64_t now, bool measured,
                     std::size_t capacity) {
    std::lock_guard<std::mutex> lock(iter_mutex);
    loop.add(now, measured);
    if (capacity != 0) keep_iteration_end(iteration, now, capacity);
  }

  /// add_iteration's recording part, iter_mutex held. The first end after disable() is not kept:
  /// the iteration it ends spans the time while disabled, which is no iteration's (break_loop),
  /// so it must not be a whole one.
  void keep_iteration_end(std::int64_t iteration, std::int64_t t, std::size_t capacity) {
    if (iter_ends_broken) {
      iter_ends_broken = false;
      return;
    }
    if (iter_capacity != capacity) {  // recording (re)started with another capacity
      iter_ends.clear();
      iter_next = 0;
      iter_capacity = capacity;
    }
    if (iter_ends.size() < capacity) {
      iter_ends.emplace_back(iteration, t);
    } else {
      iter_ends[iter_next] = {iteration, t};
      iter_next = iter_next + 1 == capacity ? 0 : iter_next + 1;
    }
  }

  /// The iteration ends kept, oldest first.
  std::vector<std::pair<std::int64_t, std::int64_t>> iteration_ends() {
    std::vector<std::pair<std::int64_t, std::int64_t>> out;
    std::lock_guard<std::mutex> lock(iter_mutex);
    const std::size_t k = iter_ends.size();
    const std::size_t first = iter_next;  // oldest first (0 until the ring wraps)
    for (std::size_t i = 0; i < k; ++i) out.push_back(iter_ends[(first + i) % k]);
    return out;
  }

  std::optional<LoopFigures> loop_figures() {
    std::lock_guard<std::mutex> lock(iter_mutex);
    return loop.figures();
  }

  /// Whether `min_gap_ns` passed since the last progress line (or none was printed yet).
  bool line_rested(std::int64_t now, std::int64_t min_gap_ns) {
    std::lock_guard<std::mutex> lock(iter_mutex);
    return progress_line_ns == 0 || now - progress_line_ns >= min_gap_ns;
  }

  /// A progress line printed at `now` with the process tree's CPU `cpu`: its rolling figures and
  /// its CPU use since the last line go into `f`.
  void take_line_figures(ProgressFigures& f, const resources::Sample& cpu, std::int64_t now) {
    std::lock_guard<std::mutex> lock(iter_mutex);
    window_figures(loop, f);
    const resources::Sample& prev = progress_cpu;
    if (prev.tree_cpu_ok && cpu.tree_cpu_ok && cpu.taken_ns > prev.taken_ns &&
        cpu.tree_cpu_s >= prev.tree_cpu_s) {
      f.cpu_percent = (cpu.tree_cpu_s - prev.tree_cpu_s) /
                      (static_cast<double>(cpu.taken_ns - prev.taken_ns) * 1e-9) * 100.0;
    }
    progress_cpu = cpu;
    progress_line_ns = now;
  }

  /// disable(): the next finish_iter() starts the loop's timing again, so that the time while
  /// disabled (an evaluation phase) is no iteration's.
  void break_loop() {
    std::lock_guard<std::mutex> lock(iter_mutex);
    loop.last_end_ns = 0;
    iter_ends_broken = !iter_ends.empty();  // the recorded iterations break there too
  }

  /// reset(): the iterations so far are forgotten.
  void clear_iterations() {
    std::lock_guard<std::mutex> lock(iter_mutex);
    iter_ends.clear();
    iter_next = 0;
    iter_ends_broken = false;
    loop.clear();
    progress_line_ns = 0;
  }

  // A forked child: the thread that may have held the lock does not exist there.
  void rearm_iterations_in_child() { new (&iter_mutex) std::mutex(); }
};

}  // namespace detail
LAPTIME_END_NAMESPACE
