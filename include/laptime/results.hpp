// laptime: a snapshot of the Stopwatch's results, and its two renderings: the text report
// (print_eval_times) and JSON (to_json, docs/reports.md). Plain data here; the renderings are plain
// code over it, out of line in impl/results.hpp (the implementation part, tested with known
// data in tests/results-test.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "laptime/config.hpp"
#include "laptime/stopwatch.hpp"  // Stopwatch::results() returns Results

LAPTIME_BEGIN_NAMESPACE

/// Resource figures of a tracked name, weighted by interval length. nullopt: could not be read.
struct ResourceFigures {
  std::optional<double> process_percent;  ///< process tree CPU, % of the machine
  std::optional<double> process_cores;    ///< process tree CPU, cores busy
  std::optional<double> system_percent;   ///< whole machine, /proc/stat
  std::optional<double> read_mb_per_s;    ///< storage reads of the tree (read_bytes)
  std::optional<double> write_mb_per_s;   ///< storage writes of the tree (write_bytes)
  std::optional<double> rchar_mb_per_s;   ///< all reads, page cache included (rchar)
  std::optional<double> wchar_mb_per_s;   ///< all writes (wchar)
  /// The process's own part of process_cores (its threads, no child process); the rest is what
  /// its child processes (loader workers) used.
  std::optional<double> main_cores;
  /// The live descendant processes (loader workers) during the intervals, on average.
  std::optional<double> child_processes;
};

/// GPU time of a name's intervals, from CUDA events (Stopwatch::enable_gpu_timing).
struct GpuFigures {
  std::uint64_t count = 0;    ///< resolved intervals after warm-up
  std::uint64_t pending = 0;  ///< recorded, not yet resolved
  double total_ns = 0, mean_per_iter_ns = 0, mean_per_interval_ns = 0;
  double min_ns = 0, median_ns = 0, max_ns = 0;
};

/// One measured name. Durations in nanoseconds.
/// What one worker process (a child: a DataLoader worker) measured for a name.
struct WorkerResult {
  long pid = 0;
  std::string label;   ///< "pid 4242", or Stopwatch::set_worker_label's
  bool alive = false;  ///< false: the worker has ended; what it completed is kept
  std::uint64_t count = 0;
  double total_ns = 0, mean_per_interval_ns = 0, median_ns = 0, p90_ns = 0, max_ns = 0;
};

struct MeasurementResult {
  std::string name;
  std::uint64_t count = 0;  ///< intervals after warm-up
  double total_ns = 0, mean_per_iter_ns = 0, mean_per_interval_ns = 0;
  double min_ns = 0, median_ns = 0, p90_ns = 0, p99_ns = 0, max_ns = 0;
  int running = 0;                           ///< threads on which it is running right now
  std::optional<ResourceFigures> resources;  ///< tracked names only
  std::optional<GpuFigures> gpu;             ///< with GPU timing only
  /// GPU timing was asked for this name but cannot run (Results::gpu_timing_off says why): no
  /// GPU figure is made up; the JSON has "gpu": null.
  bool gpu_unavailable = false;
  /// The worker processes that measured this name, each alone (its figures are also in the ones
  /// above, which merge this process and every worker). Empty: only this process measured it.
  std::vector<WorkerResult> workers;
};

struct OneTimeResult {
  std::string name;
  double duration_ns = 0;
  bool running = false;
};

/// One recorded interval (Stopwatch::enable_recording): steady_clock nanoseconds.
struct RecordedInterval {
  std::uint32_t name = 0;  ///< index into Samples::names
  std::int64_t start_ns = 0;
  std::int64_t duration_ns = 0;
  std::int64_t iteration = 0;  ///< finished iterations when it ended (< warm-up: warm-up)
};

/// The intervals one thread recorded (the thread that ended them), oldest first.
struct ThreadSamples {
  long tid = 0;
  std::string name;  ///< the OS thread's name, where it has one
  std::vector<RecordedInterval> intervals;
};

/// The last intervals of each thread (Stopwatch::enable_recording), and iteration ends.
struct Samples {
  std::size_t capacity = 0;  ///< intervals kept per thread
  std::vector<std::string> names;
  std::vector<ThreadSamples> threads;
  /// [iteration, end_ns]: when finish_iter ended each of the last `capacity` iterations.
  std::vector<std::pair<std::int64_t, std::int64_t>> iteration_ends;
  std::uint64_t unrecorded = 0;  ///< ended on a thread that had no ring yet
};

/// The loop: the time between consecutive finish_iter() calls, for iterations after warm-up
/// (the first one needs the finish_iter before it). Durations in nanoseconds.
struct LoopFigures {
  std::uint64_t count = 0;  ///< iterations timed
  double total_ns = 0, mean_ns = 0, min_ns = 0, median_ns = 0, p90_ns = 0, max_ns = 0;
};

/// A name's part in a slow iteration (SlowTail): its time in that iteration against its own median.
/// Durations in nanoseconds.
struct TailCause {
  std::string name;
  double ns = 0;         ///< its intervals that ended in the iteration, all threads together
  double median_ns = 0;  ///< its median per iteration over the iterations of the tail
  long tid = 0;          ///< the thread that spent most of `ns` (a loader thread, a worker)
  std::string thread;    ///< that thread's OS name ("loader-1"); may be empty
  int threads = 1;       ///< threads that recorded the name: with several, the thread tells which
};

