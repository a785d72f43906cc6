// laptime: the Stopwatch (docs/stopwatch.md), named intervals per iteration with warm-up,
// percentiles, CPU and I/O of tracked names and GPU time. One process-wide instance, shared by
// every shared object and by the Python module; every call is safe from any thread, none from a
// signal handler (docs/stopwatch.md).
//
//   auto& sw = laptime::Stopwatch::instance();
//   sw.enable(/*num_warmup_iters=*/50, /*print_every_n_iters=*/100, /*do_cuda_sync=*/false);
//   sw.set_cpu_usage_meas_name("training loop");
//   for (...) {
//     sw.start_meas("training loop");
//     { LAPTIME_MEAS("data fetch"); batch = loader.next(); }
//     step(batch);
//     sw.end_meas("training loop");
//     sw.finish_iter();
//   }
//   sw.print_eval_times();
//   sw.write_json("results/run.json");
//
// What a file that measures compiles: the API, inline only the hot path. The rest is defined once
// in the implementation part (the CMake target laptime::laptime, src/laptime.cpp, or the single
// include <laptime/laptime.hpp>: docs/build.md). Compiled out (LAPTIME_DISABLE): the same API
// with empty inline bodies; no library to link.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "laptime/config.hpp"
#include "laptime/detail/error_policy.hpp"  // UsageError: what a usage error throws
#if LAPTIME_ENABLED
#include "laptime/detail/stopwatch_hot.hpp"
#endif

LAPTIME_BEGIN_NAMESPACE

struct Results;  // laptime/results.hpp: include it to call Stopwatch::results()

namespace detail {
/// Results{}.to_json() and .to_text(): what the compiled-out Stopwatch (LAPTIME_DISABLE) returns
/// from to_json() and report(), with no renderer to link. tests/results-test.cpp checks that they
/// are the renderings.
inline constexpr const char* kEmptyResultsJson =
    "{\"schema\": 1, \"rank\": 0, \"world_size\": 1, \"pid\": 0, \"host\": \"\", "
    "\"num_warmup_iters\": 0, \"iterations_measured\": 0, \"iterations_finished\": 0, "
    "\"measurements\": [], \"one_time\": []}";
inline constexpr const char* kEmptyResultsText =
    "laptime stopwatch: 0 measured iterations (0 warm-up); rank 0/1, pid 0, host \n";
struct ThreadRecord;  // detail/stopwatch_hot.hpp: a thread's intervals
bool start_for_scope(std::string_view name, ThreadRecord*& owner);
void end_scope(std::string_view name, ThreadRecord* owner);
}  // namespace detail

/// Where periodic and at-exit reports are printed: fn(text, size, user_data). The Python module
/// installs one that writes to sys.stdout.
using PrintFunction = void (*)(const char* text, std::size_t size, void* user_data);

/// What periodic printing (print_every_n_iters) prints: the whole report (the default, as the
/// seed did), one compact progress line (rewritten in place on a terminal), or nothing.
/// LAPTIME_PROGRESS=report|line|off, when set, wins.
enum class ProgressMode { Report, Line, Off };

/// The printed report's layout: laptime's table (the default), or the seed tool's sections
/// ("Num. measured iterations:", "Average runtime per iteration:", ... in seconds) for scripts
/// that read those. LAPTIME_REPORT_FORMAT=table|seed, when set, wins. JSON is not affected.
enum class ReportFormat { Table, Seed };

/// The process-wide stopwatch: named intervals per iteration, with warm-up, percentiles, CPU and
/// I/O of tracked names, and optional GPU time.
class Stopwatch {
 public:
  /// The singleton. `laptime::Stopwatch::instance().start_meas("step");`
  static Stopwatch& instance() noexcept {
    static Stopwatch facade;  // stateless; the state is process-wide (detail::stopwatch_state)
    return facade;
  }

  // ---- measuring (inline: the hot path) --------------------------------------------------------

