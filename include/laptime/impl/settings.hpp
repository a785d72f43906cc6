// laptime internals: apply_settings and configure_from_env (settings.hpp), the implementation
// part: laptime.hpp and src/laptime.cpp carry it (weak). Compiled out, settings.hpp has no-ops.
#pragma once

#include "laptime/config.hpp"
#if LAPTIME_ENABLED

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "laptime/counters.hpp"
#include "laptime/detail/env_vars.hpp"
#include "laptime/detail/report.hpp"
#include "laptime/impl/nvtx_setup.hpp"
#include "laptime/impl/progress.hpp"
#include "laptime/impl/stopwatch_config.hpp"
#include "laptime/nvtx.hpp"
#include "laptime/settings.hpp"
#include "laptime/stopwatch.hpp"

LAPTIME_BEGIN_NAMESPACE

namespace detail {

// The value of a reading; its warning, if any, joins the settings' warnings.
template <class Reading>
auto take(Settings& s, Reading reading) {
  if (!reading.warning.empty()) s.warnings.push_back(std::move(reading.warning));
  return std::move(reading.value);
}

// A boolean variable into `out`: true when the variable set it.
template <Env Var>
bool take_flag(Settings& s, EnvSource src, bool& out) {
  const std::optional<bool> b = take(s, env_bool<Var>(src));
  if (b) out = *b;
  return b.has_value();
}

// LAPTIME_PROFILE: the seed's run types, under the variables of each setting.
inline void read_profile(Settings& s, EnvSource src) {
  const std::optional<int> profile = take(s, env_choice<Env::profile>(src));
  if (!profile) return;
  s.from_env.stopwatch = true;
  s.from_env.nvtx = true;
  switch (*profile) {  // training|evaluation|profiling|debugging
    case 0:
      break;
    case 1:
      s.stopwatch = true;
      break;
    case 2:
      s.stopwatch = s.nvtx = s.nvtx_ranges = true;
      s.from_env.nvtx_ranges = true;
      s.nvtx_counters = true;
      s.nvtx_counters_hz = 10;
      break;
    default:
      s.stopwatch = s.nvtx = s.nvtx_check_order = true;
      s.from_env.nvtx_check_order = true;
      break;
  }
}

// The Stopwatch's variables.
inline void read_stopwatch_settings(Settings& s, EnvSource src) {
  if (take_flag<Env::stopwatch>(s, src, s.stopwatch)) s.from_env.stopwatch = true;
  if (const auto n = take(s, env_int<Env::warmup>(src))) {
    s.num_warmup_iters = *n;
    s.from_env.num_warmup_iters = true;
  }
  if (const auto n = take(s, env_int<Env::print_every>(src))) {
    s.print_every_n_iters = *n > 0 ? std::optional<int>(*n) : std::nullopt;
    s.from_env.print_every_n_iters = true;
  }
  if (take_flag<Env::cuda_sync>(s, src, s.do_cuda_sync)) s.from_env.do_cuda_sync = true;
  EnvBoolOrNames gpu = env_bool_or_names<Env::gpu_timing>(src);
  if (gpu.all) s.gpu_timing = *gpu.all;
  if (gpu.names) s.gpu_timing_names = std::move(*gpu.names);
  if (!gpu.warning.empty()) s.warnings.push_back(std::move(gpu.warning));
  if (take_flag<Env::print_rank0_only>(s, src, s.print_rank0_only)) {
    s.from_env.print_rank0_only = true;
  }
  if (const auto ranks = take(s, env_choice<Env::ranks>(src))) {
    s.stopwatch_all_ranks = *ranks == 1;  // 0|all
  }
  // Cut at its bound with one warning: the names the program measures keep their room.
  if (auto names = take(s, env_names<Env::track_cpu>(src))) s.track_cpu = std::move(*names);
  if (const auto n = take(s, env_int<Env::record>(src))) {
    s.record_intervals = static_cast<std::size_t>(*n);
  }
  if (const auto v = env_text<Env::data_name>(src)) s.data_name = std::string(*v);
  const auto progress = env_text(env_var(Env::progress), src);
  if (take(s, read_choice(env_var(Env::progress), progress))) s.progress = std::string(*progress);
}

// The NVTX wrapper's variables, its counters' and the Stopwatch's ranges.
inline void read_nvtx_settings(Settings& s, EnvSource src) {
  if (take_flag<Env::nvtx>(s, src, s.nvtx)) s.from_env.nvtx = true;
  if (take_flag<Env::nvtx_sync_push>(s, src, s.nvtx_sync_on_push)) {
    s.from_env.nvtx_sync_on_push = true;
  }
  if (take_flag<Env::nvtx_sync_pop>(s, src, s.nvtx_sync_on_pop)) s.from_env.nvtx_sync_on_pop = true;
  if (take_flag<Env::nvtx_check_order>(s, src, s.nvtx_check_order)) {
    s.from_env.nvtx_check_order = true;
  }
  if (const auto v = env_text<Env::nvtx_domain>(src)) {
    s.nvtx_domain = std::string(*v);
    s.from_env.nvtx_domain = true;
  }
  take_flag<Env::nvtx_counters>(s, src, s.nvtx_counters);
  if (const auto hz = take(s, env_rate<Env::nvtx_counters_hz>(src))) {
    s.nvtx_counters_hz = *hz;
    // A rate turns the counters on, unless LAPTIME_NVTX_COUNTERS was set.
    if (*hz > 0 && !env_text(env_var(Env::nvtx_counters), src)) s.nvtx_counters = true;
  }
  if (take_flag<Env::nvtx_ranges>(s, src, s.nvtx_ranges)) s.from_env.nvtx_ranges = true;
}

LAPTIME_IMPL Settings settings_from_reader(EnvReader read, void* ctx) {
  const EnvSource src{read, ctx};
  Settings s;
  read_profile(s, src);
  read_stopwatch_settings(s, src);
  read_nvtx_settings(s, src);
  return s;
}

// How many of LAPTIME_TRACK_CPU's `listed` names are tracked: at most half the name limit in
// force (LAPTIME_MAX_NAMES in the environment may lower it below the table's capacity), so that
// the other half stays for the names the program measures. Past it, one warning.
inline std::size_t track_cpu_room(std::size_t listed) {
  const std::size_t room = stopwatch_state().max_names.load() / 2;
  if (listed > room) {
    warn_once("settings:LAPTIME_TRACK_CPU:room",
              "LAPTIME_TRACK_CPU lists more names than half the name limit (" +
                  std::to_string(room) + "); only the first " + std::to_string(room) +
                  " are tracked");
  }
  return std::min(room, listed);
}

// Settings::track_cpu as applied: its distinct names, empty ones dropped, at most
// kMaxTrackCpuNames and half the name limit in force, with one warning past that bound. The
// environment's list arrives read (distinct, within the bound, fitted: fit_lists_to_room); a list
// made in code arrives as the program filled it. The scan stops one name past the bound.
inline std::vector<std::string_view> track_cpu_applied(const Settings& s) {
  const std::size_t room =
      std::min(kMaxTrackCpuNames, std::size_t{stopwatch_state().max_names.load() / 2});
  std::vector<std::string_view> names;
  for (const std::string& n : s.track_cpu) {
    if (names.size() > room) break;
    if (n.empty() || std::find(names.begin(), names.end(), n) != names.end()) continue;
    names.emplace_back(n);
  }
  if (names.size() > room) {
    warn_once(
        "settings:LAPTIME_TRACK_CPU:bound",
        "apply_settings: LAPTIME_TRACK_CPU (track_cpu) lists more than " + std::to_string(room) +
            " distinct names (its bound: " + std::to_string(kMaxTrackCpuNames) +
            ", and half the name limit); only the first " + std::to_string(room) + " are tracked");
    names.resize(room);
  }
  return names;
}

// How many of the `listed` GPU-timed names are applied: at most LAPTIME_GPU_TIMING's bound (64)
// and at most a quarter of the name limit in force, so that with LAPTIME_TRACK_CPU's half a
// quarter of the table stays for the names the program measures. Past it, one warning. The
// environment's list is checked at its bound when read; Settings made in code arrive here unread.
inline std::size_t gpu_timing_room(std::size_t listed) {
  const std::size_t room = std::min(static_cast<std::size_t>(kMaxGpuTimingNames),
                                    std::size_t{stopwatch_state().max_names.load() / 4});
  if (listed > room) {
    warn_once("settings:LAPTIME_GPU_TIMING:room",
              "apply_settings: LAPTIME_GPU_TIMING (gpu_timing_names) lists " +
                  std::to_string(listed) + " names, more than its bound of " +
                  std::to_string(room) + "; only the first " + std::to_string(room) +
                  " are timed on the GPU");
  }
  return std::min(room, listed);
}

// LAPTIME_RECORD's bound on the intervals kept per thread, for a Settings made in code (the
// environment's value was clamped when read): above it, the bound with one warning.
inline std::size_t record_bound(std::size_t asked) {
  constexpr auto bound = static_cast<std::size_t>(kMaxRecordIntervals);
  if (asked <= bound) return asked;
  warn_once("settings:LAPTIME_RECORD:bound",
            "apply_settings: LAPTIME_RECORD (record_intervals) of " + std::to_string(asked) +
                " is above " + std::to_string(bound) +
                ", the bound of intervals per thread (32 bytes each); " + std::to_string(bound) +
                " is used");
  return bound;
}

// Runs one step of apply_settings; an error becomes a warning (applying settings never throws,
// docs/configuration.md). Named "apply_settings": the settings may come from the environment
// (configure_from_env) or from the program's code.
template <class Fn>
void settings_step(const char* what, Fn&& fn) noexcept {
  try {
    fn();
  } catch (const std::exception& e) {
    warn_once(std::string("settings:") + what,
              std::string("apply_settings: ") + what + ": " + e.what());
  } catch (...) {
    warn_once(std::string("settings:") + what, std::string("apply_settings: ") + what + " failed");
  }
}

// What the user's environment set overrides the code, whichever comes first
// (docs/configuration.md).
inline void apply_env_overrides(const Settings& s) {
  EnvOverrides o;
  o.off = s.from_env.stopwatch && !s.stopwatch;
  if (s.from_env.num_warmup_iters) o.warmup = s.num_warmup_iters;
  if (s.from_env.print_every_n_iters) o.print_every = s.print_every_n_iters;
  if (s.from_env.do_cuda_sync) o.cuda_sync = s.do_cuda_sync;
  settings_step("environment overrides", [&] { set_env_overrides(o); });
}

// The Stopwatch, on the ranks where the environment enables it.
inline void apply_stopwatch_settings(const Settings& s) {
  settings_step("Stopwatch::enable", [&] {
    enable_stopwatch(s.num_warmup_iters, s.print_every_n_iters, s.do_cuda_sync, "0",
                     /*from_env=*/true);
  });
}

// On every rank and whoever enables the Stopwatch (the code, or LAPTIME_STOPWATCH): recording
// costs nothing until the Stopwatch measures. Of the NVTX ranges only the environment's choice
// is applied (it overrides the code's set_nvtx_ranges).
inline void apply_every_rank_settings(const Settings& s) {
  // What the Stopwatch does once enabled, by the environment or by the code's own enable() (the
  // reports stay on rank 0 by default there too).
  Stopwatch& sw = Stopwatch::instance();
  settings_step("LAPTIME_PRINT_RANK0_ONLY", [&] {
    set_print_rank0_only(stopwatch_state(), s.print_rank0_only,
                         s.from_env.print_rank0_only ? Rank0Source::env : Rank0Source::fallback);
  });
  for (const std::string_view name : track_cpu_applied(s)) {
    settings_step("LAPTIME_TRACK_CPU", [&] { sw.track_cpu_usage(name); });
  }
  if (s.gpu_timing) settings_step("LAPTIME_GPU_TIMING", [&] { sw.enable_gpu_timing(); });
  const std::size_t gpu_names = gpu_timing_room(s.gpu_timing_names.size());
  for (std::size_t i = 0; i < gpu_names; ++i) {
    settings_step("LAPTIME_GPU_TIMING", [&] { sw.enable_gpu_timing_for(s.gpu_timing_names[i]); });
  }
  // stopwatch_state() inside each step: nothing is made where nothing is set.
  if (s.record_intervals) {
    const std::size_t n = record_bound(*s.record_intervals);
    settings_step("LAPTIME_RECORD", [&] { stopwatch_state().set_recording(n, true); });
  }
  if (s.data_name) {
    settings_step("LAPTIME_DATA_NAME",
                  [&] { stopwatch_state().set_data_name(*s.data_name, /*from_env=*/true); });
  }
  if (const auto mode = parse_progress(s.progress)) {
    settings_step("LAPTIME_PROGRESS",
                  [&] { stopwatch_state().set_progress(*mode, /*from_env=*/true); });
  }
  if (s.from_env.nvtx_ranges) {
    settings_step("LAPTIME_NVTX_RANGES",
                  [&] { stopwatch_state().set_nvtx_ranges(s.nvtx_ranges, true); });
  }
}

// Whether the environment set any of the wrapper's variables (LAPTIME_PROFILE included).
inline bool nvtx_variables_set(const Settings& s) {
  const Settings::FromEnv& e = s.from_env;
  return e.nvtx || e.nvtx_sync_on_push || e.nvtx_sync_on_pop || e.nvtx_check_order || e.nvtx_domain;
}

// The wrapper's variables, over the code's enable() whichever comes first (nvtx_enable).
inline void apply_nvtx_variables(const Settings& s) {
  const Settings::FromEnv& e = s.from_env;
  NvtxEnvOverrides o;
  o.off = e.nvtx && !s.nvtx;
  if (e.nvtx_sync_on_push) o.sync_on_push = s.nvtx_sync_on_push;
  if (e.nvtx_sync_on_pop) o.sync_on_pop = s.nvtx_sync_on_pop;
  if (e.nvtx_check_order) o.track = s.nvtx_check_order;
  if (e.nvtx_domain) o.domain = s.nvtx_domain;
  nvtx_configure_from_env(nvtx_state(), o, e.nvtx && s.nvtx);
}
// configure_from_env's lists cut to their room in the name table before they are applied, so
// that the Settings it returns are the ones applied. The room's warning replaces the reading's
// (which named a larger bound): one warning per variable.
inline void fit_lists_to_room(Settings& s) {
  const std::string_view cut_by_reading = "LAPTIME_TRACK_CPU lists ";
  const std::size_t room = track_cpu_room(s.track_cpu.size());
  if (room < s.track_cpu.size()) {
    s.track_cpu.resize(room);
    std::vector<std::string>& w = s.warnings;
    w.erase(std::remove_if(w.begin(), w.end(),
                           [&](const std::string& x) { return x.rfind(cut_by_reading, 0) == 0; }),
            w.end());
  }
  s.gpu_timing_names.resize(gpu_timing_room(s.gpu_timing_names.size()));
}
}  // namespace detail

