// laptime: the Stopwatch (SPEC §1).
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
#pragma once

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <system_error>

#include "laptime/config.hpp"
#include "laptime/error.hpp"
#include "laptime/results.hpp"
#if LAPTIME_ENABLED
#include "laptime/detail/exit_output.hpp"
#include "laptime/detail/stopwatch_state.hpp"
#endif

LAPTIME_BEGIN_NAMESPACE

#if LAPTIME_ENABLED
namespace detail {
void enable_stopwatch(int num_warmup_iters, std::optional<int> print_every_n_iters,
                      bool do_cuda_sync, const char* none, bool from_env = false);
void set_env_overrides(const EnvOverrides& overrides);
}  // namespace detail
#endif

/// The process-wide stopwatch: named intervals per iteration, with warm-up, percentiles, CPU and
/// I/O of tracked names, and optional GPU time. One instance per process, shared by every shared
/// object and by the Python module. Every method is safe from any thread.
class Stopwatch {
 public:
  /// The singleton. `laptime::Stopwatch::instance().start_meas("step");`
  static Stopwatch& instance() noexcept {
    static Stopwatch facade;  // stateless; the state is process-wide (detail::stopwatch_state)
    return facade;
  }

  /// Turns measuring on. Iterations before `num_warmup_iters` are warm-up (not accumulated);
  /// with `print_every_n_iters` the report is printed every n measured iterations (0 or
  /// std::nullopt: never);
  /// `do_cuda_sync` synchronises the current CUDA context right before each timestamp after
  /// warm-up (costs a full GPU sync per call: use it to attribute GPU work to host intervals).
  /// Calling again with the same arguments does nothing; with others it is a usage error.
  void enable(int num_warmup_iters, std::optional<int> print_every_n_iters = std::nullopt,
              bool do_cuda_sync = false);

  /// Whether enable() was called.
  bool is_enabled() const noexcept {
#if LAPTIME_ENABLED
    return detail::stopwatch_state().enabled.load(std::memory_order_relaxed);
#else
    return false;
#endif
  }

  /// Starts the interval `name` on the calling thread. Cost when enabled: two clock reads in
  /// the pair plus a few ns; no lock, no allocation once the name is known to the thread.
  LAPTIME_ALWAYS_INLINE void start_meas(std::string_view name) {
#if LAPTIME_ENABLED
    detail::StopwatchState& s = detail::stopwatch_state();
    if (LAPTIME_UNLIKELY(!s.enabled.load(std::memory_order_relaxed))) return;
    s.start(name);
#else
    (void)name;
#endif
  }

  /// Ends the interval `name` running on the calling thread.
  LAPTIME_ALWAYS_INLINE void end_meas(std::string_view name) {
#if LAPTIME_ENABLED
    detail::StopwatchState& s = detail::stopwatch_state();
    if (LAPTIME_UNLIKELY(!s.enabled.load(std::memory_order_relaxed))) return;
    s.end(name);
#else
    (void)name;
#endif
  }

  /// Ends an iteration: advances warm-up, emits an NVTX mark "iteration N" when the NVTX wrapper
  /// is enabled, resolves finished GPU timings, prints periodically.
  void finish_iter() {
#if LAPTIME_ENABLED
    detail::StopwatchState& s = detail::stopwatch_state();
    if (!s.enabled.load(std::memory_order_relaxed)) return;
    s.finish_iter();
#endif
  }

  /// Prints the report (allowed while measurements run: they are marked [running]). Prints
  /// nothing when not enabled and nothing was measured, as the seed printed nothing before enable.
  void print_eval_times(std::ostream& os = std::cout) const {
    const Results r = results();
    if (!is_enabled() && r.measurements.empty() && r.one_time.empty() &&
        r.iterations_finished == 0) {
      return;
    }
    os << r.to_text() << std::flush;
  }

  /// The report as text.
  std::string report() const {
    return results().to_text();
  }