  /// Whether enable() was called.
  bool is_enabled() const noexcept;
  /// Starts the interval `name` on the calling thread. Cost when enabled: two clock reads in
  /// the pair plus a few ns; no lock, no allocation once the name is known to the thread.
  void start_meas(std::string_view name);
  /// Ends the interval `name` running on the calling thread (or the one interval of that name
  /// running on another thread).
  void end_meas(std::string_view name);
  /// Ends the interval `name` running on the calling thread without counting it: begun for work
  /// that never came (a fetch for a step the loop then did not take). Usage error where it does
  /// not run on this thread; nothing before enable() or while disabled.
  void discard_meas(std::string_view name);
  /// Ends an iteration: advances warm-up, emits an NVTX mark "iteration N" when the NVTX wrapper
  /// is enabled, resolves finished GPU timings, prints periodically.
  void finish_iter();

  // ---- configuration ---------------------------------------------------------------------------

  /// Turns measuring on. Iterations before `num_warmup_iters` are warm-up (not accumulated);
  /// with `print_every_n_iters` the report is printed every n measured iterations (0 or
  /// std::nullopt: never); `do_cuda_sync` synchronises the current CUDA context right before each
  /// timestamp after warm-up (costs a full GPU sync per call: use it to attribute GPU work to host
  /// intervals). Calling again with the same arguments does nothing; with others it is a usage
  /// error. A setting the user's environment gave (configure_from_env, docs/configuration.md) wins.
  void enable(int num_warmup_iters, std::optional<int> print_every_n_iters = std::nullopt,
              bool do_cuda_sync = false);
  /// Turns measuring off (results stay; enable() may then be called with other arguments).
  void disable() noexcept;
  /// Drops all results and warm-up progress; the configuration stays.
  void reset();

  /// Seed-compatible: sample CPU and I/O during the intervals of `name` (see track_cpu_usage).
  void set_cpu_usage_meas_name(std::string_view name) { track_cpu_usage(name); }
  /// Samples process-tree CPU, system CPU and I/O (/proc) at the start and end of every interval
  /// of `name` (several names may be tracked). Costs a /proc read (~10-50 µs) per timestamp of
  /// tracked names only.
  void track_cpu_usage(std::string_view name);

  /// Limits the distinct measurement names to `n` (at most LAPTIME_MAX_NAMES, the compile-time
  /// capacity: more is clamped with a one-time warning); names past the limit are usage errors.
  /// LAPTIME_MAX_NAMES in the environment overrides this call. Returns the limit in force.
  /// `laptime::Stopwatch::instance().set_max_names(256);`
  std::size_t set_max_names(std::size_t n);

  /// Also times every interval on the GPU with a pair of CUDA events recorded on `stream`
  /// (nullptr: the legacy default stream; or a cudaStream_t / PyTorch stream handle). Resolved
  /// without blocking at finish_iter and at report time; no sync on the hot path. Cost: two
  /// cuEventRecord calls per interval (~1-2 µs).
  void enable_gpu_timing(void* stream = nullptr);
  /// Times only the intervals of `name` on the GPU (call once per name; LAPTIME_GPU_TIMING=a,b
  /// does the same), on the stream given to set_gpu_stream (default: the legacy default stream).
  /// Names not selected cost nothing extra. enable_gpu_timing() times every name instead.
  void enable_gpu_timing_for(std::string_view name);
  /// Changes the stream GPU timing records on (e.g. the framework's current stream).
  void set_gpu_stream(void* stream) noexcept;
  /// Stops GPU timing, of every name and of selected ones.
  void disable_gpu_timing();
  /// Waits for every pending GPU timing (report time; never inside the loop).
  void wait_for_gpu_timings();

  /// Keeps each thread's last `max_intervals` intervals in a ring (results().samples, the JSON's
  /// "samples": `laptime plot`, `laptime trace`); 0 turns it off. 32 bytes per interval, allocated
  /// at the thread's next start_meas; the pair then costs a few stores more. LAPTIME_RECORD wins.
  /// `laptime::Stopwatch::instance().enable_recording(100000);`
  void enable_recording(std::size_t max_intervals);