/// One of the slowest iterations: its time, and the names that took longer than their median.
struct SlowIteration {
  std::int64_t iteration = 0;     ///< finish_iter() calls before it (the samples' `iter`)
  double ns = 0;                  ///< between the finish_iter() calls that bound it
  std::vector<TailCause> causes;  ///< names over their own median, the largest excess first
};

/// The slow tail of the loop, from the recorded intervals (Stopwatch::enable_recording):
/// impl/slow_tail.hpp has the rule, docs/reports.md ("The slow tail") says it for users.
struct SlowTail {
  std::uint64_t iterations = 0;      ///< measured iterations recorded whole: the tail is of these
  double median_ns = 0, p99_ns = 0;  ///< of their times
  std::uint64_t over_3x_median = 0;  ///< of them, those over 3x the median
  bool tail_bound = false;  ///< p99 over 2x the median: the tail, not the median, is the problem
  std::vector<SlowIteration> slowest;  ///< slowest first; at most LAPTIME_SLOW_TAIL of them
};

/// What bounds the loop, from laptime's own figures (impl/verdict.hpp has the rule).
struct Verdict {
  /// "data-bound", "compute-bound", "gpu-bound", or "none" (figures missing; `text` says which).
  std::string kind;
  /// The line after "verdict: ", e.g. "data-bound: 61 % of each iteration waits in 'data' (...)".
  std::string text;
  /// Data wait / loop time, at most 1; absent where `kind` is "none".
  std::optional<double> data_share;
  std::optional<double> gpu_share;     ///< GPU busy / loop time
  std::optional<double> worker_cores;  ///< child processes' CPU during the tracked name
  std::optional<double> main_cores;    ///< the main process's own CPU during it
  int cpus = 0;                        ///< CPUs online (0: unknown)
  std::optional<bool> workers_saturated;
  /// The worker processes the saturation rule divides the workers' CPU by: those measuring with
  /// laptime (docs/workers.md), else the live descendant processes during the tracked name (their
  /// mean, rounded). Absent with worker_cores, or where neither is known.
  std::optional<int> workers;
};

/// Everything the Stopwatch knows, at one moment.
struct Results {
  int schema = 1;
  int rank = 0, world_size = 1;
  long pid = 0;
  std::string host;
  /// The clock timestamps came from: "tsc 2.60 GHz", "steady (no invariant TSC)"
  /// (detail/clock.hpp).
  std::string clock;
  int num_warmup_iters = 0;
  std::int64_t iterations_finished = 0;
  std::int64_t iterations_measured = 0;
  std::vector<MeasurementResult> measurements;  ///< first-seen order
  std::vector<OneTimeResult> one_time;
  /// Warnings that were repeated: each was printed once, and this says how often it recurred
  /// ("1234 more calls with names past LAPTIME_MAX_NAMES were not measured").
  std::vector<std::string> warnings;
  std::optional<Samples> samples;  ///< with recording on only
  /// Why GPU timing, asked for, cannot run ("no CUDA driver: ..."); empty when it runs or was not
  /// asked for. The report says it once, instead of a GPU line per name.
  std::string gpu_timing_off;
  /// Worker processes that measured (live and ended), and those that found no free region of
  /// the shared file (their measurements are missing from this report).
  int worker_processes = 0;
  int workers_alive = 0;  ///< of them, running when the results were taken
  /// The most of them measuring at one time: a loader's workers, also where they end with each
  /// epoch (worker_processes then counts every epoch's).
  int workers_peak = 0;
  int workers_unrecorded = 0;
  /// (thread, name) pairs of workers that did not fit in their region (docs/workers.md): their
  /// figures are missing from this report.
  std::uint64_t workers_pairs_dropped = 0;
  std::optional<LoopFigures> loop;  ///< none before two finish_iter() calls after warm-up
  /// The name whose intervals are the loop's wait for data (Stopwatch::set_data_name, or the
  /// default rule of impl/verdict.hpp); empty: none.
  std::string data_name;
  int cpus = 0;                    ///< CPUs online when the results were taken (0: unknown)
  std::optional<Verdict> verdict;  ///< detail::verdict_of(*this); none in a hand-built Results
  std::optional<SlowTail> tail;    ///< with recording on only: detail::slow_tail_of(*this)

#if LAPTIME_ENABLED
  /// The report print_eval_times writes (docs/stopwatch.md).
  std::string to_text() const;
  /// JSON, schema version 1 (docs/reports.md).
  std::string to_json() const;
#else
  // Compiled out (LAPTIME_DISABLE) the renderer is emptied like every other body: whatever the
  // figures, these return what empty results render to, and nothing of the renderer is compiled.
  std::string to_text() const {
    return detail::kEmptyResultsText;
  }
  std::string to_json() const {
    return detail::kEmptyResultsJson;
  }
#endif
};

#if !LAPTIME_ENABLED
// The compiled-out Stopwatch's results(), where the type is complete.
inline Results Stopwatch::results() const {
  return Results{};
}
#endif

LAPTIME_END_NAMESPACE