  /// A single interval outside the iteration scheme (pipeline creation); no warm-up.
  void start_one_time_measurement(std::string_view name);
  void end_one_time_measurement(std::string_view name);

  /// Seed-compatible: sample CPU and I/O during the intervals of `name` (see track_cpu_usage).
  void set_cpu_usage_meas_name(std::string_view name) {
    track_cpu_usage(name);
  }

  /// Samples process-tree CPU, system CPU and I/O (/proc) at the start and end of every interval
  /// of `name` (several names may be tracked). Costs a /proc read (~10-50 µs) per timestamp of
  /// tracked names only.
  void track_cpu_usage(std::string_view name);

  /// Limits the distinct measurement names to `n` (at most LAPTIME_MAX_NAMES, the compile-time
  /// capacity: more is clamped with a one-time warning); names past the limit are usage errors.
  /// LAPTIME_MAX_NAMES in the environment overrides this call. Returns the limit in force.
  /// `laptime::Stopwatch::instance().set_max_names(256);`
  std::size_t set_max_names(std::size_t n) {
#if LAPTIME_ENABLED
    detail::StopwatchState& s = detail::stopwatch_state();
    if (n > LAPTIME_MAX_NAMES) {
      detail::warn_once("set_max_names", "set_max_names(" + std::to_string(n) +
                                             ") is above the compile-time capacity; " +
                                             std::to_string(LAPTIME_MAX_NAMES) + " are allowed");
      n = LAPTIME_MAX_NAMES;
    }
    std::lock_guard<std::mutex> lock(s.config_mutex);
    if (!s.max_names_from_env && n > 0) {
      s.max_names.store(static_cast<std::uint32_t>(n), std::memory_order_relaxed);
    }
    return s.max_names.load(std::memory_order_relaxed);
#else
    return n < LAPTIME_MAX_NAMES ? n : LAPTIME_MAX_NAMES;
#endif
  }

  /// Iterations finished after warm-up.
  int get_num_nonwarmup_iters_measured() const {
#if LAPTIME_ENABLED
    const detail::StopwatchState& s = detail::stopwatch_state();
    const auto n =
        s.finished_iters.load(std::memory_order_relaxed) - s.warmup.load(std::memory_order_relaxed);
    return n > 0 ? static_cast<int>(n) : 0;
#else
    return 0;
#endif
  }

  /// Everything measured so far.
  Results results() const {
#if LAPTIME_ENABLED
    return detail::stopwatch_state().results();
#else
    return Results{};
#endif
  }

  /// The results as JSON (SPEC §6).
  std::string to_json() const {
    return results().to_json();
  }

  /// Writes to_json() to `path` atomically: a temporary file in the same folder, flushed to disk,
  /// then renamed over `path`, so that a reader (or a crash) sees the old file or the new one,
  /// never a torn one. The path is used as given ("{rank}" is not replaced). Throws
  /// std::system_error when it cannot: code() is the errno, what() names the path, the step and
  /// the reason. Compiled out (LAPTIME_DISABLE), it writes nothing.
  /// `laptime::Stopwatch::instance().write_json("results/run-3.json");`
  void write_json(const std::string& path) const;

  /// Whether SIGTERM, SIGINT, SIGHUP and abort() save the LAPTIME_OUTPUT file before the signal
  /// takes its course (on by default where LAPTIME_OUTPUT is set; LAPTIME_SIGNAL_HANDLERS, when
  /// set, wins). Takes effect at the first enable(), or at once after it (off restores the
  /// program's handlers). docs/guarantees.md says what each way of ending keeps.
  void set_exit_signal_handlers(bool on);

  /// Drops all results and warm-up progress; the configuration stays.
  void reset() {
#if LAPTIME_ENABLED
    detail::stopwatch_state().reset();
#endif
  }

