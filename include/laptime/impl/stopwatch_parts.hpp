// laptime internals: the Stopwatch's process-wide state, whole: the hot part (StopwatchCore) and
// the parts the implementation keeps, each in its own file with the one lock that guards it:
//   names        NameTable       names_mutex     stopwatch_names.hpp
//   settings     ConfigState     config_mutex    stopwatch_config_state.hpp
//   iterations   IterationLog    iter_mutex      stopwatch_iterations.hpp
//   GPU times    GpuCollection   gpu_mutex       stopwatch_gpu.hpp
//   printing     Printer         report_mutex    stopwatch_printer.hpp
//   one-time     OneTimeLog      one_time_mutex  stopwatch_one_time.hpp
// and the lock-free parts below (recording, workers, progress line, exit output). Each thread's
// record has its own lock (ThreadRecord::mutex, thread_registry.hpp). What the state does is in
// the files that include this one; stopwatch_state.hpp includes them all. The implementation part.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "laptime/config.hpp"
#include "laptime/detail/stopwatch_hot.hpp"
#include "laptime/impl/stopwatch_config_state.hpp"
#include "laptime/impl/stopwatch_gpu.hpp"
#include "laptime/impl/stopwatch_iterations.hpp"
#include "laptime/impl/stopwatch_names.hpp"
#include "laptime/impl/stopwatch_one_time.hpp"
#include "laptime/impl/stopwatch_printer.hpp"
#include "laptime/impl/worker_share.hpp"
#include "laptime/resources.hpp"
#include "laptime/results.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

/// Resource sampling state of one (thread, tracked name); guarded by ThreadRecord::mutex.
struct ResourceSlot {
  resources::Sample start, end;  // end: taken before the end timestamp (StopwatchCore::end_sample)
  resources::Usage usage;
};

/// Slot::nvtx (Stopwatch::set_nvtx_ranges): it moves kNvtxRangeNone -> Pushed|Started (owner, at
/// start) -> None (at the end), or Pushed -> Owed (the ending thread) -> None (the owner).
inline constexpr std::uint8_t kNvtxRangeNone = 0;
inline constexpr std::uint8_t kNvtxRangePushed = 1;
inline constexpr std::uint8_t kNvtxRangeStarted = 2;
inline constexpr std::uint8_t kNvtxRangeOwed = 3;

/// Interval recording (Stopwatch::enable_recording, LAPTIME_RECORD): stopwatch_recording.hpp.
/// (The ring's capacity, which start_meas reads, is StopwatchCore::record_capacity.)
struct RecordingState {
  std::atomic<std::uint64_t> unrecorded{0};
  /// What threads that exited had recorded, kept when another thread takes their record: the
  /// most recent intervals, as many as one ring holds in all. Under the thread registry's lock.
  struct ExitedInterval {
    std::uint64_t name_gen;
    std::int64_t start, dur, iter;
  };
  struct ExitedThread {
    long tid = 0;
    std::string name;
    std::vector<ExitedInterval> intervals;
  };
  std::vector<ExitedThread> exited;
  std::size_t exited_intervals = 0;
};

/// Worker processes (worker_share.hpp): stopwatch_workers.hpp.
struct WorkerState {
  WorkerShare share;
  std::atomic<bool> share_checked{false};  // attach_from_env tried (once per process)
};

/// The progress line (progress.hpp): stopwatch_report.hpp.
struct ProgressState {
  std::atomic<int> progress{0};              // ProgressMode
  std::atomic<std::int64_t> total_iters{0};  // 0: unknown
};

/// The exit output (LAPTIME_OUTPUT, LAPTIME_PRINT_AT_EXIT): exit_output.hpp.
struct ExitOutputState {
  std::atomic<bool> exit_hook_registered{false};
  std::string exit_output_path;
  bool exit_print = false;
};