  /// Makes every interval also an NVTX range of its name, through the NVTX wrapper while it is
  /// enabled (a name once ended on another thread: start/end ranges, docs/nvtx.md). Off (the
  /// default) the pair costs what it did; on, one NVTX push and pop more. LAPTIME_NVTX_RANGES
  /// (and LAPTIME_PROFILE=profiling) wins.
  /// `laptime::Stopwatch::instance().set_nvtx_ranges(true);`
  void set_nvtx_ranges(bool on);

  /// This process's rank and world size (reports, {rank} in paths, rank-0-only printing), for
  /// programs that learn them from MPI or NCCL, not the launcher's variables. A world size of 0
  /// keeps the detected one (at least rank + 1); a negative rank or INT_MAX is a usage error.
  void set_rank(int rank, int world_size = 0);
  /// Periodic and at-exit reports only on rank 0 (rank from RANK/OMPI/SLURM/PMI variables).
  void set_print_rank0_only(bool on) noexcept;
  /// Where periodic and at-exit reports go (default: stdout). nullptr restores stdout.
  void set_print_function(PrintFunction fn, void* user_data) noexcept;
  /// The name whose intervals are the loop's wait for data, for the report's bottleneck verdict
  /// (docs/stopwatch.md). Empty: the default rule (the first name such as "data", "data fetch",
  /// "data_loading", "next batch"). LAPTIME_DATA_NAME, when set, wins.
  /// `laptime::Stopwatch::instance().set_data_name("fetch");`
  void set_data_name(std::string_view name);
  /// The iterations the run will finish (warm-up included), for the progress line's ETA; 0:
  /// unknown.
  void set_total_iters(std::int64_t n) noexcept;
  /// What periodic printing prints (ProgressMode). In Line mode without print_every_n_iters the
  /// line is refreshed at most twice a second.
  void set_progress(ProgressMode mode);
  /// The printed report's layout (ReportFormat): print_eval_times, report(), the periodic and
  /// the at-exit report.
  void set_report_format(ReportFormat format) noexcept;
  /// Whether SIGTERM, SIGINT, SIGHUP and abort() save the LAPTIME_OUTPUT file first (on where it
  /// is set; LAPTIME_SIGNAL_HANDLERS wins). At the first enable(), or at once after it (off
  /// restores the program's handlers). docs/guarantees.md says what each way of ending keeps.
  void set_exit_signal_handlers(bool on);

  /// In a worker process (a child of the process that enabled the Stopwatch: fork, spawn,
  /// forkserver), the label its figures carry in the parent's report ("worker 3"; default
  /// "pid <pid>"; at most 47 bytes, cut at a UTF-8 character boundary). Ignored elsewhere.
  /// docs/workers.md.
  void set_worker_label(std::string_view label);
  /// Whether this process measures for a parent (a worker whose figures go to its report).
  bool is_worker() const noexcept;

  // ---- one-time measurements -------------------------------------------------------------------

  /// A single interval outside the iteration scheme (pipeline creation); no warm-up. A name is
  /// used once.
  void start_one_time_measurement(std::string_view name);
  void end_one_time_measurement(std::string_view name);

  // ---- results ---------------------------------------------------------------------------------

  /// Iterations finished after warm-up.
  std::int64_t get_num_nonwarmup_iters_measured() const;
  /// Everything measured so far (laptime/results.hpp has the type).
  Results results() const;
  /// Prints the report to stdout (allowed while measurements run: they are marked [running]).
  /// Prints nothing when not enabled and nothing was measured, as the seed printed nothing
  /// before enable.
  void print_eval_times() const;
  /// The same, to `os`.
  void print_eval_times(std::ostream& os) const;
  /// The report as text.
  std::string report() const;
  /// The results as JSON (docs/reports.md).
  std::string to_json() const;
  /// Writes to_json() to `path` (as given: "{rank}" is not replaced) atomically: a reader or a
  /// crash sees the old file or the new one, never a torn one. Throws std::system_error when it
  /// cannot (code(): the errno; what(): the path, the step, the reason). Compiled out: nothing.
  /// `laptime::Stopwatch::instance().write_json("results/run-3.json");`
  void write_json(const std::string& path) const;

  Stopwatch(const Stopwatch&) = delete;
  Stopwatch& operator=(const Stopwatch&) = delete;

 private:
  Stopwatch() = default;
};

