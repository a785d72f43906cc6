// laptime internals: the Stopwatch's rules of configuration, each in one place: enable() and the
// user's environment over it (docs/configuration.md), disable, the name limit, the names selected
// for CPU tracking and GPU timing, the rank, and the one-time measurement table. The facade
// (stopwatch.hpp, its out-of-line half impl/stopwatch.hpp) only forwards here. Implementation part.
#pragma once

#include <climits>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "laptime/config.hpp"
#include "laptime/cuda.hpp"
#include "laptime/detail/report.hpp"
#include "laptime/impl/exit_output.hpp"
#include "laptime/impl/stopwatch_disabled.hpp"
#include "laptime/impl/stopwatch_state.hpp"
#include "laptime/resources.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

// What enabling starts besides measuring, each once per process: the parent's shared file for
// its workers (unless LAPTIME_WORKERS turns it off), the output at exit and LAPTIME_RECORD's
// recording (a worker's figures go to its parent's report: it writes no output file of its own).
// Under config_mutex.
inline void start_enable_services(StopwatchState& s) {
  s.start_worker_share(/*wanted=*/env_checked(env_bool<Env::workers>()) != false);
  if (const auto format = env_checked(env_choice<Env::report_format>())) {
    s.report_format.store(*format);  // the table's values are in ReportFormat's order
    s.report_format_from_env.store(true);
  }
  if (s.share.is_worker()) return;
  arm_exit_output(s);
  // LAPTIME_RECORD here too, not only through configure_from_env(): a program that never calls
  // it (the seed's) records with the variable alone, as LAPTIME_OUTPUT writes; it wins over the
  // code's enable_recording (set_recording's rule; config_mutex is held here).
  if (const auto n = env_checked(env_int<Env::record>()); n && *n > 0) {
    s.record_from_env = true;
    s.set_record_capacity(static_cast<std::size_t>(*n));
  }
}

// The warm-up is the run's first iterations. Once iterations past it were measured (their
// results kept across a disable()), another enable()'s warm-up would re-label them: the measured
// count is the iterations finished past the warm-up. It stays then, with a warning; reset()
// starts a run with a new one. While it runs, a shorter one ends it where it is: the warm-up
// iterations already finished (their intervals not kept) stay warm-up.
inline void keep_or_move_warmup(IterationGate& g, int warmup) {
  const int current = g.warmup.load(std::memory_order_relaxed);
  if (warmup == current) return;
  const auto finished = g.finished.load(std::memory_order_relaxed);
  if (finished > current) {
    warn_once("warmup-kept-" + std::to_string(current) + "-" + std::to_string(warmup),
              "Stopwatch.enable(num_warmup_iters=" + std::to_string(warmup) +
                  "): the run is past its warm-up of " + std::to_string(current) +
                  " iterations and keeps it (measured iterations stay measured); "
                  "call reset() first for a new warm-up");
    return;
  }
  g.warmup.store(warmup < finished ? static_cast<int>(finished) : warmup,
                 std::memory_order_relaxed);
}

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
  if (!s.share.is_worker()) keep_or_move_warmup(s.iter_gate(), warmup);
  s.print_every.store(every.value_or(0), std::memory_order_relaxed);
  if (cuda_sync) {
    // Load the driver now (milliseconds), not inside the first measured interval.
    (void)cuda::driver_available();
    s.features.fetch_or(kFeatCudaSync, std::memory_order_relaxed);
  } else {
    s.features.fetch_and(~kFeatCudaSync, std::memory_order_relaxed);
  }
  s.power.store(kEnabled, std::memory_order_release);
}

// The code's arguments (or, before the code has called enable, the built-in defaults the
// environment's profile brought) with the user's environment on top (docs/configuration.md).
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
  start_enable_services(s);
  apply_stopwatch_config(s, warmup, every, cuda_sync);
}