  /// Also times every interval on the GPU with a pair of CUDA events recorded on `stream`
  /// (nullptr: the legacy default stream; or a cudaStream_t / PyTorch stream handle). Resolved
  /// without blocking at finish_iter and at report time; no sync on the hot path. Cost: two
  /// cuEventRecord calls per interval (~1-2 µs).
  void enable_gpu_timing(void* stream = nullptr) {
#if LAPTIME_ENABLED
    auto& s = detail::stopwatch_state();
    // Load the driver and create a first batch of events now, not inside the first interval.
    if (cuda::driver_available()) cuda::GpuEventTimer::instance().reserve(64);
    s.gpu_stream.store(stream, std::memory_order_relaxed);
    s.features.fetch_or(detail::kFeatGpuTiming, std::memory_order_relaxed);
#else
    (void)stream;
#endif
  }
  /// Keeps each thread's last `max_intervals` intervals (name, start, duration, iteration) in a
  /// ring buffer, for per-iteration plots and traces (`laptime plot`, `laptime trace`); they are
  /// in results().samples and the JSON's "samples". 0 turns it off. Each thread's ring is
  /// allocated at its first start_meas after this call (32 bytes per interval); the pair then
  /// costs a few stores more, no lock, no allocation. LAPTIME_RECORD=N, when set, wins.
  /// `laptime::Stopwatch::instance().enable_recording(100000);`
  void enable_recording(std::size_t max_intervals) {
#if LAPTIME_ENABLED
    detail::stopwatch_state().set_recording(max_intervals, false);
#else
    (void)max_intervals;
#endif
  }
  /// Changes the stream GPU timing records on (e.g. the framework's current stream).
  void set_gpu_stream(void* stream) noexcept {
#if LAPTIME_ENABLED
    detail::stopwatch_state().gpu_stream.store(stream, std::memory_order_relaxed);
#else
    (void)stream;
#endif
  }
  /// Times only the intervals of `name` on the GPU (call once per name; LAPTIME_GPU_TIMING=a,b
  /// does the same), on the stream given to set_gpu_stream (default: the legacy default stream).
  /// Names not selected cost nothing extra. enable_gpu_timing() times every name instead.
  void enable_gpu_timing_for(std::string_view name);
  /// Stops GPU timing, of every name and of selected ones.
  void disable_gpu_timing() {
#if LAPTIME_ENABLED
    detail::stopwatch_state().features.fetch_and(~(detail::kFeatGpuTiming | detail::kFeatGpuNames),
                                                 std::memory_order_relaxed);
#endif
  }

  /// Sets this process's rank and world size for reports, the {rank} of output paths and
  /// rank-0-only printing, for programs that learn their rank from MPI or NCCL rather than from
  /// the launcher's variables (RANK, OMPI_COMM_WORLD_RANK, SLURM_PROCID, PMI_RANK). A world size
  /// of 0 keeps the detected one (at least rank + 1). A negative rank is a usage error.
  void set_rank(int rank, int world_size = 0) {
#if LAPTIME_ENABLED
    if (rank < 0 || world_size < 0) {
      detail::usage_error(
          "set_rank(" + std::to_string(rank) + ", " + std::to_string(world_size) + ")",
          "rank and world_size must be >= 0");
      return;
    }
    auto& s = detail::stopwatch_state();
    s.set_rank(rank, world_size > 0 ? world_size : s.rank_info().world_size);
#else
    (void)rank;
    (void)world_size;
#endif
  }
  /// Waits for every pending GPU timing (report time; never inside the loop).
  void wait_for_gpu_timings() {
#if LAPTIME_ENABLED
    detail::stopwatch_state().collect_gpu(true);
#endif
  }

  /// Periodic and at-exit reports only on rank 0 (rank from RANK/OMPI/SLURM/PMI variables).
  void set_print_rank0_only(bool on) noexcept {
#if LAPTIME_ENABLED
    detail::stopwatch_state().print_rank0_only.store(on);
#else
    (void)on;
#endif
  }

