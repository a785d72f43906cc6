// laptime internals: the Stopwatch's process-wide state, whole, and everything the hot path leaves
// out of line: names, errors, features (resources, GPU events, recording), iteration ends, reports,
// fork handling. The implementation part: compiled once by src/laptime.cpp (the CMake target) or
// included by <laptime/laptime.hpp>; a translation unit that only times intervals includes
// stopwatch_hot.hpp instead.
#pragma once

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "laptime/config.hpp"
#include "laptime/cuda.hpp"
#include "laptime/detail/clock_impl.hpp"
#include "laptime/detail/env.hpp"
#include "laptime/detail/histogram.hpp"
#include "laptime/detail/nvtx_counters.hpp"
#include "laptime/detail/nvtx_measured.hpp"  // the NVTX ranges of set_nvtx_ranges, inlined
#include "laptime/detail/own_output.hpp"
#include "laptime/detail/process_singleton.hpp"
#include "laptime/detail/progress.hpp"
#include "laptime/detail/stopwatch_figures.hpp"
#include "laptime/detail/stopwatch_hot.hpp"
#include "laptime/detail/thread_registry.hpp"
#include "laptime/detail/verdict.hpp"
#include "laptime/detail/worker_share.hpp"
#include "laptime/error.hpp"
#include "laptime/nvtx.hpp"
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

struct OneTime {
  std::string name;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  bool running = true;
};

/// The settings the user's environment gave (configure_from_env; docs/configuration.md): they
/// override the code's enable() arguments, whichever call comes first.
struct EnvOverrides {
  bool off = false;  ///< LAPTIME_PROFILE=training or LAPTIME_STOPWATCH=0: enable() does nothing
  std::optional<int> warmup;
  std::optional<std::optional<int>> print_every;
  std::optional<bool> cuda_sync;
};

/// Where periodic and at-exit reports go: laptime::PrintFunction (stopwatch.hpp), spelled here.
using PrintFn = void (*)(const char* text, std::size_t size, void* user_data);

struct GpuAggregate {
  IntervalStats stats;
};

/// The Stopwatch's whole process-wide state: the hot part (StopwatchCore) and what configuration,
/// names, reports, GPU timing and recording keep. One per process (process_singleton).
struct StopwatchState : StopwatchCore {
  StopwatchState();

  // --- read by the rare branches of the hot path ---
  std::array<std::atomic<const std::string*>, LAPTIME_MAX_NAMES> names{};
  std::atomic<void*> gpu_stream{nullptr};

  // --- configuration (changed under config_mutex) ---
  std::mutex config_mutex;
  EnvOverrides env;
  bool code_configured = false;  // the code's own enable() arguments, before the overrides
  int code_warmup = 0;
  std::optional<int> code_print_every;
  bool code_cuda_sync = false;
  bool configured = false;  // the settings in force (cfg_*)
  int cfg_warmup = 0;
  std::optional<int> cfg_print_every;
  bool cfg_cuda_sync = false;
  std::atomic<int> print_every{0};  // 0: never
  std::atomic<bool> print_rank0_only{false};
  std::atomic<PrintFn> print_fn{nullptr};
  std::atomic<void*> print_user{nullptr};

  // --- names ---
  std::mutex names_mutex;
  std::unordered_map<std::string, std::uint32_t> name_ids;
  std::atomic<std::uint32_t> name_count{0};
  // The run-time limit on distinct names, <= LAPTIME_MAX_NAMES (the storage capacity): from
  // LAPTIME_MAX_NAMES in the environment at first use, else Stopwatch::set_max_names.
  std::atomic<std::uint32_t> max_names{LAPTIME_MAX_NAMES};
  bool max_names_from_env = false;

  std::mutex one_time_mutex;
  std::vector<OneTime> one_time;

  std::mutex gpu_mutex;
  std::unordered_map<std::uint32_t, std::unique_ptr<GpuAggregate>> gpu;

  std::mutex report_mutex;
  pid_t owner_pid = 0;
  RankInfo rank;
  std::string host;

  // --- interval recording (Stopwatch::enable_recording, LAPTIME_RECORD) ---
  std::atomic<std::size_t> record_capacity{0};  // 0: off
  bool record_from_env = false;                 // under config_mutex: the code's calls yield
  std::atomic<std::uint64_t> unrecorded{0};
  std::mutex iter_mutex;  // iteration ends: written by finish_iter, read by reports
  std::vector<std::pair<std::int64_t, std::int64_t>> iter_ends;
  std::size_t iter_next = 0;
  std::size_t iter_capacity = 0;
  // --- the loop's time, the verdict's data name, the progress line (detail/progress.hpp) ---
  LoopTimes loop;                            // under iter_mutex
  resources::Sample progress_cpu;            // under iter_mutex: the CPU at the last line
  std::int64_t progress_line_ns = 0;         // under iter_mutex: when the last line was printed
  std::string data_name;                     // under config_mutex; empty: the default rule
  bool data_name_from_env = false;           // under config_mutex: the code's calls yield
  bool progress_from_env = false;            // under config_mutex: the code's calls yield
  std::atomic<int> progress{0};              // ProgressMode
  std::atomic<std::int64_t> total_iters{0};  // 0: unknown
  bool line_open = false;  // under report_mutex: a rewritten line ends the terminal's output
  // A print function of laptime's own that writes this process's stdout (the Python module's
  // sys.stdout printer): the progress line may rewrite itself through it, never through a user's.
  std::atomic<PrintFn> stdout_print_fn{nullptr};

  // --- worker processes (detail/worker_share.hpp) ---
  WorkerShare share;
  std::atomic<bool> share_checked{false};  // attach_from_env tried (once per process)

  // --- NVTX ranges (Stopwatch::set_nvtx_ranges, LAPTIME_NVTX_RANGES): under config_mutex ---
  bool nvtx_ranges_from_env = false;  // the code's calls yield

  // --- exit output (LAPTIME_OUTPUT, LAPTIME_PRINT_AT_EXIT) ---
  std::atomic<bool> exit_hook_registered{false};
  std::string exit_output_path;
  bool exit_print = false;