/// Times the enclosing scope: `{ laptime::ScopedMeasurement m("data fetch"); ... }`.
/// Not copyable or movable; ends the measurement even when the scope exits by an exception.
class ScopedMeasurement {
 public:
  explicit ScopedMeasurement(std::string_view name)
      : name_(name), started_(detail::start_for_scope(name, owner_)) {}
  /// A temporary std::string ("block " + std::to_string(i)) would be gone when the scope ends,
  /// and its end would read freed memory: a compile error instead. Name a variable that outlives
  /// the scope (docs/stopwatch.md).
  template <class Temporary, std::enable_if_t<std::is_same<Temporary, std::string>::value, int> = 0>
  explicit ScopedMeasurement(Temporary&& name) = delete;
  // A destructor must not throw: a usage error here (the measurement was ended by hand inside
  // the scope) is reported on stderr instead under the throw policy; the warn and abort policies
  // act as they do everywhere.
  ~ScopedMeasurement() {
#if LAPTIME_ENABLED
    if (!started_) return;  // the name ran already (recursion, under the warn policy)
    try {
      detail::end_scope(name_, owner_);
    } catch (...) {
      detail::scoped_end_failed();
    }
#endif
  }
  ScopedMeasurement(const ScopedMeasurement&) = delete;
  ScopedMeasurement& operator=(const ScopedMeasurement&) = delete;
  ScopedMeasurement(ScopedMeasurement&&) = delete;
  ScopedMeasurement& operator=(ScopedMeasurement&&) = delete;
  void* operator new(std::size_t) = delete;
  void* operator new[](std::size_t) = delete;

 private:
  std::string_view name_;
  detail::ThreadRecord* owner_ = nullptr;  // the thread it started on (a coroutine may move)
  bool started_;
};

#if LAPTIME_ENABLED
/// `LAPTIME_MEAS("data fetch");` times the rest of the enclosing scope.
/// Each use declares a variable of its own (__COUNTER__), so that two on one line, or in one
/// expansion of a user's macro, do not collide.
#define LAPTIME_MEAS(name) LAPTIME_MEAS_AS(name, LAPTIME_CONCAT(laptime_meas_, __COUNTER__))
#define LAPTIME_MEAS_AS(name, var)   \
  ::laptime::ScopedMeasurement var { \
    name                             \
  }
#else
// The name is named, never evaluated: a parameter or variable passed only here stays "used", and
// any expression compiles (a lambda's call too, which sizeof would refuse). It takes one
// __COUNTER__ value, as the macro compiled in does: nvcc compiles a file twice, laptime out in the
// device pass, and a kernel or a doctest case named with __COUNTER__ after it must get the same
// name in both passes.
#define LAPTIME_MEAS(name) \
  static_cast<void>(false && (static_cast<void>(name), static_cast<void>(__COUNTER__), true))
#endif

// ---- the hot path ------------------------------------------------------------------------------

#if LAPTIME_ENABLED

inline bool Stopwatch::is_enabled() const noexcept {
  return detail::stopwatch_core().is_on();
}

LAPTIME_ALWAYS_INLINE void Stopwatch::start_meas(std::string_view name) {
  detail::StopwatchCore& s = detail::stopwatch_core();
  const std::uint8_t power = s.power.load(std::memory_order_relaxed);
  // Tested apart, so that before enable() the call stays one load and one branch.
  if (LAPTIME_UNLIKELY(power == detail::kNeverEnabled)) return;
  if (LAPTIME_LIKELY(power == detail::kEnabled)) {
    s.start(name);
  } else {
    s.start_while_disabled(name);  // remembered: its end after an enable() raises nothing
  }
}

/// start_meas for a scope (ScopedMeasurement, Python's `with measure()`), the thread it started on
/// into `owner`: false where the scope's end must end nothing, because its start found the name
/// running on this thread and the error policy let the call return (recursion then measures the
/// outer call whole).
LAPTIME_ALWAYS_INLINE bool detail::start_for_scope(std::string_view name,
                                                   detail::ThreadRecord*& owner) {
  detail::StopwatchCore& s = detail::stopwatch_core();
  const std::uint8_t power = s.power.load(std::memory_order_relaxed);
  if (LAPTIME_UNLIKELY(power == detail::kNeverEnabled)) return true;
  if (LAPTIME_LIKELY(power == detail::kEnabled)) {
    owner = s.start(name);
    return owner != nullptr;
  }
  s.start_while_disabled(name);
  return true;
}