  /// Where periodic and at-exit reports go (default: stdout). nullptr restores stdout.
  void set_print_function(PrintFunction fn, void* user_data) noexcept {
#if LAPTIME_ENABLED
    auto& s = detail::stopwatch_state();
    s.print_user.store(user_data);
    s.print_fn.store(fn);
#else
    (void)fn;
    (void)user_data;
#endif
  }

  /// Turns measuring off (results stay; enable() may then be called with other arguments).
  void disable() noexcept {
#if LAPTIME_ENABLED
    auto& s = detail::stopwatch_state();
    std::lock_guard<std::mutex> lock(s.config_mutex);
    s.enabled.store(false);
    s.configured = false;
    s.code_configured = false;
    s.next_epoch();  // intervals running now are dropped, never left running
#endif
  }

  Stopwatch(const Stopwatch&) = delete;
  Stopwatch& operator=(const Stopwatch&) = delete;

 private:
  Stopwatch() = default;
};

/// Times the enclosing scope: `{ laptime::ScopedMeasurement m("data fetch"); ... }`.
/// Not copyable or movable; ends the measurement even when the scope exits by an exception.
class ScopedMeasurement {
 public:
  explicit ScopedMeasurement(std::string_view name) : name_(name) {
    Stopwatch::instance().start_meas(name_);
  }
  // A destructor must not throw: a usage error here (the measurement was ended by hand inside
  // the scope) is reported on stderr instead, whatever the policy.
  ~ScopedMeasurement() {
    try {
      Stopwatch::instance().end_meas(name_);
    } catch (const UsageError& e) {
      std::fprintf(stderr, "%s\n", e.what());
    }
  }
  ScopedMeasurement(const ScopedMeasurement&) = delete;
  ScopedMeasurement& operator=(const ScopedMeasurement&) = delete;
  ScopedMeasurement(ScopedMeasurement&&) = delete;
  ScopedMeasurement& operator=(ScopedMeasurement&&) = delete;
  void* operator new(std::size_t) = delete;
  void* operator new[](std::size_t) = delete;

 private:
  std::string_view name_;
};

#if LAPTIME_ENABLED
/// `LAPTIME_MEAS("data fetch");` times the rest of the enclosing scope.
#define LAPTIME_MEAS(name)                                               \
  ::laptime::ScopedMeasurement LAPTIME_CONCAT(laptime_meas_, __LINE__) { \
    name                                                                 \
  }
#else
#define LAPTIME_MEAS(name) static_cast<void>(0)
#endif

// ---------------------------------------------------------------------------------------------

inline void Stopwatch::write_json(const std::string& path) const {
#if LAPTIME_ENABLED
  if (const detail::WriteFailure f = detail::write_file_atomically(path, to_json())) {
    throw std::system_error(f.code, std::generic_category(),
                            "laptime: could not write results to '" + path + "'" +
                                (f.step != nullptr ? std::string(" (") + f.step + ")" : ""));
  }
#else
  (void)path;
#endif
}

inline void Stopwatch::set_exit_signal_handlers(bool on) {
#if LAPTIME_ENABLED
  detail::choose_exit_signal_handlers(on);
#else
  (void)on;
#endif
}

inline void Stopwatch::enable(int num_warmup_iters, std::optional<int> print_every_n_iters,
                              bool do_cuda_sync) {
#if LAPTIME_ENABLED
  detail::enable_stopwatch(num_warmup_iters, print_every_n_iters, do_cuda_sync, "std::nullopt");
#else
  (void)num_warmup_iters;
  (void)print_every_n_iters;
  (void)do_cuda_sync;
#endif
}