  // --- operations ---
  // The rare branches of the hot path are declared again here: StopwatchCore's out-of-line
  // functions forward to these (below), which see the whole state.
  std::uint32_t intern(std::string_view name);
  const NameCacheEntry* lookup_slow(ThreadRecord& rec, std::string_view name);
  void prepare(Slot& s);
  // The rare branches of start/end (errors, CUDA sync, first use, after a reset, features), out
  // of line so that the hot functions keep a small frame.
  void start_running_error(std::string_view name);
  // `mark`: 0, or kDroppedRun where the interval's own end_meas may still come (it then ends
  // nothing, silently, as the end of any interval of an older period does).
  void drop_interval(Slot& s, std::uint32_t mark = 0) noexcept;
  void end_elsewhere(ThreadRecord& rec, Slot& mine, std::uint32_t id, std::string_view name,
                     std::int64_t t, unsigned feats);
  void sync_before_end(std::string_view name);
  void drop_stale(ThreadRecord& rec, Slot& s, std::uint32_t gen);
  void start_features(Slot& s, std::uint32_t id, unsigned feats, bool measuring);
  void end_features(ThreadRecord& owner, Slot& run_slot, std::uint32_t id, bool measuring,
                    std::int64_t dt);
  // end_features' resource window and GPU events (where the interval has them).
  void end_samples(ThreadRecord& owner, Slot& run_slot, std::uint32_t id, bool measuring,
                   std::int64_t dt);
  void open_nvtx_range(Slot& s, std::uint32_t id);
  void close_nvtx_range(ThreadRecord& owner, Slot& run_slot, std::uint32_t id);
  void close_own_nvtx_range(Slot& s, std::uint32_t id, bool report);
  void close_nvtx_range_slow(ThreadRecord& owner, Slot& run_slot, std::uint32_t id);
  void close_nvtx_range_elsewhere(Slot& run_slot, std::uint32_t id);
  void nvtx_ranges_without_wrapper();
  void set_nvtx_ranges(bool on, bool from_env);
  int count_running(ThreadRecord& rec, std::string* listed);
  void ensure_ring(ThreadRecord& rec);
  void record_interval(std::uint32_t id, std::int64_t t0, std::int64_t dt);
  void record_iteration_end(std::int64_t finished);
  void set_recording(std::size_t capacity, bool from_env);
  Samples samples();
  void next_epoch() noexcept {
    // 0 and kDroppedRun are Slot::run's "not running" and "dropped", never an epoch.
    for (std::uint32_t e = epoch.fetch_add(1, std::memory_order_relaxed) + 1;
         e == 0 || e == kDroppedRun; e = epoch.fetch_add(1, std::memory_order_relaxed) + 1) {
    }
  }
  void finish_iter();
  /// Iterations finished after warm-up (0 during warm-up).
  int iterations_measured() const {
    const auto n = iter_gate().finished.load(std::memory_order_relaxed) -
                   iter_gate().warmup.load(std::memory_order_relaxed);
    return n > 0 ? static_cast<int>(n) : 0;
  }
  std::size_t collect_gpu(bool wait);
  bool prints_after(std::int64_t finished);
  Results results(bool wait_for_gpu = true);
  RankInfo rank_info();
  void set_rank(int rank, int world_size);
  void print(const std::string& text, const char* what = "a report could not be printed");
  void set_data_name(std::string_view name, bool from_env);
  void set_progress(ProgressMode mode, bool from_env);
  bool line_due(std::int64_t finished, std::int64_t now);
  void print_progress(std::int64_t finished, std::int64_t now);
  /// Whether a rewritten progress line ends stdout now (then a report written there starts with
  /// a line end); forgets it.
  bool take_open_line() {
    std::lock_guard<std::mutex> lock(report_mutex);
    const bool open = line_open;
    line_open = false;
    return open;
  }
  void reset();
  void before_fork();
  void after_fork_in_parent();
  void after_fork_in_child();
  /// The parent, at enable: makes the worker share and points the gate into it; a worker that
  /// enables (a program of its own) leaves its parent's share first if it can.
  void start_worker_share(bool wanted);
  /// A process started with the parent's share in its environment (spawn, forkserver): attaches
  /// as a worker, measuring from now on. Once per process, at the first use of the Stopwatch.
  void attach_worker_share();
  /// Adds what the workers measured to a report (results()).
  template <class Merged>
  void merge_workers(Results& r, std::vector<std::unique_ptr<Merged>>& merged,
                     std::vector<std::vector<WorkerResult>>& per_name, std::uint32_t gen);
  std::atomic<bool> fork_handlers{false};  // installed once per process
};

/// The name limit LAPTIME_MAX_NAMES asks for (nullopt: unset), clamped to the capacity; a
/// malformed value is warned about once and ignored, one above the capacity is clamped.
inline std::optional<std::uint32_t> env_max_names() {
  const EnvInt n =
      read_env_int("LAPTIME_MAX_NAMES", env_value("LAPTIME_MAX_NAMES"), 1, LAPTIME_MAX_NAMES,
                   "is not a positive integer", "the compile-time capacity");
  if (!n.warning.empty()) warn_once("LAPTIME_MAX_NAMES", n.warning);
  if (!n.value) return std::nullopt;
  return static_cast<std::uint32_t>(*n.value);
}

inline StopwatchState::StopwatchState()
    : owner_pid(::getpid()), rank(detect_rank()), host(host_name()) {
  if (const auto n = env_max_names()) {
    max_names.store(*n, std::memory_order_relaxed);
    max_names_from_env = true;
  }
}

// A forked child (a DataLoader worker) gets a copy of this state, possibly while another thread
// is changing it. The locks that guard tables (configuration, names, GPU figures, one-time
// measurements; never held across a callback) are held across fork, in this order (results()
// nests one_time_mutex in gpu_mutex), so that the child gets them free and the tables whole. The
// report lock is held across the user's print function (which may wait for Python's GIL, held by
// the forking thread): it and the per-thread locks are re-armed in the child instead, where the
// threads that may have held them do not exist. The child may keep measuring on its own copy; it
// never prints or writes the parent's results at exit.
inline void StopwatchState::before_fork() {
  config_mutex.lock();
  names_mutex.lock();
  gpu_mutex.lock();
  one_time_mutex.lock();
}

inline void StopwatchState::after_fork_in_parent() {
  one_time_mutex.unlock();
  gpu_mutex.unlock();
  names_mutex.unlock();
  config_mutex.unlock();
}

inline void StopwatchState::after_fork_in_child() {
  one_time_mutex.unlock();
  gpu_mutex.unlock();
  names_mutex.unlock();
  config_mutex.unlock();
  new (&report_mutex) std::mutex();
  new (&iter_mutex) std::mutex();
  threads.after_fork_in_child(current_tid());
  threads.for_each([](ThreadRecord& r, long, bool) { new (&r.mutex) std::mutex(); });
  if (share.active()) {
    // A worker: what the parent measured is not its own. Its threads' next measurements make
    // slots in the region it claims (add_chunk); the names stay interned (same ids).
    share.after_fork_in_child();
    features.store(0, std::memory_order_relaxed);  // times only (docs/workers.md)
    threads.for_each([](ThreadRecord& r, long, bool) {
      for (auto& c : r.chunks) c.store(nullptr, std::memory_order_relaxed);
      r.cache.clear();
      r.running = 0;
    });
  }
}

inline void StopwatchState::start_worker_share(bool wanted) {
  if (share.is_worker() && share.leave_if_unused()) {
    IterationGate& g = own_gate;
    g.finished.store(0, std::memory_order_relaxed);
    gate.store(&g, std::memory_order_release);
  }
  if (share.active() || !wanted) return;
  if (share.create(own_gate)) gate.store(&share.header()->gate, std::memory_order_release);
}

inline void StopwatchState::attach_worker_share() {
  if (share_checked.exchange(true)) return;
  if (!share.attach_from_env()) return;
  std::lock_guard<std::mutex> lock(config_mutex);
  gate.store(&share.header()->gate, std::memory_order_release);
  configured = true;
  print_every.store(0, std::memory_order_relaxed);
  power.store(kEnabled, std::memory_order_release);
}

inline std::uint32_t StopwatchState::intern(std::string_view name) {
  std::lock_guard<std::mutex> lock(names_mutex);
  if (auto it = name_ids.find(std::string(name)); it != name_ids.end()) return it->second;
  const std::uint32_t id = name_count.load(std::memory_order_relaxed);
  if (id >= max_names.load(std::memory_order_relaxed)) return kNoName;
  auto [it, inserted] = name_ids.emplace(std::string(name), id);
  (void)inserted;
  names[id].store(&it->first, std::memory_order_release);  // node-based map: the key never moves
  name_count.store(id + 1, std::memory_order_release);
  return id;
}

// Out of line on purpose: keeps the hot path small.
inline const NameCacheEntry* StopwatchState::lookup_slow(ThreadRecord& rec, std::string_view name) {
  std::uint32_t id;
  const std::uint64_t hash = text_hash(name);
  if (const std::uint32_t* known = rec.known.find(name, hash)) {
    id = *known;
  } else {
    id = intern(name);
    if (id == kNoName) {
      usage_error("start_meas/end_meas",
                  "more than " + std::to_string(max_names.load(std::memory_order_relaxed)) +
                      " distinct measurement names (LAPTIME_MAX_NAMES); " + detail::quoted(name) +
                      " is not measured",
                  "max-names", "calls with names past LAPTIME_MAX_NAMES were not measured");
      return nullptr;
    }
    rec.known.insert(*names[id].load(std::memory_order_acquire), hash, id);
  }
  Slot& slot = rec.slot(id);
  const std::string* interned = names[id].load(std::memory_order_acquire);
  return &rec.cache.insert(name, interned->data(), &slot);
}