/// configure_from_env: what the user's environment set, from now on over the code's calls.
inline void set_env_overrides(const EnvOverrides& overrides) {
  StopwatchState& s = stopwatch_state();
  std::lock_guard<std::mutex> lock(s.config_mutex);
  s.env = overrides;
  if (overrides.off) {
    if (s.configured) s.next_epoch();
    switch_off(s);
    s.configured = false;
    return;
  }
  if (s.configured) apply_with_overrides(s, s.cfg_warmup, s.cfg_print_every, s.cfg_cuda_sync);
}

/// binding::stopwatch_is_own_program: a worker that is a program of its own leaves its parent's
/// share (where it measured nothing into it) and runs as if it had enabled itself: the warm-up,
/// print interval and exit output in force (its code's, its environment's) are its own from now.
inline bool become_own_program(StopwatchState& s) {
  std::lock_guard<std::mutex> lock(s.config_mutex);
  if (!s.leave_worker_share(/*own_program=*/true)) return false;
  if (s.configured) {
    s.configured = false;  // applied again, now to its own iterations
    apply_with_overrides(s, s.cfg_warmup, s.cfg_print_every, s.cfg_cuda_sync);
  }
  return true;
}

/// Who sets print-rank-0-only: the code (Stopwatch::set_print_rank0_only), the user's
/// LAPTIME_PRINT_RANK0_ONLY, or configure_from_env's default for it (1) where the user set none.
enum class Rank0Source { code, env, fallback };

/// The user's variable, then the code's call, then configure_from_env's default, in either order
/// of calls (docs/configuration.md, "Precedence").
inline void set_print_rank0_only(StopwatchState& s, bool on, Rank0Source source) {
  std::lock_guard<std::mutex> lock(s.config_mutex);
  if (source == Rank0Source::fallback && (s.print_rank0_from_env || s.print_rank0_by_code)) return;
  if (source == Rank0Source::code && s.print_rank0_from_env) return;
  if (source == Rank0Source::env) s.print_rank0_from_env = true;
  if (source == Rank0Source::code) s.print_rank0_by_code = true;
  s.print_rank0_only.store(on);
}

/// Stopwatch::enable, with the spelling of "no value" in the caller's language for messages
/// ("std::nullopt" in C++, "None" from Python). `from_env`: configure_from_env's call, whose
/// arguments (built-in defaults where the user set no variable) yield to the code's.
inline void enable_stopwatch(int num_warmup_iters, std::optional<int> print_every_n_iters,
                             bool do_cuda_sync, const char* none, bool from_env = false) {
  auto args = [&] {
    return "(num_warmup_iters=" + std::to_string(num_warmup_iters) + ", print_every_n_iters=" +
           (print_every_n_iters ? std::to_string(*print_every_n_iters) : std::string(none)) +
           ", do_cuda_sync=" + (do_cuda_sync ? "true" : "false") + ")";
  };
  if (num_warmup_iters < 0) {
    usage_error("Stopwatch.enable" + args(), "num_warmup_iters must be >= 0");
    return;
  }
  if (print_every_n_iters && *print_every_n_iters < 0) {
    usage_error("Stopwatch.enable" + args(),
                std::string("print_every_n_iters must be a number of iterations >= 0 (0 "
                            "or ") +
                    none + ": never print periodically)");
    return;
  }
  if (print_every_n_iters && *print_every_n_iters == 0) print_every_n_iters.reset();
  StopwatchState& s = stopwatch_state();
  std::unique_lock<std::mutex> lock(s.config_mutex);
  if (!from_env) {
    if (s.env.off)
      return;  // the user's environment turned the Stopwatch off (docs/configuration.md)
    if (s.code_configured) {
      if (s.code_warmup != num_warmup_iters || s.code_print_every != print_every_n_iters ||
          s.code_cuda_sync != do_cuda_sync) {
        const std::string before =
            "(num_warmup_iters=" + std::to_string(s.code_warmup) + ", print_every_n_iters=" +
            (s.code_print_every ? std::to_string(*s.code_print_every) : std::string(none)) +
            ", do_cuda_sync=" + (s.code_cuda_sync ? "true" : "false") + ")";
        lock.unlock();  // usage errors are reported holding no lock (detail/report.hpp)
        usage_error("Stopwatch.enable" + args(), "already enabled with different settings " +
                                                     before +
                                                     "; call disable() first to change them");
        return;
      }
    }
    s.code_configured = true;
    s.code_warmup = num_warmup_iters;
    s.code_print_every = print_every_n_iters;
    s.code_cuda_sync = do_cuda_sync;
  }
  apply_with_overrides(s, num_warmup_iters, print_every_n_iters, do_cuda_sync);
}