#if LAPTIME_ENABLED
namespace detail {
// Puts the settings in force: `configured` and cfg_*, what the hot path reads. Under config_mutex.
inline void apply_stopwatch_config(StopwatchState& s, int warmup, std::optional<int> every,
                                   bool cuda_sync) {
  if (s.configured && s.cfg_warmup == warmup && s.cfg_print_every == every &&
      s.cfg_cuda_sync == cuda_sync) {
    return;
  }
  s.configured = true;
  s.next_epoch();
  s.cfg_warmup = warmup;
  s.cfg_print_every = every;
  s.cfg_cuda_sync = cuda_sync;
  s.warmup.store(warmup, std::memory_order_relaxed);
  s.print_every.store(every.value_or(0), std::memory_order_relaxed);
  if (cuda_sync) {
    // Load the driver now (milliseconds), not inside the first measured interval.
    (void)cuda::driver_available();
    s.features.fetch_or(kFeatCudaSync, std::memory_order_relaxed);
  } else {
    s.features.fetch_and(~kFeatCudaSync, std::memory_order_relaxed);
  }
  arm_exit_output(s);
  s.enabled.store(true, std::memory_order_release);
}

// The code's arguments (or, before the code has called enable, the built-in defaults the
// environment's profile brought) with the user's environment on top (SPEC §8).
inline void apply_with_overrides(StopwatchState& s, int warmup, std::optional<int> every,
                                 bool cuda_sync) {
  if (s.code_configured) {
    warmup = s.code_warmup;
    every = s.code_print_every;
    cuda_sync = s.code_cuda_sync;
  }
  if (s.env.warmup) warmup = *s.env.warmup;
  if (s.env.print_every) every = *s.env.print_every;
  if (s.env.cuda_sync) cuda_sync = *s.env.cuda_sync;
  apply_stopwatch_config(s, warmup, every, cuda_sync);
}

/// configure_from_env: what the user's environment set, from now on over the code's calls.
inline void set_env_overrides(const EnvOverrides& overrides) {
  StopwatchState& s = stopwatch_state();
  std::lock_guard<std::mutex> lock(s.config_mutex);
  s.env = overrides;
  if (overrides.off) {
    if (s.configured) s.next_epoch();
    s.enabled.store(false);
    s.configured = false;
    return;
  }
  if (s.configured) apply_with_overrides(s, s.cfg_warmup, s.cfg_print_every, s.cfg_cuda_sync);
}
}  // namespace detail

/// Stopwatch::enable, with the spelling of "no value" in the caller's language for messages
/// ("std::nullopt" in C++, "None" from Python). `from_env`: configure_from_env's call, whose
/// arguments (built-in defaults where the user set no variable) yield to the code's.
inline void detail::enable_stopwatch(int num_warmup_iters, std::optional<int> print_every_n_iters,
                                     bool do_cuda_sync, const char* none, bool from_env) {
  auto args = [&] {
    return "(num_warmup_iters=" + std::to_string(num_warmup_iters) + ", print_every_n_iters=" +
           (print_every_n_iters ? std::to_string(*print_every_n_iters) : std::string(none)) +
           ", do_cuda_sync=" + (do_cuda_sync ? "true" : "false") + ")";
  };
  if (num_warmup_iters < 0) {
    detail::usage_error("Stopwatch.enable" + args(), "num_warmup_iters must be >= 0");
    return;
  }
  if (print_every_n_iters && *print_every_n_iters < 0) {
    detail::usage_error("Stopwatch.enable" + args(),
                        std::string("print_every_n_iters must be a number of iterations >= 0 (0 "
                                    "or ") +
                            none + ": never print periodically)");
    return;
  }
  if (print_every_n_iters && *print_every_n_iters == 0) print_every_n_iters.reset();
  detail::StopwatchState& s = detail::stopwatch_state();
  std::lock_guard<std::mutex> lock(s.config_mutex);
  if (!from_env) {
    if (s.env.off) return;  // the user's environment turned the Stopwatch off (SPEC §8)
    if (s.code_configured) {
      if (s.code_warmup != num_warmup_iters || s.code_print_every != print_every_n_iters ||
          s.code_cuda_sync != do_cuda_sync) {
        const std::string before =
            "(num_warmup_iters=" + std::to_string(s.code_warmup) + ", print_every_n_iters=" +
            (s.code_print_every ? std::to_string(*s.code_print_every) : std::string(none)) +
            ", do_cuda_sync=" + (s.code_cuda_sync ? "true" : "false") + ")";
        detail::usage_error("Stopwatch.enable" + args(),
                            "already enabled with different settings " + before +
                                "; call disable() first to change them");
        return;
      }
    }
    s.code_configured = true;
    s.code_warmup = num_warmup_iters;
    s.code_print_every = print_every_n_iters;
    s.code_cuda_sync = do_cuda_sync;
  }
  detail::apply_with_overrides(s, num_warmup_iters, print_every_n_iters, do_cuda_sync);
}
#endif