/// Applies `s` to the Stopwatch and the NVTX wrapper of this process. Never throws: a setting
/// that cannot be applied (the name table full, an enable() that conflicts with the code's) is
/// warned about once, whatever the error policy, and the others are still applied.
LAPTIME_IMPL void apply_settings(const Settings& s, int rank) noexcept {
  for (const std::string& w : s.warnings) detail::warn_once(w, w);
  detail::apply_env_overrides(s);
  detail::apply_every_rank_settings(s);
  if (s.stopwatch && (s.stopwatch_all_ranks || rank == 0)) detail::apply_stopwatch_settings(s);
  if (detail::nvtx_variables_set(s)) {
    detail::settings_step("the NVTX variables", [&] { detail::apply_nvtx_variables(s); });
  } else if (s.nvtx) {
    detail::settings_step("NVTXRangeWrapper::enable", [&] {
      NVTXOptions options;
      options.domain = s.nvtx_domain;
      NVTXRangeWrapper::instance().enable(s.nvtx_sync_on_push, s.nvtx_sync_on_pop,
                                          s.nvtx_check_order, options);
    });
  }
  // After the wrapper: the counters go to its named domain where it has one.
  if (s.nvtx_counters) {
    detail::settings_step("LAPTIME_NVTX_COUNTERS",
                          [&] { enable_nvtx_counters(s.nvtx_counters_hz); });
  }
}

LAPTIME_IMPL void apply_settings(const Settings& s) noexcept {
  apply_settings(s, detail::detect_rank().rank);
}

/// Reads the LAPTIME_* variables and enables the tools they ask for. Returns what was applied.
/// Never throws and never aborts: a malformed value is warned about once and ignored.
LAPTIME_IMPL Settings configure_from_env() {
  Settings s = detail::settings_from_reader(nullptr, nullptr);  // this process's environment
  detail::settings_step("the name lists", [&] { detail::fit_lists_to_room(s); });
  apply_settings(s);
  return s;
}

LAPTIME_END_NAMESPACE
#endif  // LAPTIME_ENABLED