/// The Stopwatch's whole process-wide state. One per process (process_singleton).
struct StopwatchState : StopwatchCore,
                        ConfigState,
                        NameTable,
                        IterationLog,
                        GpuCollection,
                        Printer,
                        OneTimeLog,
                        RecordingState,
                        WorkerState,
                        ProgressState,
                        ExitOutputState {
  std::atomic<bool> fork_handlers{false};  // installed once per process

  void next_epoch() noexcept {
    // 0 and kDroppedRun are Slot::run's "not running" and "dropped", never an epoch.
    for (std::uint32_t e = epoch.fetch_add(1, std::memory_order_relaxed) + 1;
         e == 0 || e == kDroppedRun; e = epoch.fetch_add(1, std::memory_order_relaxed) + 1) {
    }
  }
  /// Iterations finished after warm-up (0 during warm-up).
  std::int64_t iterations_measured() const {
    const auto n = iter_gate().finished.load(std::memory_order_relaxed) -
                   iter_gate().warmup.load(std::memory_order_relaxed);
    return n > 0 ? n : 0;
  }

  // --- thread records (stopwatch_intervals.hpp) ---
  int count_running(ThreadRecord& rec, std::string* listed);
  /// finish_iter's check: false (after a usage error) where an interval still runs on this thread.
  bool nothing_running_here();

  // --- resources and GPU events of an interval (stopwatch_features.hpp) ---
  void end_samples(ThreadRecord& owner, Slot& run_slot, std::uint32_t id, bool measuring,
                   std::int64_t dt);

  // --- NVTX ranges (stopwatch_nvtx_ranges.hpp) ---
  void open_nvtx_range(Slot& s, std::uint32_t id);
  void close_nvtx_range(ThreadRecord& owner, Slot& run_slot, std::uint32_t id);
  void close_own_nvtx_range(Slot& s, std::uint32_t id, bool report);
  void close_nvtx_range_slow(ThreadRecord& owner, Slot& run_slot, std::uint32_t id);
  void close_nvtx_range_elsewhere(Slot& run_slot, std::uint32_t id);
  void nvtx_ranges_without_wrapper();
  void set_nvtx_ranges(bool on, bool from_env);

  // --- recording (stopwatch_recording.hpp) ---
  void ensure_ring(ThreadRecord& rec);
  void keep_exited(const IntervalRing& ring) noexcept;
  std::size_t iteration_ends_capacity() const;
  void set_recording(std::size_t capacity, bool from_env);
  /// set_recording's change itself, config_mutex held (no precedence rule applied).
  void set_record_capacity(std::size_t capacity) noexcept;
  Samples samples();

  // --- workers (stopwatch_workers.hpp) ---
  /// The parent, at enable: makes the worker share and points the gate into it; a worker that
  /// enables (a program of its own) leaves its parent's share first if it can.
  void start_worker_share(bool wanted);
  /// A worker that is a program of its own leaves the share where it measured nothing into it
  /// yet, and counts its own iterations from then on (`own_program`: also a process Python's
  /// multiprocessing started). True where it left.
  bool leave_worker_share(bool own_program);
  /// A process started with the parent's share in its environment (spawn, forkserver): attaches
  /// as a worker, measuring from now on. Once per process, at the first use of the Stopwatch.
  void attach_worker_share();
  /// Adds what the workers measured to a report (results()).
  template <class Merged>
  void merge_workers(Results& r, std::vector<std::unique_ptr<Merged>>& merged,
                     std::vector<std::vector<WorkerResult>>& per_name, std::uint32_t gen);
  /// A forked child that is a worker: drops what its parent measured.
  void worker_after_fork_in_child();

  // --- reports, the periodic print rule, the progress line (stopwatch_report.hpp) ---
  bool prints_after(std::int64_t finished);
  Results results(bool wait_for_gpu = true);
  void set_progress(ProgressMode mode, bool from_env);
  bool line_due(std::int64_t finished, std::int64_t now);
  void print_progress(std::int64_t finished, std::int64_t now);
  /// finish_iter's report: the progress line or the periodic report, where one is due.
  void report_after_iteration(std::int64_t finished, std::int64_t now);

  // --- the whole state (stopwatch_state.hpp) ---
  void reset();
  void before_fork();
  void after_fork_in_parent();
  void after_fork_in_child();
};

/// The process-wide state, whole (the implementation part's view of stopwatch_core()).
inline StopwatchState& stopwatch_state() {
  return static_cast<StopwatchState&>(stopwatch_core());
}
/// The whole state of which `core` is the hot part.
inline StopwatchState& whole(StopwatchCore& core) {
  return static_cast<StopwatchState&>(core);
}

}  // namespace detail
LAPTIME_END_NAMESPACE
