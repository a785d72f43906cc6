// laptime: switching the tools per run type from the environment (docs/configuration.md), the way
// the seed switched them from its config file:
//
//   LAPTIME_PROFILE=training     everything off (the real run)
//   LAPTIME_PROFILE=evaluation   Stopwatch only
//   LAPTIME_PROFILE=profiling    Stopwatch and NVTX ranges, no range-order checks (cheapest); every
//                                Stopwatch interval is also an NVTX range (LAPTIME_NVTX_RANGES);
//                                CPU and I/O as NVTX counters (counters.hpp) at 10 Hz
//   LAPTIME_PROFILE=debugging    Stopwatch and NVTX ranges with range-order checks
//
// and one variable per setting on top (docs/configuration.md lists them all). In the program:
//
//   laptime::configure_from_env();   // once, at start-up; does nothing when no variable is set
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "laptime/config.hpp"
#if LAPTIME_ENABLED
#include <memory>  // std::addressof
#include <type_traits>
#endif

// Enabled, the functions below are out of line (weak, LAPTIME_IMPL) in the implementation part
// (impl/settings.hpp, which laptime.hpp and src/laptime.cpp carry). Compiled out
// (LAPTIME_DISABLE) they are inline no-ops: nothing is read or applied, nothing to link.

LAPTIME_BEGIN_NAMESPACE

/// What configure_from_env applies. Built from the environment by settings_from_env.
struct Settings {
  bool stopwatch = false;
  int num_warmup_iters = 10;
  std::optional<int> print_every_n_iters;
  bool do_cuda_sync = false;
  bool gpu_timing = false;
  std::vector<std::string> gpu_timing_names;  ///< LAPTIME_GPU_TIMING=a,b: only these names
  bool stopwatch_all_ranks = false;           ///< false: only rank 0 measures, as the seed did
  bool print_rank0_only = true;
  std::vector<std::string> track_cpu;           ///< names whose CPU and I/O are sampled
  std::optional<std::size_t> record_intervals;  ///< LAPTIME_RECORD: intervals kept per thread
  std::optional<std::string> data_name;         ///< LAPTIME_DATA_NAME: the verdict's data-wait name
  std::string progress;  ///< LAPTIME_PROGRESS: "report", "line" or "off"; empty: unset

  bool nvtx = false;
  bool nvtx_sync_on_push = false;
  bool nvtx_sync_on_pop = false;
  bool nvtx_check_order = false;
  std::string nvtx_domain;
  /// LAPTIME_NVTX_RANGES (on in the profiling profile): every Stopwatch interval is also an NVTX
  /// range (Stopwatch::set_nvtx_ranges).
  bool nvtx_ranges = false;

  bool nvtx_counters = false;   ///< LAPTIME_NVTX_COUNTERS: tracked names' CPU and I/O as counters
  double nvtx_counters_hz = 0;  ///< LAPTIME_NVTX_COUNTERS_HZ: process-tree samples per second

  std::vector<std::string> warnings;  ///< one line per malformed variable (it was ignored)

  /// Which settings the user's environment gave (docs/configuration.md: those override the code's
  /// calls, in any order; the others are the code's, or built-in defaults).
  struct FromEnv {
    bool stopwatch = false;  ///< LAPTIME_PROFILE or LAPTIME_STOPWATCH
    bool num_warmup_iters = false, print_every_n_iters = false, do_cuda_sync = false;
    bool nvtx_ranges = false;  ///< LAPTIME_NVTX_RANGES or LAPTIME_PROFILE
    bool nvtx = false;         ///< LAPTIME_NVTX or LAPTIME_PROFILE: the wrapper on or off
    bool nvtx_sync_on_push = false, nvtx_sync_on_pop = false, nvtx_check_order = false;
    bool nvtx_domain = false;
    bool print_rank0_only = false;  ///< LAPTIME_PRINT_RANK0_ONLY
  } from_env;
};

namespace detail {
/// settings_from_env's reader, type-erased so that the parser is compiled once: `read(ctx, name)`;
/// null: this process's environment (configure_from_env).
using EnvReader = const char* (*)(void* ctx, const char* name);
#if LAPTIME_ENABLED
LAPTIME_IMPL Settings settings_from_reader(EnvReader read, void* ctx);
#else
inline Settings settings_from_reader(EnvReader, void*) {
  return Settings{};
}
#endif
}  // namespace detail

/// Reads the LAPTIME_* variables through `getenv_fn` (name -> value or nullptr; a pure function
/// of them, testable). Compiled out: reads nothing, returns the defaults.
template <class Getenv>
Settings settings_from_env(Getenv&& getenv_fn) {
#if LAPTIME_ENABLED
  // A function object by its address; a function (not an object) by its pointer.
  struct Target {
    std::remove_reference_t<Getenv>* fn;
  } target{std::addressof(getenv_fn)};
  return detail::settings_from_reader(
      [](void* c, const char* name) -> const char* { return (*static_cast<Target*>(c)->fn)(name); },
      &target);
#else
  (void)getenv_fn;
  return Settings{};
#endif
}

#if LAPTIME_ENABLED
/// Applies `s` to the Stopwatch and the NVTX wrapper of this process (on `rank`; without it, the
/// rank the launcher's variables give). Never throws: a setting that cannot be applied (the name
/// table full, an enable() that conflicts with the code's) is warned about once, whatever the
/// error policy, and the others are still applied. The environment's bounds hold for `s` too
/// (record_intervals, gpu_timing_names, track_cpu: docs/configuration.md), each with one warning.
LAPTIME_IMPL void apply_settings(const Settings& s, int rank) noexcept;
LAPTIME_IMPL void apply_settings(const Settings& s) noexcept;

/// Reads the LAPTIME_* variables and enables the tools they ask for. Returns what was applied.
/// Never throws and never aborts: a malformed value is warned about once and ignored.
LAPTIME_IMPL Settings configure_from_env();
#else
inline void apply_settings(const Settings&, int = 0) noexcept {}
inline Settings configure_from_env() {
  return Settings{};
}
#endif

LAPTIME_END_NAMESPACE
