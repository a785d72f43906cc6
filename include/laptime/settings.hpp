// laptime: switching the tools per run type from the environment (SPEC §8), the way the seed
// switched them from its config file:
//
//   LAPTIME_PROFILE=training     everything off (the real run)
//   LAPTIME_PROFILE=evaluation   Stopwatch only
//   LAPTIME_PROFILE=profiling    Stopwatch and NVTX ranges, no range-order checks (cheapest)
//   LAPTIME_PROFILE=debugging    Stopwatch and NVTX ranges with range-order checks
//
// and one variable per setting on top (docs/configuration.md lists them all). In the program:
//
//   laptime::configure_from_env();   // once, at start-up; does nothing when no variable is set
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "laptime/config.hpp"
#include "laptime/detail/env.hpp"
#include "laptime/error.hpp"
#include "laptime/nvtx.hpp"
#include "laptime/stopwatch.hpp"
// Enabled, apply_settings and configure_from_env are out of line (weak, LAPTIME_IMPL) in the
// implementation part; compiled out, they are inline here (no library to link).
#if LAPTIME_ENABLED
#define LAPTIME_SETTINGS_FN LAPTIME_IMPL
#else
#define LAPTIME_SETTINGS_FN inline
#endif

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

  bool nvtx = false;
  bool nvtx_sync_on_push = false;
  bool nvtx_sync_on_pop = false;
  bool nvtx_check_order = false;
  std::string nvtx_domain;

  std::vector<std::string> warnings;  ///< one line per malformed variable (it was ignored)

  /// Which settings the user's environment gave (SPEC §8: those override the code's calls, in
  /// any order; the others are the code's, or built-in defaults).
  struct FromEnv {
    bool stopwatch = false;  ///< LAPTIME_PROFILE or LAPTIME_STOPWATCH
    bool num_warmup_iters = false, print_every_n_iters = false, do_cuda_sync = false;
  } from_env;
};

/// Reads the LAPTIME_* variables through `getenv_fn` (a pure function of them; testable).
template <class Getenv>
Settings settings_from_env(Getenv&& getenv_fn) {
  Settings s;
  auto get = [&](const char* name) -> std::optional<std::string_view> {
    const char* v = getenv_fn(name);
    if (v == nullptr || *v == '\0') return std::nullopt;
    return std::string_view(v);
  };
  // "NAME='value' <why>; ignored", the value escaped (it must not rewrite the terminal) and cut
  // to a readable length.
  auto malformed = [&](const char* name, std::string_view value, const char* why) {
    std::string w = name;
    w += '=';
    w += detail::quoted(value.substr(0, 64));
    if (value.size() > 64) w += "...";
    w += ' ';
    w += why;
    w += "; ignored";
    s.warnings.push_back(std::move(w));
  };
  auto flag = [&](const char* name, bool& out) {
    if (auto v = get(name)) {
      if (auto b = detail::parse_bool(*v)) {
        out = *b;
      } else {
        malformed(name, *v, "is not a boolean (1/0, true/false, on/off)");
      }
    }
  };
  if (auto profile = get("LAPTIME_PROFILE")) {
    s.from_env.stopwatch = true;
    if (*profile == "training") {
    } else if (*profile == "evaluation") {
      s.stopwatch = true;
    } else if (*profile == "profiling") {
      s.stopwatch = s.nvtx = true;
    } else if (*profile == "debugging") {
      s.stopwatch = s.nvtx = s.nvtx_check_order = true;
    } else {
      s.from_env.stopwatch = false;
      malformed("LAPTIME_PROFILE", *profile,
                "is not one of training|evaluation|profiling|debugging");
    }
  }
  if (get("LAPTIME_STOPWATCH") && detail::parse_bool(*get("LAPTIME_STOPWATCH"))) {
    s.from_env.stopwatch = true;
  }
  flag("LAPTIME_STOPWATCH", s.stopwatch);
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
  if (get("LAPTIME_CUDA_SYNC") && detail::parse_bool(*get("LAPTIME_CUDA_SYNC"))) {
    s.from_env.do_cuda_sync = true;
  }
  flag("LAPTIME_CUDA_SYNC", s.do_cuda_sync);
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
    // Comma-separated; empty items and repeats are dropped, and no more names are kept than the
    // name table holds (LAPTIME_MAX_NAMES): a longer list is cut, with one warning.
    std::string_view rest = *v;
    std::size_t dropped = 0;
    while (!rest.empty()) {
      const auto comma = rest.find(',');
      const std::string_view item = rest.substr(0, comma);
      if (!item.empty() &&
          std::find(s.track_cpu.begin(), s.track_cpu.end(), item) == s.track_cpu.end()) {
        if (s.track_cpu.size() < static_cast<std::size_t>(LAPTIME_MAX_NAMES)) {
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
                           " names more than LAPTIME_MAX_NAMES (" +
                           std::to_string(LAPTIME_MAX_NAMES) + "); those are not tracked");
    }
  }
  if (auto v = get("LAPTIME_RECORD")) {
    if (auto n = detail::parse_int(*v); n && *n >= 0) {
      s.record_intervals = static_cast<std::size_t>(*n);
    } else {
      malformed("LAPTIME_RECORD", *v, "is not a number of intervals per thread (0: off)");
    }
  }
  flag("LAPTIME_NVTX", s.nvtx);
  flag("LAPTIME_NVTX_SYNC_PUSH", s.nvtx_sync_on_push);
  flag("LAPTIME_NVTX_SYNC_POP", s.nvtx_sync_on_pop);
  flag("LAPTIME_NVTX_CHECK_ORDER", s.nvtx_check_order);
  if (auto v = get("LAPTIME_NVTX_DOMAIN")) s.nvtx_domain = std::string(*v);
  return s;
}

/// Applies `s` to the Stopwatch and the NVTX wrapper of this process. Never throws: a setting
/// that cannot be applied (the name table full, an enable() that conflicts with the code's) is
/// warned about once, whatever the error policy, and the others are still applied.
/// (Out of line: detail/settings_impl.hpp, in laptime.hpp and the compiled library.)
LAPTIME_SETTINGS_FN void apply_settings(const Settings& s,
                                        int rank = detail::detect_rank().rank) noexcept;

/// Reads the LAPTIME_* variables and enables the tools they ask for. Returns what was applied.
/// Never throws and never aborts: a malformed value is warned about once and ignored.
LAPTIME_SETTINGS_FN Settings configure_from_env();

LAPTIME_END_NAMESPACE

#if !LAPTIME_ENABLED
#include "laptime/detail/settings_impl.hpp"
#endif