/// Stopwatch::disable: measuring off, results kept; intervals running now are dropped.
inline void disable_stopwatch() noexcept {
  StopwatchState& s = stopwatch_state();
  std::lock_guard<std::mutex> lock(s.config_mutex);
  switch_off(s);
  s.configured = false;
  s.code_configured = false;
  s.next_epoch();  // intervals running now are dropped, never left running
  s.break_loop();  // nor is the loop's iteration that runs now
}

/// Stopwatch::set_max_names: the limit in force after the call (NameTable::set_limit's rule),
/// with one warning where it is the names already known. 0 is a usage error.
inline std::size_t set_max_names(std::size_t n) {
  StopwatchState& s = stopwatch_state();
  const std::string call = "set_max_names(" + std::to_string(n) + ")";
  if (n == 0) {
    usage_error(call, "the limit is at least 1 name; it stays " +
                          std::to_string(s.max_names.load(std::memory_order_relaxed)));
    return s.max_names.load(std::memory_order_relaxed);
  }
  if (n > LAPTIME_MAX_NAMES) {
    warn_once("set_max_names", call + " is above the compile-time capacity; " +
                                   std::to_string(LAPTIME_MAX_NAMES) + " are allowed");
    n = LAPTIME_MAX_NAMES;
  }
  const std::uint32_t known = s.set_limit(static_cast<std::uint32_t>(n));
  if (n < known && !s.max_names_from_env) {
    warn_once("set_max_names below", call + ": " + std::to_string(known) +
                                         " names are already known, and stay; the limit is " +
                                         std::to_string(known));
  }
  return s.max_names.load(std::memory_order_relaxed);
}

inline void track_cpu_usage(std::string_view name) {
  StopwatchState& s = stopwatch_state();
  const std::uint32_t id = s.intern(name);
  if (id == kNoName) {
    usage_error("track_cpu_usage(" + detail::quoted(name) + ")",
                "too many distinct measurement names (LAPTIME_MAX_NAMES)", "max-names",
                kMaxNamesRepeats);
    return;
  }
  // The sampler's lazily made statics are made here, before any interval is sampled: a fork()
  // (a DataLoader worker) while another thread is making one would leave the child waiting for
  // that static forever.
  (void)resources::clock_ticks();
  (void)resources::detail::sampler_bytes_read();
  s.name_flags[id].fetch_or(kNameTracked, std::memory_order_relaxed);
  s.features.fetch_or(kFeatTracked, std::memory_order_relaxed);
}

/// Stopwatch::enable_gpu_timing: every name, on `stream`.
inline void enable_gpu_timing(void* stream) {
  StopwatchState& s = stopwatch_state();
  // Load the driver and create a first batch of events now, not inside the first interval.
  if (cuda::driver_available()) cuda::GpuEventTimer::instance().reserve(64);
  s.gpu_stream.store(stream, std::memory_order_relaxed);
  s.features.fetch_or(kFeatGpuTiming, std::memory_order_relaxed);
}