/// end_meas; for a scope, `owner` is the thread it started on: ended on another (a coroutine
/// resumed there), the interval `owner` runs, never the one of that name the ending thread runs.
LAPTIME_ALWAYS_INLINE void detail::end_scope(std::string_view name, detail::ThreadRecord* owner) {
  detail::StopwatchCore& s = detail::stopwatch_core();
  const std::uint8_t power = s.power.load(std::memory_order_relaxed);
  if (LAPTIME_UNLIKELY(power == detail::kNeverEnabled)) return;
  if (LAPTIME_LIKELY(power == detail::kEnabled)) {
    s.end(name, owner);
  } else {
    s.end_while_disabled(name);
  }
}

LAPTIME_ALWAYS_INLINE void Stopwatch::end_meas(std::string_view name) {
  detail::end_scope(name, nullptr);
}

inline void Stopwatch::finish_iter() {
  detail::StopwatchCore& s = detail::stopwatch_core();
  if (!s.is_on()) return;
  s.finish_iter();  // once per iteration: out of line
}

#else  // LAPTIME_DISABLE: empty bodies, nothing to link

inline bool Stopwatch::is_enabled() const noexcept {
  return false;
}
inline void Stopwatch::start_meas(std::string_view) {}
inline void Stopwatch::end_meas(std::string_view) {}
inline void Stopwatch::discard_meas(std::string_view) {}
inline bool detail::start_for_scope(std::string_view, detail::ThreadRecord*&) {
  return true;
}
inline void Stopwatch::finish_iter() {}
inline void Stopwatch::enable(int, std::optional<int>, bool) {}
inline void Stopwatch::disable() noexcept {}
inline void Stopwatch::reset() {}
inline void Stopwatch::track_cpu_usage(std::string_view) {}
inline std::size_t Stopwatch::set_max_names(std::size_t n) {
  return n < LAPTIME_MAX_NAMES ? n : LAPTIME_MAX_NAMES;
}
inline void Stopwatch::enable_gpu_timing(void*) {}
inline void Stopwatch::enable_gpu_timing_for(std::string_view) {}
inline void Stopwatch::set_gpu_stream(void*) noexcept {}
inline void Stopwatch::disable_gpu_timing() {}
inline void Stopwatch::wait_for_gpu_timings() {}
inline void Stopwatch::enable_recording(std::size_t) {}
inline void Stopwatch::set_nvtx_ranges(bool) {}
inline void Stopwatch::set_rank(int, int) {}
inline void Stopwatch::set_print_rank0_only(bool) noexcept {}
inline void Stopwatch::set_worker_label(std::string_view) {}
inline bool Stopwatch::is_worker() const noexcept {
  return false;
}
inline void Stopwatch::set_print_function(PrintFunction, void*) noexcept {}
inline void Stopwatch::set_exit_signal_handlers(bool) {}
inline void Stopwatch::set_data_name(std::string_view) {}
inline void Stopwatch::set_total_iters(std::int64_t) noexcept {}
inline void Stopwatch::set_progress(ProgressMode) {}
inline void Stopwatch::set_report_format(ReportFormat) noexcept {}
inline void Stopwatch::start_one_time_measurement(std::string_view) {}
inline void Stopwatch::end_one_time_measurement(std::string_view) {}
inline std::int64_t Stopwatch::get_num_nonwarmup_iters_measured() const {
  return 0;
}
inline void Stopwatch::print_eval_times() const {}
inline void Stopwatch::print_eval_times(std::ostream&) const {}
inline std::string Stopwatch::report() const {
  return detail::kEmptyResultsText;
}
inline std::string Stopwatch::to_json() const {
  return detail::kEmptyResultsJson;
}
inline void Stopwatch::write_json(const std::string&) const {}

#endif

LAPTIME_END_NAMESPACE