inline void StopwatchState::prepare(Slot& s) {
  // The histogram is allocated here, on the first start on this thread, so end_meas never
  // allocates; a worker's pair gets it from its region of the shared file (or is counted there).
  if (share.is_worker()) share.admit_pair(s, *names[s.id].load(std::memory_order_acquire));
  s.stats.allocate();
  s.generation.store(iter_gate().generation.load(std::memory_order_relaxed),
                     std::memory_order_release);
  s.prepared = true;
}

inline void StopwatchState::start_running_error(std::string_view name) {
  usage_error("start_meas(" + detail::quoted(name) + ")",
              detail::quoted(name) +
                  " is already running on this thread (end it with end_meas first; other "
                  "threads may time the same name at the same time)");
}

// An interval that will never be ended: its GPU events go back to the pool untimed.
inline void StopwatchState::drop_interval(Slot& s, std::uint32_t mark) noexcept {
  s.run.store(mark, std::memory_order_relaxed);
  s.sampled.store(false, std::memory_order_relaxed);
  // Called by the slot's own thread: its NVTX range closes now (where the order check allows).
  if (s.nvtx.load(std::memory_order_relaxed) != kNvtxRangeNone) {
    try {
      close_own_nvtx_range(s, s.id, /*report=*/false);
    } catch (...) {  // an allocation of the wrapper's first use on this thread: the range stays
    }
  }
  const std::uint32_t token =
      s.gpu_token.exchange(cuda::GpuEventTimer::kInvalid, std::memory_order_relaxed);
  if (token != cuda::GpuEventTimer::kInvalid) cuda::GpuEventTimer::instance().cancel(token);
}

inline void StopwatchState::start_features(Slot& s, std::uint32_t id, unsigned feats,
                                           bool measuring) {
  // First: the range encloses all the Stopwatch does for the interval (docs/nvtx.md).
  s.sampled.store(false, std::memory_order_relaxed);
  if (feats & kFeatNvtx) {
    open_nvtx_range(s, id);
    if (LAPTIME_LIKELY(feats == kFeatNvtx)) {  // the NVTX ranges alone: none of the rest
      s.start_ns.store(now_ns(), std::memory_order_relaxed);
      return;
    }
  }
  if (feats & kFeatRecord) ensure_ring(threads.local());
  const std::uint8_t flags = name_flags[id].load(std::memory_order_relaxed);
  if ((feats & kFeatGpuTiming) || ((feats & kFeatGpuNames) && (flags & kNameGpu))) {
    s.gpu_token.store(
        cuda::GpuEventTimer::instance().start(gpu_stream.load(std::memory_order_relaxed)),
        std::memory_order_relaxed);
  }
  // The sync comes right before the start timestamp (docs/stopwatch.md); the resource sample after
  // it, so that the interval's time encloses its samples as a timer around start_meas..end_meas
  // does.
  if ((feats & kFeatCudaSync) && measuring) cuda::synchronize();
  s.start_ns.store(now_ns(), std::memory_order_relaxed);
  if ((feats & kFeatTracked) && (flags & kNameTracked)) {
    ResourceSlot* r = s.resources.load(std::memory_order_relaxed);
    if (r == nullptr) s.resources.store(r = new ResourceSlot(), std::memory_order_release);
    r->start = resources::sample();
    s.sampled.store(true, std::memory_order_relaxed);
  }
}

// Sync before the end timestamp, for intervals that synced at their start (after warm-up).
// Decided per interval; end() only knows whether syncing is configured at all.
inline void StopwatchState::sync_before_end(std::string_view name) {
  ThreadRecord& rec = threads.local();
  if (const NameCacheEntry* e = lookup(rec, name)) {
    if (e->value->run.load(std::memory_order_relaxed) == epoch.load(std::memory_order_relaxed) &&
        e->value->measuring.load(std::memory_order_relaxed)) {
      cuda::synchronize();
    }
  }
}

// end_meas(name) of an interval not running on this thread in this epoch (docs/stopwatch.md):
//   - one of an older epoch runs here: it is dropped, silently;
//   - exactly one runs on another thread: this call ends it (the seed allowed a start in one
//     callback and the end in another). The interval is claimed with a compare-exchange, added to
//     this thread's statistics, and its resource window and GPU events closed for its owner;
//   - none or several: a usage error.
// The owner's own end_meas does not compare-exchange (it would cost a locked instruction on every
// pair): two threads that end one interval at the same moment may both count it.
inline void StopwatchState::end_elsewhere(ThreadRecord& rec, Slot& mine, std::uint32_t id,
                                          std::string_view name, std::int64_t t, unsigned feats) {
  const std::uint32_t ep = epoch.load(std::memory_order_relaxed);
  if (mine.run.load(std::memory_order_relaxed) != 0) {
    drop_interval(mine);
    return;
  }
  ThreadRecord* owner = nullptr;
  Slot* found = nullptr;
  int others = 0;
  threads.for_each([&](ThreadRecord& other, long, bool alive) {
    if (&other == &rec || !alive) return;
    Slot* c = other.chunks[id / kChunk].load(std::memory_order_acquire);
    if (c == nullptr || c[id % kChunk].run.load(std::memory_order_acquire) != ep) return;
    ++others;
    owner = &other;
    found = &c[id % kChunk];
  });
  if (others == 1) {
    std::uint32_t expected = ep;
    if (found->run.compare_exchange_strong(expected, 0, std::memory_order_acq_rel)) {
      if (LAPTIME_UNLIKELY(!mine.prepared)) prepare(mine);
      add_interval(*owner, *found, mine, id, t, feats);
      return;
    }
    others = 0;  // its own thread ended it meanwhile
  }
  usage_error("end_meas(" + detail::quoted(name) + ")",
              others == 0 ? detail::quoted(name) + " is not running (no start_meas(" +
                                detail::quoted(name) + ") on any thread, or it already ended)"
                          : detail::quoted(name) + " is not running on this thread and runs on " +
                                std::to_string(others) +
                                " other threads (end it on the thread that started it)");
}

// reset() since this thread last wrote to the slot: its statistics belong to the old generation.
inline void StopwatchState::drop_stale(ThreadRecord& rec, Slot& s, std::uint32_t gen) {
  s.stats.clear();
  if (ResourceSlot* r = s.resources.load(std::memory_order_relaxed)) {
    std::lock_guard<std::mutex> lock(rec.mutex);
    r->usage = resources::Usage();
  }
  s.generation.store(gen, std::memory_order_release);  // after the clear, for reports
}

inline void StopwatchState::end_features(ThreadRecord& owner, Slot& run_slot, std::uint32_t id,
                                         bool measuring, std::int64_t dt) {
  // Resources and GPU events only where the interval has some (plain loads decide): the NVTX
  // ranges alone pay no locked instruction and no large frame. The range closes last, so that it
  // encloses the rest; that may be a usage error (an order check), after the interval counted.
  if (LAPTIME_UNLIKELY(run_slot.sampled.load(std::memory_order_relaxed) ||
                       run_slot.gpu_token.load(std::memory_order_relaxed) !=
                           cuda::GpuEventTimer::kInvalid)) {
    end_samples(owner, run_slot, id, measuring, dt);
  }
  // A tail call: the common case (NVTX ranges alone) builds no frame here.
  if (run_slot.nvtx.load(std::memory_order_acquire) != kNvtxRangeNone) {
    close_nvtx_range(owner, run_slot, id);
  }
}