inline void enable_gpu_timing_for(std::string_view name) {
  StopwatchState& s = stopwatch_state();
  const std::uint32_t id = s.intern(name);
  if (id == kNoName) {
    usage_error("enable_gpu_timing_for(" + detail::quoted(name) + ")",
                "too many distinct measurement names (LAPTIME_MAX_NAMES)");
    return;
  }
  // Load the driver and create a first batch of events now, not inside the first interval.
  if (cuda::driver_available()) cuda::GpuEventTimer::instance().reserve(64);
  s.name_flags[id].fetch_or(kNameGpu, std::memory_order_relaxed);
  s.features.fetch_or(kFeatGpuNames, std::memory_order_relaxed);
}

/// Stopwatch::disable_gpu_timing: of every name and of selected ones.
inline void disable_gpu_timing() noexcept {
  // First the leftover bit: an interval that took GPU events gives them back at its end.
  std::atomic<unsigned>& features = stopwatch_state().features;
  features.fetch_or(kFeatLeftover, std::memory_order_relaxed);
  features.fetch_and(~(kFeatGpuTiming | kFeatGpuNames), std::memory_order_relaxed);
}

/// Stopwatch::set_rank. The rank is bounded as the launchers' variables are (detect_rank): at
/// most INT_MAX - 1, so that a world size can exceed it. A world size given must exceed the rank
/// (a swapped pair); a kept one grows to fit.
inline void set_rank(int rank, int world_size) {
  if (rank < 0 || rank == INT_MAX || world_size < 0 || (world_size > 0 && world_size <= rank)) {
    usage_error("set_rank(" + std::to_string(rank) + ", " + std::to_string(world_size) + ")",
                "rank must be in 0 ... " + std::to_string(INT_MAX - 1) +
                    ", and world_size 0 (kept) or above the rank");
    return;
  }
  StopwatchState& s = stopwatch_state();
  s.set_rank(rank, world_size > 0 ? world_size : s.rank_info().world_size);
}

/// Stopwatch::set_print_function.
inline void set_print_function(PrintFn fn, void* user_data) noexcept {
  try {
    stopwatch_state().set_print_target(fn, user_data);
  } catch (...) {  // the lock failed (std::system_error): the previous function stays
  }
}

// The one-time measurement table (docs/stopwatch.md): a name is used once; no warm-up.
inline void start_one_time(std::string_view name) {
  StopwatchState& s = stopwatch_state();
  if (!s.is_on()) return;
  const std::int64_t t = now_ns();
  std::unique_lock<std::mutex> lock(s.one_time_mutex);
  for (const auto& o : s.one_time) {
    if (o.name == name) {
      const std::string what = detail::quoted(name) +
                               (o.running ? " is already running" : " was already measured") +
                               " (one-time measurement names are used once)";
      lock.unlock();  // usage errors are reported holding no lock (detail/report.hpp)
      usage_error("start_one_time_measurement(" + detail::quoted(name) + ")", what);
      return;
    }
  }
  s.one_time.push_back({std::string(name), t, 0, true});
}

// A one-time measurement is kept across disable() (docs/guarantees.md): ended while disabled, it
// is counted; an end while disabled that finds none running ends nothing (its start may have come
// while disabled, which started nothing), silently.
inline void end_one_time(std::string_view name) {
  const std::int64_t t = now_ns();
  StopwatchState& s = stopwatch_state();
  if (!s.ever_enabled()) return;
  std::unique_lock<std::mutex> lock(s.one_time_mutex);
  for (auto& o : s.one_time) {
    if (o.name == name && o.running) {
      o.end_ns = t;
      o.running = false;
      return;
    }
  }
  if (s.take_dropped(name)) return;  // started before a reset(): dropped, no error
  if (!s.is_on()) return;
  lock.unlock();  // usage errors are reported holding no lock (detail/report.hpp)
  usage_error("end_one_time_measurement(" + detail::quoted(name) + ")",
              "no one-time measurement " + detail::quoted(name) + " is running");
}

}  // namespace detail
LAPTIME_END_NAMESPACE
