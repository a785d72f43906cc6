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

#include "laptime/counters.hpp"
#include "laptime/detail/env.hpp"
#include "laptime/detail/progress.hpp"
#include "laptime/detail/stopwatch_config.hpp"
#include "laptime/error.hpp"
#include "laptime/nvtx.hpp"
#include "laptime/settings.hpp"
#include "laptime/stopwatch.hpp"

LAPTIME_BEGIN_NAMESPACE

namespace detail {
LAPTIME_IMPL Settings settings_from_reader(EnvReader read, void* ctx) {
  auto getenv_fn = [read, ctx](const char* name) { return read(ctx, name); };
  Settings s;
  auto get = [&](const char* name) -> std::optional<std::string_view> {
    const char* v = getenv_fn(name);
    if (v == nullptr || *v == '\0') return std::nullopt;
    return std::string_view(v);
  };
  auto malformed = [&](const char* name, std::string_view value, const char* why) {
    s.warnings.push_back(detail::malformed_env(name, value, why));
  };
  // A boolean variable: true when it set `out`.
  auto flag = [&](const char* name, bool& out) {
    detail::EnvBool b = detail::read_env_bool(name, get(name));
    if (!b.warning.empty()) s.warnings.push_back(std::move(b.warning));
    if (b.value) out = *b.value;
    return b.value.has_value();
  };
  if (auto profile = get("LAPTIME_PROFILE")) {
    s.from_env.stopwatch = true;
    if (*profile == "training") {
    } else if (*profile == "evaluation") {
      s.stopwatch = true;
    } else if (*profile == "profiling") {
      s.stopwatch = s.nvtx = s.nvtx_ranges = true;
      s.from_env.nvtx_ranges = true;
      s.nvtx_counters = true;
      s.nvtx_counters_hz = 10;
    } else if (*profile == "debugging") {
      s.stopwatch = s.nvtx = s.nvtx_check_order = true;
    } else {
      s.from_env.stopwatch = false;
      malformed("LAPTIME_PROFILE", *profile,
                "is not one of training|evaluation|profiling|debugging");
    }
  }
  if (flag("LAPTIME_STOPWATCH", s.stopwatch)) s.from_env.stopwatch = true;
  if (auto v = get("LAPTIME_WARMUP")) {
    if (auto n = detail::parse_int(*v); n && *n >= 0) {
      s.num_warmup_iters = *n;
      s.from_env.num_warmup_iters = true;
    } else {
      malformed("LAPTIME_WARMUP", *v, "is not a number of iterations >= 0");
    }
  }
  if (auto v = get("LAPTIME_PRINT_EVERY")) {
    if (auto n = detail::parse_int(*v); n && *n >= 0) {
      s.print_every_n_iters = *n > 0 ? std::optional<int>(*n) : std::nullopt;
      s.from_env.print_every_n_iters = true;
    } else {
      malformed("LAPTIME_PRINT_EVERY", *v, "is not a number of iterations (0: never)");
    }
  }
  if (flag("LAPTIME_CUDA_SYNC", s.do_cuda_sync)) s.from_env.do_cuda_sync = true;
  if (auto v = get("LAPTIME_GPU_TIMING")) {
    // A boolean (every name), or a comma-separated list of the names to time on the GPU.
    // A name is printable text of at most 256 bytes: anything else is a malformed value.
    auto printable = [](std::string_view item) {
      if (item.empty() || item.size() > 256) return false;
      for (const char c : item) {
        const auto u = static_cast<unsigned char>(c);
        if (u < 0x20 || u == 0x7f) return false;
      }
      return true;
    };
    if (auto b = detail::parse_bool(*v)) {
      s.gpu_timing = *b;
    } else {
      std::vector<std::string> names;
      bool ok = true;
      std::string_view rest = *v;
      for (;;) {
        const auto comma = rest.find(',');
        const std::string_view item = rest.substr(0, comma);
        ok = ok && printable(item) && names.size() < 64;
        if (ok && std::find(names.begin(), names.end(), item) == names.end()) {
          names.emplace_back(item);
        }
        if (comma == std::string_view::npos) break;
        rest.remove_prefix(comma + 1);
      }
      if (ok) {
        s.gpu_timing_names = std::move(names);
      } else {
        malformed(
            "LAPTIME_GPU_TIMING", *v,
            "is neither a boolean nor a list of at most 64 names (printable, comma-separated)");
      }
    }
  }
  flag("LAPTIME_PRINT_RANK0_ONLY", s.print_rank0_only);
  if (auto v = get("LAPTIME_RANKS")) {
    if (*v == "all") {
      s.stopwatch_all_ranks = true;
    } else if (*v == "0") {
      s.stopwatch_all_ranks = false;
    } else {
      malformed("LAPTIME_RANKS", *v, "is not 0 or all");
    }
  }
  if (auto v = get("LAPTIME_TRACK_CPU")) {
    // Comma-separated; empty items and repeats are dropped, and a list longer than the bound is
    // cut, with one warning: the names the program measures must keep their room in the table.
    constexpr std::size_t bound =
        std::min<std::size_t>(detail::kMaxTrackCpuNames, LAPTIME_MAX_NAMES / 2);
    std::string_view rest = *v;
    std::size_t dropped = 0;
    while (!rest.empty()) {
      const auto comma = rest.find(',');
      const std::string_view item = rest.substr(0, comma);
      if (!item.empty() &&
          std::find(s.track_cpu.begin(), s.track_cpu.end(), item) == s.track_cpu.end()) {
        if (s.track_cpu.size() < bound) {
          s.track_cpu.emplace_back(item);
        } else {
          ++dropped;
        }
      }
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
    if (dropped > 0) {
      s.warnings.push_back("LAPTIME_TRACK_CPU lists " + std::to_string(dropped) +
                           " names more than its bound of " + std::to_string(bound) +
                           "; only the first " + std::to_string(bound) + " are tracked");
    }
  }
  {
    detail::EnvInt n = detail::read_env_int("LAPTIME_RECORD", get("LAPTIME_RECORD"), 0,
                                            detail::kMaxRecordIntervals,
                                            "is not a number of intervals per thread (0: off)",
                                            "the bound of intervals per thread (32 bytes each)");
    if (n.value) s.record_intervals = static_cast<std::size_t>(*n.value);
    if (!n.warning.empty()) s.warnings.push_back(std::move(n.warning));
  }
  if (auto v = get("LAPTIME_DATA_NAME")) s.data_name = std::string(*v);
  if (auto v = get("LAPTIME_PROGRESS")) {
    if (detail::parse_progress(*v)) {
      s.progress = std::string(*v);
    } else {
      malformed("LAPTIME_PROGRESS", *v, "is not one of report, line, off");
    }
  }
  flag("LAPTIME_NVTX", s.nvtx);
  flag("LAPTIME_NVTX_SYNC_PUSH", s.nvtx_sync_on_push);
  flag("LAPTIME_NVTX_SYNC_POP", s.nvtx_sync_on_pop);
  flag("LAPTIME_NVTX_CHECK_ORDER", s.nvtx_check_order);
  if (auto v = get("LAPTIME_NVTX_DOMAIN")) s.nvtx_domain = std::string(*v);
  flag("LAPTIME_NVTX_COUNTERS", s.nvtx_counters);
  if (auto v = get("LAPTIME_NVTX_COUNTERS_HZ")) {
    const std::string text(*v);
    char* end = nullptr;
    const double hz = std::strtod(text.c_str(), &end);
    if (end != nullptr && *end == '\0' && hz >= 0 && hz <= 1000) {  // NaN fails the comparisons
      s.nvtx_counters_hz = hz;
      // A rate turns the counters on, unless LAPTIME_NVTX_COUNTERS said no.
      if (hz > 0 && !get("LAPTIME_NVTX_COUNTERS")) s.nvtx_counters = true;
    } else {
      malformed("LAPTIME_NVTX_COUNTERS_HZ", *v, "is not a rate between 0 and 1000 per second");
    }
  }
  if (flag("LAPTIME_NVTX_RANGES", s.nvtx_ranges)) s.from_env.nvtx_ranges = true;
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
}  // namespace detail

/// Applies `s` to the Stopwatch and the NVTX wrapper of this process. Never throws: a setting
/// that cannot be applied (the name table full, an enable() that conflicts with the code's) is
/// warned about once, whatever the error policy, and the others are still applied.
LAPTIME_IMPL void apply_settings(const Settings& s, int rank) noexcept {
  for (const std::string& w : s.warnings) detail::warn_once(w, w);
  // Runs one step; an error becomes a warning (reading the environment never throws,
  // docs/configuration.md).
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
  // What the user's environment set overrides the code, whichever comes first
  // (docs/configuration.md).
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
    const std::size_t tracked = detail::track_cpu_room(s.track_cpu.size());
    for (std::size_t i = 0; i < tracked; ++i) {
      step("LAPTIME_TRACK_CPU", [&] { sw.track_cpu_usage(s.track_cpu[i]); });
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
  if (s.data_name) {
    step("LAPTIME_DATA_NAME",
         [&] { detail::stopwatch_state().set_data_name(*s.data_name, /*from_env=*/true); });
  }
  if (const auto mode = detail::parse_progress(s.progress)) {
    step("LAPTIME_PROGRESS",
         [&] { detail::stopwatch_state().set_progress(*mode, /*from_env=*/true); });
  }
#endif
  // Like LAPTIME_RECORD: on every rank, whoever enables the Stopwatch; only the environment's
  // choice is applied (it overrides the code's set_nvtx_ranges).
#if LAPTIME_ENABLED
  if (s.from_env.nvtx_ranges) {
    step("LAPTIME_NVTX_RANGES",
         [&] { detail::stopwatch_state().set_nvtx_ranges(s.nvtx_ranges, true); });
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
  // After the wrapper: the counters go to its named domain where it has one.
  if (s.nvtx_counters) {
    step("LAPTIME_NVTX_COUNTERS", [&] { enable_nvtx_counters(s.nvtx_counters_hz); });
  }
}

/// Reads the LAPTIME_* variables and enables the tools they ask for. Returns what was applied.
/// Never throws and never aborts: a malformed value is warned about once and ignored.
LAPTIME_IMPL void apply_settings(const Settings& s) noexcept {
  apply_settings(s, detail::detect_rank().rank);
}

LAPTIME_IMPL Settings configure_from_env() {
  Settings s = settings_from_env([](const char* name) { return detail::env_raw(name); });
  apply_settings(s);
  return s;
}

LAPTIME_END_NAMESPACE
#endif  // LAPTIME_ENABLED