LAPTIME_NOINLINE inline void StopwatchState::end_samples(ThreadRecord& owner, Slot& run_slot,
                                                         std::uint32_t id, bool measuring,
                                                         std::int64_t dt) {
  if (run_slot.sampled.exchange(false, std::memory_order_relaxed)) {
    ResourceSlot* r = run_slot.resources.load(std::memory_order_acquire);  // end: add_interval's
    if (measuring) {
      std::lock_guard<std::mutex> lock(owner.mutex);
      r->usage.add(r->start, r->end, static_cast<std::uint64_t>(dt));
    }
#if LAPTIME_ENABLED
    // The interval's figures on the profiler's timeline, warm-up included (enable_nvtx_counters).
    nvtx_counters_interval_end(id, names[id], r->start, r->end, dt);
#endif
  }
  const std::uint32_t token =
      run_slot.gpu_token.exchange(cuda::GpuEventTimer::kInvalid, std::memory_order_relaxed);
  if (token != cuda::GpuEventTimer::kInvalid) {
    // tag: bit 63 = discard (warm-up), bits 32..62 = generation, bits 0..31 = name id
    const std::uint64_t tag =
        (measuring ? 0 : (std::uint64_t{1} << 63)) |
        (std::uint64_t{iter_gate().generation.load(std::memory_order_relaxed) & 0x7fffffffu}
         << 32) |
        id;
    cuda::GpuEventTimer::instance().stop(token, gpu_stream.load(std::memory_order_relaxed), tag);
  }
}

// ---- NVTX ranges (Stopwatch::set_nvtx_ranges; docs/nvtx.md "Stopwatch intervals as ranges") -----
// Each interval is an NVTX range of the name's text, through the NVTX wrapper (its domain, colours,
// registered strings, syncs, range stack and order checks), while the wrapper is enabled:
//   - a push at start_meas, a pop at end_meas on the same thread: ranges nest with each other and
//     with range_push/range_pop (with order tracking, an end_meas whose range is not the innermost
//     is a usage error after the interval was counted; nothing is popped);
//   - a name whose interval once ended on another thread (kNameNvtxCross) uses start/end ranges
//     from then on (nvtxDomainRangeStartEx/RangeEnd: not tied to a thread's stack), started by
//     the starting thread and ended by whichever thread ends the interval;
//   - that first interval was pushed on its starting thread, whose stack only that thread may pop:
//     the ending thread marks it owed (kNvtxRangeOwed), and the starting thread pops it at its next
//     start_meas of that name (with order tracking: if it is then the innermost range; otherwise
//     it stays open, with a one-time warning). On the timeline that one range ends late.
//   - an interval dropped (of an older enable/reset period) closes its range when it is dropped.

#if LAPTIME_ENABLED
LAPTIME_ALWAYS_INLINE void StopwatchState::open_nvtx_range(Slot& s, std::uint32_t id) {
  // A range left open: owed by an interval that ended elsewhere, or of a dropped interval.
  if (LAPTIME_UNLIKELY(s.nvtx.load(std::memory_order_acquire) != kNvtxRangeNone)) {
    close_own_nvtx_range(s, id, /*report=*/false);
  }
  // Quiet (no profiler attached, no sync, no order tracking): NVTX would drop the range.
  if (LAPTIME_LIKELY(NvtxCore::quiet(nvtx_core().state.load(std::memory_order_relaxed)))) return;
  const bool start_end = (name_flags[id].load(std::memory_order_relaxed) & kNameNvtxCross) != 0;
  std::uint64_t range = 0;
  const std::uint32_t opened = nvtx_measured_open(
      nvtx_state(), *names[id].load(std::memory_order_acquire), &s.nvtx_name, start_end, &range);
  if (LAPTIME_UNLIKELY(opened == 0)) {
    nvtx_ranges_without_wrapper();
    return;
  }
  s.nvtx_range.store(range, std::memory_order_relaxed);
  s.nvtx_state.store(opened, std::memory_order_relaxed);
  s.nvtx.store(start_end ? kNvtxRangeStarted : kNvtxRangePushed, std::memory_order_release);
}

LAPTIME_NOINLINE LAPTIME_COLD inline void StopwatchState::nvtx_ranges_without_wrapper() {
  warn_once("stopwatch-nvtx-off",
            "Stopwatch NVTX ranges are on, but the NVTX wrapper is not enabled "
            "(NVTXRangeWrapper::enable, LAPTIME_NVTX=1): no range is sent until it is");
}

// The slot's own thread closes its range. A load and a store, no locked instruction: another
// thread only turns Pushed into Owed (the owner pops either way, once) or ends a Started range at
// the same moment as its owner (then both end it, as both count the interval: end_elsewhere).
LAPTIME_NOINLINE inline void StopwatchState::close_own_nvtx_range(Slot& s, std::uint32_t id,
                                                                  bool report) {
  const std::uint8_t how = s.nvtx.load(std::memory_order_acquire);
  s.nvtx.store(kNvtxRangeNone, std::memory_order_relaxed);
  const std::uint32_t opened = s.nvtx_state.load(std::memory_order_relaxed);
  if (how == kNvtxRangeStarted) {
    nvtx_measured_end(nvtx_state(), opened, s.nvtx_range.load(std::memory_order_relaxed));
  } else if (how == kNvtxRangePushed || how == kNvtxRangeOwed) {
    const std::string& text = *names[id].load(std::memory_order_acquire);
    // An owed range is popped without an error: its end_meas already came, on another thread.
    if (!nvtx_measured_pop(nvtx_state(), opened, text, s.nvtx_name.load(std::memory_order_relaxed),
                           report && how == kNvtxRangePushed) &&
        how == kNvtxRangeOwed) {
      warn_once("stopwatch-nvtx-owed",
                "Stopwatch NVTX range " + detail::quoted(text) +
                    " ended on another thread while ranges pushed after it were still open on its "
                    "starting thread; that range stays open there");
    }
  }
}

// At the end of an interval (end_features), on the thread that ends it. The common case (a range
// this thread pushed, the wrapper's state unchanged, no order tracking, no sync) is a few loads, a
// store and NVTX's pop, with no frame: every other case is a tail call to close_nvtx_range_slow.
LAPTIME_NOINLINE inline void StopwatchState::close_nvtx_range(ThreadRecord& owner, Slot& run_slot,
                                                              std::uint32_t id) {
  const NvtxCore* core = nvtx_core_pointer().load(std::memory_order_acquire);
  if (LAPTIME_LIKELY(threads.find_local() == &owner && core != nullptr &&
                     run_slot.nvtx.load(std::memory_order_acquire) == kNvtxRangePushed)) {
    const std::uint32_t st = core->state.load(std::memory_order_acquire);
    if (LAPTIME_LIKELY(st == run_slot.nvtx_state.load(std::memory_order_relaxed) &&
                       (st & (NvtxCore::kTrack | NvtxCore::kSyncPop)) == 0)) {
      run_slot.nvtx.store(kNvtxRangeNone, std::memory_order_relaxed);
      nvtx_api::pop(core->domain.load(std::memory_order_relaxed));
      return;
    }
  }
  close_nvtx_range_slow(owner, run_slot, id);
}

LAPTIME_NOINLINE inline void StopwatchState::close_nvtx_range_slow(ThreadRecord& owner,
                                                                   Slot& run_slot,
                                                                   std::uint32_t id) {
  if (LAPTIME_LIKELY(&owner == &threads.local())) {
    if (LAPTIME_LIKELY(run_slot.nvtx.load(std::memory_order_acquire) == kNvtxRangePushed)) {
      run_slot.nvtx.store(kNvtxRangeNone, std::memory_order_relaxed);
      (void)nvtx_measured_pop(nvtx_state(), run_slot.nvtx_state.load(std::memory_order_relaxed),
                              *names[id].load(std::memory_order_acquire),
                              run_slot.nvtx_name.load(std::memory_order_relaxed), true);
      return;
    }
    close_own_nvtx_range(run_slot, id, /*report=*/true);
    return;
  }
  close_nvtx_range_elsewhere(run_slot, id);
}

