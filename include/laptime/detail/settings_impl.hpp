// laptime internals: apply_settings and configure_from_env (settings.hpp), the implementation
// part: laptime.hpp and src/laptime.cpp carry it (weak), and settings.hpp itself when compiled out.
#pragma once

#include <cstdlib>
#include <exception>
#include <string>

#include "laptime/nvtx.hpp"
#include "laptime/settings.hpp"
#include "laptime/stopwatch.hpp"

#if LAPTIME_ENABLED
#include "laptime/detail/stopwatch_config.hpp"
#endif

LAPTIME_BEGIN_NAMESPACE

/// Applies `s` to the Stopwatch and the NVTX wrapper of this process. Never throws: a setting
/// that cannot be applied (the name table full, an enable() that conflicts with the code's) is
/// warned about once, whatever the error policy, and the others are still applied.
LAPTIME_SETTINGS_FN void apply_settings(const Settings& s, int rank) noexcept {
  for (const std::string& w : s.warnings) detail::warn_once(w, w);
  // Runs one step; an error becomes a warning (reading the environment never throws, SPEC §8).
  auto step = [](const char* what, auto&& fn) {
    try {
      fn();
    } catch (const std::exception& e) {
      detail::warn_once(std::string("settings:") + what,
                        std::string("configure_from_env: ") + what + ": " + e.what());
    } catch (...) {
      detail::warn_once(std::string("settings:") + what,
                        std::string("configure_from_env: ") + what + " failed");
    }
  };
#if LAPTIME_ENABLED
  // What the user's environment set overrides the code, whichever comes first (SPEC §8).
  {
    detail::EnvOverrides o;
    o.off = s.from_env.stopwatch && !s.stopwatch;
    if (s.from_env.num_warmup_iters) o.warmup = s.num_warmup_iters;
    if (s.from_env.print_every_n_iters) o.print_every = s.print_every_n_iters;
    if (s.from_env.do_cuda_sync) o.cuda_sync = s.do_cuda_sync;
    step("environment overrides", [&] { detail::set_env_overrides(o); });
  }
#endif
  if (s.stopwatch && (s.stopwatch_all_ranks || rank == 0)) {
    Stopwatch& sw = Stopwatch::instance();
    step("LAPTIME_PRINT_RANK0_ONLY", [&] { sw.set_print_rank0_only(s.print_rank0_only); });
    for (const std::string& name : s.track_cpu) {
      step("LAPTIME_TRACK_CPU", [&] { sw.track_cpu_usage(name); });
    }
    if (s.gpu_timing) step("LAPTIME_GPU_TIMING", [&] { sw.enable_gpu_timing(); });
    for (const std::string& name : s.gpu_timing_names) {
      step("LAPTIME_GPU_TIMING", [&] { sw.enable_gpu_timing_for(name); });
    }
#if LAPTIME_ENABLED
    step("Stopwatch::enable", [&] {
      detail::enable_stopwatch(s.num_warmup_iters, s.print_every_n_iters, s.do_cuda_sync, "0",
                               /*from_env=*/true);
    });
#endif
  }
  // On every rank and whoever enables the Stopwatch (the code, or LAPTIME_STOPWATCH): recording
  // costs nothing until the Stopwatch measures.
#if LAPTIME_ENABLED
  if (s.record_intervals) {
    step("LAPTIME_RECORD",
         [&] { detail::stopwatch_state().set_recording(*s.record_intervals, true); });
  }
#endif
  if (s.nvtx) {
    step("NVTXRangeWrapper::enable", [&] {
      NVTXOptions options;
      options.domain = s.nvtx_domain;
      NVTXRangeWrapper::instance().enable(s.nvtx_sync_on_push, s.nvtx_sync_on_pop,
                                          s.nvtx_check_order, options);
    });
  }
}

/// Reads the LAPTIME_* variables and enables the tools they ask for. Returns what was applied.
/// Never throws and never aborts: a malformed value is warned about once and ignored.
LAPTIME_SETTINGS_FN Settings configure_from_env() {
  Settings s = settings_from_env([](const char* name) -> const char* { return std::getenv(name); });
  apply_settings(s);
  return s;
}

LAPTIME_END_NAMESPACE