inline void Stopwatch::track_cpu_usage(std::string_view name) {
#if LAPTIME_ENABLED
  detail::StopwatchState& s = detail::stopwatch_state();
  const std::uint32_t id = s.intern(name);
  if (id == detail::kNoName) {
    detail::usage_error("track_cpu_usage(" + detail::quoted(name) + ")",
                        "too many distinct measurement names (LAPTIME_MAX_NAMES)", "max-names",
                        "calls with names past LAPTIME_MAX_NAMES were not measured");
    return;
  }
  // The sampler's lazily made statics are made here, before any interval is sampled: a fork()
  // (a DataLoader worker) while another thread is making one would leave the child waiting for
  // that static forever.
  (void)resources::clock_ticks();
  (void)resources::detail::sampler_bytes_read();
  s.name_flags[id].fetch_or(detail::kNameTracked, std::memory_order_relaxed);
  s.features.fetch_or(detail::kFeatTracked, std::memory_order_relaxed);
#else
  (void)name;
#endif
}

inline void Stopwatch::enable_gpu_timing_for(std::string_view name) {
#if LAPTIME_ENABLED
  detail::StopwatchState& s = detail::stopwatch_state();
  const std::uint32_t id = s.intern(name);
  if (id == detail::kNoName) {
    detail::usage_error("enable_gpu_timing_for(" + detail::quoted(name) + ")",
                        "too many distinct measurement names (LAPTIME_MAX_NAMES)");
    return;
  }
  // Load the driver and create a first batch of events now, not inside the first interval.
  if (cuda::driver_available()) cuda::GpuEventTimer::instance().reserve(64);
  s.name_flags[id].fetch_or(detail::kNameGpu, std::memory_order_relaxed);
  s.features.fetch_or(detail::kFeatGpuNames, std::memory_order_relaxed);
#else
  (void)name;
#endif
}

inline void Stopwatch::start_one_time_measurement(std::string_view name) {
#if LAPTIME_ENABLED
  detail::StopwatchState& s = detail::stopwatch_state();
  if (!s.enabled.load(std::memory_order_relaxed)) return;
  const std::int64_t t = detail::now_ns();
  std::lock_guard<std::mutex> lock(s.one_time_mutex);
  for (const auto& o : s.one_time) {
    if (o.name == name) {
      detail::usage_error("start_one_time_measurement(" + detail::quoted(name) + ")",
                          detail::quoted(name) +
                              (o.running ? " is already running" : " was already measured") +
                              " (one-time measurement names are used once)");
      return;
    }
  }
  s.one_time.push_back({std::string(name), t, 0, true});
#else
  (void)name;
#endif
}

inline void Stopwatch::end_one_time_measurement(std::string_view name) {
#if LAPTIME_ENABLED
  const std::int64_t t = detail::now_ns();
  detail::StopwatchState& s = detail::stopwatch_state();
  if (!s.enabled.load(std::memory_order_relaxed)) return;
  std::lock_guard<std::mutex> lock(s.one_time_mutex);
  for (auto& o : s.one_time) {
    if (o.name == name && o.running) {
      o.end_ns = t;
      o.running = false;
      return;
    }
  }
  detail::usage_error("end_one_time_measurement(" + detail::quoted(name) + ")",
                      "no one-time measurement " + detail::quoted(name) + " is running");
#else
  (void)name;
#endif
}

LAPTIME_END_NAMESPACE