// Ended on another thread: from now on the name's intervals are start/end ranges.
LAPTIME_NOINLINE inline void StopwatchState::close_nvtx_range_elsewhere(Slot& run_slot,
                                                                        std::uint32_t id) {
  name_flags[id].fetch_or(kNameNvtxCross, std::memory_order_relaxed);
  std::uint8_t how = run_slot.nvtx.load(std::memory_order_acquire);
  if (how == kNvtxRangeStarted) {
    const std::uint32_t opened = run_slot.nvtx_state.load(std::memory_order_relaxed);
    const std::uint64_t range = run_slot.nvtx_range.load(std::memory_order_relaxed);
    if (run_slot.nvtx.compare_exchange_strong(how, kNvtxRangeNone, std::memory_order_acq_rel)) {
      nvtx_measured_end(nvtx_state(), opened, range);
    }
  } else if (how == kNvtxRangePushed) {
    // Only its own thread may pop it: owed (a compare-exchange, as its owner may be closing it).
    run_slot.nvtx.compare_exchange_strong(how, kNvtxRangeOwed, std::memory_order_acq_rel);
  }
}
#else
// Compiled out (LAPTIME_DISABLE): no NVTX, and no feature bit is ever set.
LAPTIME_ALWAYS_INLINE void StopwatchState::open_nvtx_range(Slot&, std::uint32_t) {}
inline void StopwatchState::nvtx_ranges_without_wrapper() {}
inline void StopwatchState::close_own_nvtx_range(Slot&, std::uint32_t, bool) {}
inline void StopwatchState::close_nvtx_range(ThreadRecord&, Slot&, std::uint32_t) {}
inline void StopwatchState::close_nvtx_range_slow(ThreadRecord&, Slot&, std::uint32_t) {}
inline void StopwatchState::close_nvtx_range_elsewhere(Slot&, std::uint32_t) {}
#endif  // LAPTIME_ENABLED

/// Stopwatch::set_nvtx_ranges (from_env: LAPTIME_NVTX_RANGES or the profiling profile, which the
/// code's calls yield to, docs/configuration.md).
inline void StopwatchState::set_nvtx_ranges(bool on, bool from_env) {
  std::lock_guard<std::mutex> lock(config_mutex);
  if (nvtx_ranges_from_env && !from_env) return;
  nvtx_ranges_from_env = nvtx_ranges_from_env || from_env;
  if (on) {
    features.fetch_or(kFeatNvtx, std::memory_order_relaxed);
  } else {
    features.fetch_and(~kFeatNvtx, std::memory_order_relaxed);
  }
}

/// How many intervals run on `rec` in this epoch (their names appended to `listed` when given);
/// drops those of older epochs and makes rec.running exact.
LAPTIME_NOINLINE inline int StopwatchState::count_running(ThreadRecord& rec, std::string* listed) {
  const std::uint32_t ep = epoch.load(std::memory_order_relaxed);
  const std::uint32_t n = name_count.load(std::memory_order_acquire);
  int count = 0;
  for (std::uint32_t id = 0; id < n; ++id) {
    Slot* c = rec.chunks[id / kChunk].load(std::memory_order_relaxed);
    if (c == nullptr) continue;
    const std::uint32_t r = c[id % kChunk].run.load(std::memory_order_relaxed);
    if (r == 0) continue;
    if (r != ep) {
      if (r != kDroppedRun) drop_interval(c[id % kChunk], kDroppedRun);
      continue;
    }
    ++count;
    if (listed != nullptr) {
      if (!listed->empty()) *listed += ", ";
      *listed += detail::quoted(*names[id].load(std::memory_order_acquire));
    }
  }
  rec.running = count;
  return count;
}

/// The calling thread's ring, (re)allocated here (start_features, a slow path) when recording is
/// on and the thread has none of the current capacity: end_meas never allocates.
LAPTIME_NOINLINE inline void StopwatchState::ensure_ring(ThreadRecord& rec) {
  const std::size_t cap = record_capacity.load(std::memory_order_relaxed);
  IntervalRing* r = rec.ring.load(std::memory_order_relaxed);
  if (cap == 0 || (r != nullptr && r->capacity == cap)) return;
  std::unique_ptr<IntervalRing> fresh = make_interval_ring(cap);
  if (fresh == nullptr) {  // no memory: recording off, never an exception from start_meas
    features.fetch_and(~kFeatRecord, std::memory_order_relaxed);
    return warn_once("record-memory", "recording off: no memory for the last " +
                                          std::to_string(cap) + " intervals of a thread");
  }
  char name[32] = {};
  if (::pthread_getname_np(::pthread_self(), name, sizeof name) == 0) fresh->thread_name = name;
  fresh->tid = rec.tid;
  std::lock_guard<std::mutex> lock(rec.mutex);  // rec.rings: also read by reports
  rec.ring.store(fresh.get(), std::memory_order_release);
  rec.rings.push_back(std::move(fresh));
}

// Out of line: the recording cost stays off the plain pair. The interval goes to the ring of the
// thread that ends it (each ring has one writer); it belongs to the iteration in which it ends.
inline void StopwatchState::record_interval(std::uint32_t id, std::int64_t t0, std::int64_t dt) {
  IntervalRing* r = threads.local().ring.load(std::memory_order_relaxed);
  if (LAPTIME_UNLIKELY(r == nullptr)) {  // this thread started nothing since recording began
    unrecorded.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const std::uint64_t gen = iter_gate().generation.load(std::memory_order_relaxed);
  r->push(std::uint64_t{id} | (gen << 32), t0, dt,
          iter_gate().finished.load(std::memory_order_relaxed));
}

inline void StopwatchState::record_iteration_end(std::int64_t finished) {
  const std::size_t cap = record_capacity.load(std::memory_order_relaxed);
  if (cap == 0) return;
  const std::int64_t t = now_ns();
  std::lock_guard<std::mutex> lock(iter_mutex);
  if (iter_capacity != cap) {  // recording (re)started with another capacity
    iter_ends.clear();
    iter_next = 0;
    iter_capacity = cap;
  }
  if (iter_ends.size() < cap) {
    iter_ends.emplace_back(finished - 1, t);
  } else {
    iter_ends[iter_next] = {finished - 1, t};
    iter_next = iter_next + 1 == cap ? 0 : iter_next + 1;
  }
}

inline void StopwatchState::set_recording(std::size_t capacity, bool from_env) {
  std::lock_guard<std::mutex> lock(config_mutex);
  if (record_from_env && !from_env)
    return;  // the user's LAPTIME_RECORD wins (docs/configuration.md)
  record_from_env = record_from_env || from_env;
  record_capacity.store(capacity, std::memory_order_relaxed);
  if (capacity > 0) {
    features.fetch_or(kFeatRecord, std::memory_order_relaxed);
  } else {
    features.fetch_and(~kFeatRecord, std::memory_order_relaxed);
  }
}

/// What the rings hold now, of this generation (since the last reset()).
inline Samples StopwatchState::samples() {
  Samples out;
  out.capacity = record_capacity.load(std::memory_order_relaxed);
  out.unrecorded = unrecorded.load(std::memory_order_relaxed);
  const std::uint32_t gen = iter_gate().generation.load(std::memory_order_relaxed);
  const std::uint32_t n = name_count.load(std::memory_order_acquire);
  std::vector<std::uint32_t> index(n, kNoName);  // name id -> index into out.names
  auto add = [&](const IntervalRing* r, bool alive) {
    if (r == nullptr) return;
    ThreadSamples ts;
    ts.tid = r->tid;
    ts.name = r->thread_name;
    if (alive) {  // the name may have been set after the ring was allocated
      const std::string path = "/proc/self/task/" + std::to_string(ts.tid) + "/comm";
      if (std::FILE* f = std::fopen(path.c_str(), "r")) {
        char buf[64] = {};
        if (std::fgets(buf, sizeof buf, f) != nullptr) {
          ts.name = buf;
          while (!ts.name.empty() && ts.name.back() == '\n') ts.name.pop_back();
        }
        std::fclose(f);
      }
    }
    r->read([&](std::uint64_t name_gen, std::int64_t start, std::int64_t dur, std::int64_t it) {
      const auto id = static_cast<std::uint32_t>(name_gen & 0xffffffffu);
      if (static_cast<std::uint32_t>(name_gen >> 32) != gen || id >= n) return;  // before reset
      if (index[id] == kNoName) {
        index[id] = static_cast<std::uint32_t>(out.names.size());
        out.names.push_back(*names[id].load(std::memory_order_acquire));
      }
      ts.intervals.push_back({index[id], start, dur, it});
    });
    if (!ts.intervals.empty()) out.threads.push_back(std::move(ts));
  };
  threads.for_each([&](ThreadRecord& rec, long, bool alive) {
    std::lock_guard<std::mutex> lock(rec.mutex);  // rec.rings, thread names
    add(rec.retired, false);
    add(rec.ring.load(std::memory_order_acquire), alive);
  });
  {
    std::lock_guard<std::mutex> lock(iter_mutex);
    const std::size_t k = iter_ends.size();
    const std::size_t first = iter_next;  // oldest first (0 until the ring wraps)
    for (std::size_t i = 0; i < k; ++i) out.iteration_ends.push_back(iter_ends[(first + i) % k]);
  }
  return out;
}

inline void StopwatchState::finish_iter() {
  ThreadRecord& rec = threads.local();
  if (LAPTIME_UNLIKELY(rec.running > 0) && count_running(rec, nullptr) > 0) {
    std::string running;
    (void)count_running(rec, &running);
    usage_error("finish_iter()", "measurement still running on this thread: " + running +
                                     " (end it before finishing the iteration; measurements "
                                     "running on other threads are fine)");
    return;
  }
  // A worker's iterations are its parent's (the shared gate): it does not count its own.
  if (share.is_worker()) return;
  if (share.regions_short()) share.reap();
  const std::int64_t finished = iter_gate().finished.fetch_add(1, std::memory_order_relaxed) + 1;
  const std::int64_t now = now_ns();
  {
    std::lock_guard<std::mutex> lock(iter_mutex);
    loop.add(now, finished > iter_gate().warmup.load(std::memory_order_relaxed));
  }
  if (features.load(std::memory_order_relaxed) & kFeatRecord) record_iteration_end(finished);
  if (NVTXRangeWrapper::instance().is_enabled()) {
    char text[48];
    std::snprintf(text, sizeof text, "iteration %lld", static_cast<long long>(finished));
    NVTXRangeWrapper::instance().mark(text);
  }
  if (features.load(std::memory_order_relaxed) & (kFeatGpuTiming | kFeatGpuNames)) {
    collect_gpu(false);
  }
  const auto mode = static_cast<ProgressMode>(progress.load(std::memory_order_relaxed));
  if (mode == ProgressMode::Line) {
    if (line_due(finished, now)) print_progress(finished, now);
  } else if (mode == ProgressMode::Report && prints_after(finished)) {
    print(results(/*wait_for_gpu=*/false).to_text());
  }
}

// The progress line follows the periodic-print rule; without print_every_n_iters it is refreshed
// at most twice a second (after warm-up, on rank 0 where printing is limited to it).
inline bool StopwatchState::line_due(std::int64_t finished, std::int64_t now) {
  if (print_every.load(std::memory_order_relaxed) > 0) return prints_after(finished);
  if (finished - iter_gate().warmup.load(std::memory_order_relaxed) <= 0) return false;
  {
    std::lock_guard<std::mutex> lock(iter_mutex);
    if (progress_line_ns != 0 && now - progress_line_ns < 500000000) return false;
  }
  return !print_rank0_only.load(std::memory_order_relaxed) || rank_info().rank == 0;
}

inline void StopwatchState::print_progress(std::int64_t finished, std::int64_t now) {
  ProgressFigures f;
  f.finished = finished;
  if (const std::int64_t total = total_iters.load(std::memory_order_relaxed); total > 0) {
    f.total = total;
  }
  const resources::Sample cpu = resources::sample();  // the process tree: a /proc read
  {
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
  const std::string line = progress_line(f);
  std::lock_guard<std::mutex> lock(report_mutex);
  const PrintFn fn = print_fn.load();
  // A user's print function gets plain lines; laptime's own printers write this process's stdout.
  const bool user_fn = fn != nullptr && fn != stdout_print_fn.load();
  const bool rewrite =
      rewrites_line(::isatty(::fileno(stdout)) == 1, user_fn, env_raw("TERM"), env_raw("CI"));
  const std::string text = rewrite ? "\r" + line + "\x1b[K" : line + "\n";
  line_open = rewrite;
  if (fn != nullptr) {
    fn(text.data(), text.size(), print_user.load());
  } else {
    print_own_output(stdout, text, "the progress line could not be printed");
  }
}

inline void StopwatchState::set_data_name(std::string_view name, bool from_env) {
  std::lock_guard<std::mutex> lock(config_mutex);
  if (data_name_from_env && !from_env)
    return;  // the user's LAPTIME_DATA_NAME wins (docs/configuration.md)
  data_name_from_env = data_name_from_env || from_env;
  data_name = std::string(name);
}

inline void StopwatchState::set_progress(ProgressMode mode, bool from_env) {
  std::lock_guard<std::mutex> lock(config_mutex);
  if (progress_from_env && !from_env)
    return;  // the user's LAPTIME_PROGRESS wins (docs/configuration.md)
  progress_from_env = progress_from_env || from_env;
  progress.store(static_cast<int>(mode), std::memory_order_relaxed);
}

// The one home of the periodic-print rule (docs/stopwatch.md): every n measured iterations, n > 0
// (0: never), and only on rank 0 when printing is limited to it.
inline bool StopwatchState::prints_after(std::int64_t finished) {
  const int every = print_every.load(std::memory_order_relaxed);
  const std::int64_t measured = finished - iter_gate().warmup.load(std::memory_order_relaxed);
  if (every <= 0 || measured <= 0 || measured % every != 0) return false;
  return !print_rank0_only.load(std::memory_order_relaxed) || rank_info().rank == 0;
}

/// Resolves finished GPU event pairs into the per-name GPU statistics; returns how many pend.
inline std::size_t StopwatchState::collect_gpu(bool wait) {
  const std::uint32_t gen = iter_gate().generation.load(std::memory_order_relaxed) & 0x7fffffffu;
  auto on_done = [&](std::uint64_t tag, std::uint64_t gpu_ns) {
    if (tag >> 63) return;                           // ended during warm-up
    if (((tag >> 32) & 0x7fffffffu) != gen) return;  // before a reset()
    const auto id = static_cast<std::uint32_t>(tag & 0xffffffffu);
    std::lock_guard<std::mutex> lock(gpu_mutex);
    auto& agg = gpu[id];
    if (!agg) agg = std::make_unique<GpuAggregate>();
    agg->stats.add(gpu_ns);
  };
  auto& timer = cuda::GpuEventTimer::instance();
  if (wait) {
    timer.drain(on_done);
    return 0;
  }
  return timer.poll(on_done);
}

inline void StopwatchState::print(const std::string& report, const char* what) {
  std::lock_guard<std::mutex> lock(report_mutex);
  // Below a rewritten progress line, not over it.
  const std::string& text = line_open ? "\n" + report : report;
  line_open = false;
  if (PrintFn fn = print_fn.load()) {
    fn(text.data(), text.size(), print_user.load());
  } else {
    print_own_output(stdout, text, what);
  }
}

inline RankInfo StopwatchState::rank_info() {
  std::lock_guard<std::mutex> lock(config_mutex);
  return rank;
}

inline void StopwatchState::set_rank(int new_rank, int world_size) {
  std::lock_guard<std::mutex> lock(config_mutex);
  rank.rank = new_rank;
  rank.world_size = world_size > new_rank ? world_size : new_rank + 1;
  rank.source = "set_rank";
}

// What every worker measured (live ones read in place, ended ones folded), merged into the
// per-name figures, and kept per worker. A name only workers used is interned here.
template <class Merged>
void StopwatchState::merge_workers(Results& r, std::vector<std::unique_ptr<Merged>>& merged,
                                   std::vector<std::vector<WorkerResult>>& per_name,
                                   std::uint32_t gen) {
  struct PerWorker {
    long pid;
    std::string label;
    bool alive;
    std::unique_ptr<IntervalStats> stats;
  };
  std::vector<std::vector<PerWorker>> found;
  std::vector<long> pids;
  const WorkerShare::Missing missing =
      share.for_each_worker_name(gen, [&](std::string_view name, const WorkerFigures& w) {
        const std::uint32_t id = intern(name);
        if (id == kNoName) return;
        while (merged.size() <= id) merged.push_back(std::make_unique<Merged>());
        if (found.size() <= id) found.resize(id + 1);
        name_flags[id].fetch_or(kNameSeen, std::memory_order_relaxed);
        merged[id]->stats.merge_from(*w.stats, w.where);
        auto& list = found[id];
        auto it = std::find_if(list.begin(), list.end(),
                               [&](const PerWorker& p) { return p.pid == w.pid; });
        if (it == list.end()) {
          list.push_back({w.pid, std::string(w.label), w.alive, std::make_unique<IntervalStats>()});
          it = list.end() - 1;
        }
        it->stats->merge_from(*w.stats, w.where);
        if (std::find(pids.begin(), pids.end(), w.pid) == pids.end()) {
          pids.push_back(w.pid);
          if (w.alive) ++r.workers_alive;
        }
      });
  r.worker_processes = static_cast<int>(pids.size());
  r.workers_unrecorded = static_cast<int>(missing.unclaimed);
  r.workers_pairs_dropped = missing.pairs_dropped;
  per_name.resize(found.size());
  for (std::size_t id = 0; id < found.size(); ++id) {
    for (const PerWorker& p : found[id]) {
      const IntervalStats& st = *p.stats;
      per_name[id].push_back(WorkerResult{
          p.pid, p.label, p.alive, st.count(), static_cast<double>(st.total_ns()), st.mean_ns(),
          st.quantile_ns(0.5), st.quantile_ns(0.9), static_cast<double>(st.max_ns())});
    }
  }
}

/// A snapshot of everything measured. With `wait_for_gpu` (every report but the periodic one in
/// finish_iter) it first waits for the GPU to finish the intervals already ended, so that their
/// GPU times are in it; without, GPU times still pending are counted per name.
inline Results StopwatchState::results(bool wait_for_gpu) {
  Results r;
  const RankInfo ri = rank_info();
  r.rank = ri.rank;
  r.world_size = ri.world_size;
  r.pid = static_cast<long>(::getpid());
  r.host = host;
  std::string chosen_data_name;
  {
    std::lock_guard<std::mutex> lock(config_mutex);
    chosen_data_name = data_name;
  }
  {
    std::string c = clock_description();  // "clock: tsc 2.60 GHz"
    r.clock = c.rfind("clock: ", 0) == 0 ? c.substr(7) : c;
  }
  r.warnings = repeated_warnings();
  r.num_warmup_iters = iter_gate().warmup.load(std::memory_order_relaxed);
  r.iterations_finished = iter_gate().finished.load(std::memory_order_relaxed);
  r.iterations_measured = std::max<std::int64_t>(0, r.iterations_finished - r.num_warmup_iters);
  const std::uint32_t gen = iter_gate().generation.load(std::memory_order_relaxed);
  const std::uint32_t ep = epoch.load(std::memory_order_relaxed);
  const std::uint32_t n = name_count.load(std::memory_order_acquire);

  struct Merged {
    IntervalStats stats;
    int running = 0;
    std::optional<resources::Usage> usage;
  };
  std::vector<std::unique_ptr<Merged>> merged(n);
  for (auto& m : merged) m = std::make_unique<Merged>();
  threads.for_each([&](ThreadRecord& rec, long, bool alive) {
    for (std::uint32_t id = 0; id < n; ++id) {
      Slot* c = rec.chunks[id / kChunk].load(std::memory_order_acquire);
      if (c == nullptr) continue;
      Slot& s = c[id % kChunk];
      if (alive && s.run.load(std::memory_order_relaxed) == ep) ++merged[id]->running;
      if (s.generation.load(std::memory_order_acquire) != gen) continue;
      merged[id]->stats.merge_from(s.stats);
      if (ResourceSlot* rs = s.resources.load(std::memory_order_acquire)) {
        std::lock_guard<std::mutex> lock(rec.mutex);
        if (!merged[id]->usage) merged[id]->usage.emplace();
        merged[id]->usage->merge(rs->usage);
      }
    }
  });
  std::vector<std::vector<WorkerResult>> per_worker;
  if (share.is_parent()) merge_workers(r, merged, per_worker, gen);
  const std::uint32_t names_now = static_cast<std::uint32_t>(merged.size());
  const unsigned feats = features.load(std::memory_order_relaxed);
  const bool gpu_timing = (feats & (kFeatGpuTiming | kFeatGpuNames)) != 0;
  // Asked for, but impossible here (no driver, no device, no CUDA headers at build time).
  const bool gpu_runs = !gpu_timing || cuda::GpuEventTimer::instance().available();
  if (!gpu_runs) r.gpu_timing_off = cuda::gpu_timing_off_reason();
  std::vector<std::uint64_t> pending(gpu_timing ? n : 0);
  if (gpu_timing) {
    (void)collect_gpu(wait_for_gpu);
    const std::uint32_t g = gen & 0x7fffffffu;
    cuda::GpuEventTimer::instance().for_each_pending([&](std::uint64_t tag) {
      const auto id = static_cast<std::uint32_t>(tag & 0xffffffffu);
      if (!(tag >> 63) && ((tag >> 32) & 0x7fffffffu) == g && id < n) ++pending[id];
    });
  }
  std::lock_guard<std::mutex> gpu_lock(gpu_mutex);
  for (std::uint32_t id = 0; id < names_now; ++id) {
    const std::uint8_t flags = name_flags[id].load(std::memory_order_relaxed);
    if (!(flags & kNameSeen)) continue;
    const Merged& m = *merged[id];
    MeasurementResult out;
    out.name = *names[id].load(std::memory_order_acquire);
    set_host_figures(out, m.stats, r.iterations_measured);
    out.running = m.running;
    if (id < per_worker.size()) out.workers = std::move(per_worker[id]);
    if (flags & kNameTracked) out.resources = resource_figures(m.usage ? &*m.usage : nullptr);
    const bool gpu_name =
        (feats & kFeatGpuTiming) || ((feats & kFeatGpuNames) && (flags & kNameGpu));
    if (gpu_name && !gpu_runs) {
      out.gpu_unavailable = true;  // said once, at the top: no made-up zeros per name
    } else if (auto it = gpu.find(id); it != gpu.end() || gpu_name) {
      out.gpu = gpu_figures(it != gpu.end() ? &it->second->stats : nullptr, r.iterations_measured,
                            id < pending.size() ? pending[id] : 0);
    }
    r.measurements.push_back(std::move(out));
  }
  {
    std::lock_guard<std::mutex> lock(one_time_mutex);
    for (const OneTime& o : one_time) {
      r.one_time.push_back(
          {o.name, static_cast<double>(o.running ? 0 : o.end_ns - o.start_ns), o.running});
    }
  }
  if (record_capacity.load(std::memory_order_relaxed) > 0) r.samples = samples();
  {
    std::lock_guard<std::mutex> lock(iter_mutex);
    r.loop = loop.figures();
  }
  r.cpus = resources::online_cpus();
  r.data_name = find_data_name(r.measurements, chosen_data_name);
  r.verdict = verdict_of(r);
  return r;
}

inline void StopwatchState::reset() {
  // Statistics are dropped lazily: a slot whose generation is old is cleared by its own thread
  // on its next end_meas, and ignored by reports until then. Intervals running now belong to the
  // old epoch: they are dropped when they end.
  if (!share.is_worker()) {  // a worker's reset() leaves the parent's iterations alone
    iter_gate().generation.fetch_add(1, std::memory_order_relaxed);
    iter_gate().finished.store(0, std::memory_order_relaxed);
    share.drop_folded();
  }
  next_epoch();
  const std::uint32_t n = name_count.load(std::memory_order_acquire);
  for (std::uint32_t id = 0; id < n; ++id) {
    name_flags[id].fetch_and(static_cast<std::uint8_t>(~kNameSeen), std::memory_order_relaxed);
  }
  {
    std::lock_guard<std::mutex> lock(one_time_mutex);
    one_time.clear();
  }
  {
    std::lock_guard<std::mutex> lock(iter_mutex);
    iter_ends.clear();
    iter_next = 0;
    loop.clear();
    progress_line_ns = 0;
  }
  std::lock_guard<std::mutex> lock(gpu_mutex);
  gpu.clear();
}

/// The process-wide state, whole (the implementation part's view of stopwatch_core()).
inline StopwatchState& stopwatch_state() {
  return static_cast<StopwatchState&>(stopwatch_core());
}

inline void testing_reset_stopwatch_impl() {
  StopwatchState& s = stopwatch_state();
  {
    std::lock_guard<std::mutex> lock(s.config_mutex);
    s.power.store(kNeverEnabled);
    s.configured = false;
    s.code_configured = false;
    s.env = EnvOverrides();
    s.features.store(0);
    s.iter_gate().warmup.store(0);
    s.print_every.store(0);
    s.print_rank0_only.store(false);
    s.print_fn.store(nullptr);
    s.gpu_stream.store(nullptr);
    s.record_capacity.store(0);
    s.record_from_env = false;
    s.data_name.clear();
    s.data_name_from_env = false;
    s.progress_from_env = false;
    s.progress.store(0);
    s.total_iters.store(0);
    s.nvtx_ranges_from_env = false;
  }
  const std::uint32_t n = s.name_count.load(std::memory_order_acquire);
  for (std::uint32_t id = 0; id < n; ++id) s.name_flags[id].store(0);
  ThreadRecord& rec = s.threads.local();
  rec.adopt(rec.tid);  // drop what a failed test left running on this thread
  s.reset();
}

// ---- the out-of-line half of the hot part (declared in stopwatch_hot.hpp) ----------------------
// LAPTIME_IMPL (weak): defined in every translation unit that includes the implementation part,
// linked once. StopwatchCore's rare branches forward to StopwatchState's, which see the state.

LAPTIME_IMPL void ThreadRecord::adopt(long new_tid) noexcept {
  tid = new_tid;
  running = 0;
  // Under the registry lock: no report reads the rings now, and the old owner is gone. Its
  // last ring stays readable; older ones go, so memory stays at two rings per record.
  if (IntervalRing* r = ring.exchange(nullptr, std::memory_order_relaxed)) {
    retired = r;
    std::lock_guard<std::mutex> lock(mutex);
    for (auto& owned : rings) {
      if (owned.get() == r) owned.swap(rings.front());
    }
    rings.resize(1);
  }
  for (auto& c : chunks) {
    if (Slot* s = c.load(std::memory_order_relaxed)) {
      for (std::size_t i = 0; i < kChunk; ++i) {
        s[i].run.store(0, std::memory_order_relaxed);
        s[i].nvtx.store(0, std::memory_order_relaxed);  // the old owner's stack is gone
      }
    }
  }
}

LAPTIME_IMPL Slot* ThreadRecord::add_chunk(std::size_t index) {
  // Never freed: reports may read it at any time. A worker's comes from its region of the
  // shared file, where its parent reads it.
  WorkerShare& share = stopwatch_state().share;
  void* region_memory = share.is_worker() ? share.allocate_chunk(index * kChunk) : nullptr;
  SlotChunk* chunk = region_memory != nullptr ? new (region_memory) SlotChunk : new SlotChunk;
  Slot* c = chunk->slots;
  for (std::size_t i = 0; i < kChunk; ++i) c[i].id = static_cast<std::uint32_t>(index * kChunk + i);
  chunks[index].store(c, std::memory_order_release);
  return c;
}

static_assert(kNoGpuToken == cuda::GpuEventTimer::kInvalid, "Slot::gpu_token's 'none'");

LAPTIME_IMPL void worker_share_warn(std::string_view key, std::string_view message) noexcept {
  try {
    warn_once(key, message);
  } catch (...) {  // a warning that cannot be built is not worth dying for
  }
}

LAPTIME_IMPL const NameCacheEntry* StopwatchCore::lookup_slow(ThreadRecord& rec,
                                                              std::string_view name) {
  return static_cast<StopwatchState&>(*this).lookup_slow(rec, name);
}
LAPTIME_IMPL void StopwatchCore::prepare(Slot& s) {
  static_cast<StopwatchState&>(*this).prepare(s);
}
LAPTIME_IMPL LAPTIME_COLD void StopwatchCore::start_running_error(std::string_view name) {
  static_cast<StopwatchState&>(*this).start_running_error(name);
}
LAPTIME_IMPL LAPTIME_COLD void StopwatchCore::drop_interval(Slot& s, std::uint32_t mark) noexcept {
  static_cast<StopwatchState&>(*this).drop_interval(s, mark);
}
LAPTIME_IMPL void StopwatchCore::end_elsewhere(ThreadRecord& rec, Slot& mine, std::uint32_t id,
                                               std::string_view name, std::int64_t t,
                                               unsigned feats) {
  static_cast<StopwatchState&>(*this).end_elsewhere(rec, mine, id, name, t, feats);
}
LAPTIME_IMPL void StopwatchCore::sync_before_end(std::string_view name) {
  static_cast<StopwatchState&>(*this).sync_before_end(name);
}
LAPTIME_IMPL LAPTIME_COLD void StopwatchCore::drop_stale(ThreadRecord& rec, Slot& s,
                                                         std::uint32_t gen) {
  static_cast<StopwatchState&>(*this).drop_stale(rec, s, gen);
}
LAPTIME_IMPL void StopwatchCore::start_features(Slot& s, std::uint32_t id, unsigned feats,
                                                bool measuring) {
  static_cast<StopwatchState&>(*this).start_features(s, id, feats, measuring);
}
LAPTIME_IMPL std::int64_t StopwatchCore::end_sample(Slot& run_slot) noexcept {
  run_slot.resources.load(std::memory_order_acquire)->end = resources::sample();
  return now_ns();
}
LAPTIME_IMPL void StopwatchCore::end_features(ThreadRecord& owner, Slot& run_slot, std::uint32_t id,
                                              bool measuring, std::int64_t dt) {
  static_cast<StopwatchState&>(*this).end_features(owner, run_slot, id, measuring, dt);
}
LAPTIME_IMPL void StopwatchCore::record_interval(std::uint32_t id, std::int64_t t0,
                                                 std::int64_t dt) {
  static_cast<StopwatchState&>(*this).record_interval(id, t0, dt);
}
LAPTIME_IMPL void StopwatchCore::finish_iter() {
  static_cast<StopwatchState&>(*this).finish_iter();
}

LAPTIME_IMPL StopwatchCore& stopwatch_core_slow() {
  StopwatchState& s = process_singleton<StopwatchState>("stopwatch");
  if (!s.fork_handlers.exchange(true)) {
    // The library's one fork plan (process_singleton.hpp): the Stopwatch's locks are taken first
    // (kForkStopwatch), the warning table's last (error_state() joins as kForkErrors), since
    // enable() may warn while it holds config_mutex.
    (void)error_state();
    fork_participate(
        kForkStopwatch, [] { stopwatch_state().before_fork(); },
        [] { stopwatch_state().after_fork_in_parent(); },
        [] { stopwatch_state().after_fork_in_child(); });
  }
  s.attach_worker_share();
  stopwatch_core_pointer().store(&s, std::memory_order_release);
  return s;
}

LAPTIME_IMPL LAPTIME_COLD void scoped_end_failed() noexcept {
  try {
    throw;
  } catch (const UsageError& e) {
    std::fprintf(stderr, "%s\n", e.what());
  } catch (...) {
    std::terminate();
  }
}

LAPTIME_IMPL bool finish_iter_will_print() {
  StopwatchState& s = stopwatch_state();
  return s.prints_after(s.iter_gate().finished.load(std::memory_order_relaxed) + 1);
}

LAPTIME_IMPL void testing_reset_stopwatch() {
  testing_reset_stopwatch_impl();
}

}  // namespace detail
LAPTIME_END_NAMESPACE
