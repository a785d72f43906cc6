// laptime internals: every LAPTIME_* variable, in one table (name, type, default, when it is read,
// what it does), and the one reading of each type with its one warning text per kind of bad value.
// Every LAPTIME_* variable is read here and nowhere else: the rest of laptime asks this file for a
// typed value (`env_bool<Env::workers>()`). docs/configuration.md's table of variables shows the
// same rows (settings-test checks that they agree, and that no header reads a variable otherwise).
// The warnings come back as text: error.hpp's env_checked() gives them once, and settings_from_env
// returns them. Machinery: includes no public header but config.hpp.
#pragma once

#include <climits>
#include <cstddef>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "laptime/config.hpp"
#include "laptime/detail/env.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

/// The bounds of the variables that size memory. LAPTIME_TRACK_CPU names at most this many names
/// (and at most half the name limit in force), so that the names the program measures always
/// find room in the name table.
inline constexpr std::size_t kMaxTrackCpuNames = 256;
/// LAPTIME_RECORD (and Stopwatch::enable_recording) keep at most this many intervals per thread:
/// 32 bytes each, so 32 MB per thread that measures.
inline constexpr int kMaxRecordIntervals = 1000000;
/// LAPTIME_GPU_TIMING names at most this many names.
inline constexpr int kMaxGpuTimingNames = 64;
/// LAPTIME_TRACK_CPU's bound: kMaxTrackCpuNames, or half the table where that is less.
inline constexpr long long kTrackCpuBound =
    kMaxTrackCpuNames < LAPTIME_MAX_NAMES / 2 ? kMaxTrackCpuNames : LAPTIME_MAX_NAMES / 2;

/// The types of variables, each with one parser and one warning per kind of bad value.
enum class EnvType : unsigned char {
  Flag,    ///< a boolean: parse_bool; malformed: kNotABoolean
  Int,     ///< parse_int within [lowest, highest]; below or not a number: malformed; above: clamped
  Rate,    ///< a decimal number within [lowest, highest]; outside: malformed
  Choice,  ///< one of `values` ("a|b|c"), exactly or in any case
  Text,    ///< any text (a name, a domain)
  Names,   ///< a comma-separated list: empty items and repeats dropped, cut at `highest`
  BoolOrNames,  ///< a bool, or a strict list of at most `highest` printable names
  Path,         ///< a file path, taken as it is
  SetByLaptime  ///< written by laptime for its child processes, validated where it is used
};

/// Every variable, in the table's order.
enum class Env : unsigned char {
  profile,
  stopwatch,
  warmup,
  print_every,
  cuda_sync,
  gpu_timing,
  print_rank0_only,
  ranks,
  track_cpu,
  record,
  data_name,
  progress,
  nvtx,
  nvtx_sync_push,
  nvtx_sync_pop,
  nvtx_check_order,
  nvtx_domain,
  nvtx_counters,
  nvtx_counters_hz,
  nvtx_ranges,
  on_error,
  max_names,
  output,
  print_at_exit,
  signal_handlers,
  report_format,
  workers,
  worker_share,
  cuda_driver,
  clock,
  singleton_anchor,
  count
};

/// One row of the table.
struct EnvVar {
  Env id;
  const char* name;
  EnvType type;
  const char* values;    ///< Choice: "a|b|c"; Int, Rate, Names: the unit, for the warnings
  long long lowest;      ///< Int, Rate
  long long highest;     ///< Int, Rate; Names, BoolOrNames: the most names
  bool any_case;         ///< Choice: the values in any case
  const char* bound_is;  ///< Int: what `highest` is, for the warning of a value above it
  const char* default_text;
  const char* read_at;  ///< when it is read
  const char* what;
};

namespace env_row {
constexpr EnvVar make(Env id, const char* name, EnvType type, const char* dflt, const char* when,
                      const char* what) {
  return EnvVar{id, name, type, "", 0, 0, false, "", dflt, when, what};
}
constexpr EnvVar boolean(Env id, const char* name, const char* dflt, const char* when,
                         const char* what) {
  return make(id, name, EnvType::Flag, dflt, when, what);
}
constexpr EnvVar counted(Env id, const char* name, EnvType type, const char* unit, long long lowest,
                         long long highest, const char* dflt, const char* when, const char* what) {
  return EnvVar{id, name, type, unit, lowest, highest, false, "", dflt, when, what};
}
constexpr EnvVar bounded(Env id, const char* name, const char* unit, long long lowest,
                         long long highest, const char* bound_is, const char* dflt,
                         const char* when, const char* what) {
  return EnvVar{id, name, EnvType::Int, unit, lowest, highest, false, bound_is, dflt, when, what};
}
constexpr EnvVar choice(Env id, const char* name, const char* values, bool any_case,
                        const char* dflt, const char* when, const char* what) {
  return EnvVar{id, name, EnvType::Choice, values, 0, 0, any_case, "", dflt, when, what};
}
inline constexpr const char* kSettings = "configure_from_env()";
inline constexpr const char* kFirstEnable = "first enable()";
}  // namespace env_row

// clang-format off
inline constexpr EnvVar kEnvVars[] = {
    env_row::choice(Env::profile, "LAPTIME_PROFILE", "training|evaluation|profiling|debugging",
        false, "none", env_row::kSettings, "the run type: which tools are on"),
    env_row::boolean(Env::stopwatch, "LAPTIME_STOPWATCH", "the profile's, else 0",
        env_row::kSettings, "the Stopwatch on or off"),
    env_row::counted(Env::warmup, "LAPTIME_WARMUP", EnvType::Int, "iterations", 0, INT_MAX,
        "10", env_row::kSettings, "num_warmup_iters"),
    env_row::counted(Env::print_every, "LAPTIME_PRINT_EVERY", EnvType::Int, "iterations", 0,
        INT_MAX, "0 (never)", env_row::kSettings, "print_every_n_iters"),
    env_row::boolean(Env::cuda_sync, "LAPTIME_CUDA_SYNC", "0", env_row::kSettings,
        "do_cuda_sync: a context sync at each timestamp"),
    env_row::counted(Env::gpu_timing, "LAPTIME_GPU_TIMING", EnvType::BoolOrNames, "names", 0,
        kMaxGpuTimingNames, "0", env_row::kSettings, "CUDA-event GPU time, of all or these names"),
    env_row::boolean(Env::print_rank0_only, "LAPTIME_PRINT_RANK0_ONLY", "1", env_row::kSettings,
        "reports only on rank 0"),
    env_row::choice(Env::ranks, "LAPTIME_RANKS", "0|all", false, "`0`", env_row::kSettings,
        "which ranks enable the Stopwatch"),
    env_row::counted(Env::track_cpu, "LAPTIME_TRACK_CPU", EnvType::Names, "names", 0,
        kTrackCpuBound, "none", env_row::kSettings, "names whose CPU and I/O are sampled"),
    env_row::bounded(Env::record, "LAPTIME_RECORD", "intervals per thread", 0,
        kMaxRecordIntervals, "the bound of intervals per thread (32 bytes each)", "0 (off)",
        "configure_from_env(), first enable()", "keep each thread's last N intervals"),
    env_row::make(Env::data_name, "LAPTIME_DATA_NAME", EnvType::Text, "the program's",
        env_row::kSettings, "the verdict's data-wait name"),
    env_row::choice(Env::progress, "LAPTIME_PROGRESS", "report|line|off", true, "`report`",
        env_row::kSettings, "what periodic printing prints"),
    env_row::boolean(Env::nvtx, "LAPTIME_NVTX", "the profile's, else 0", env_row::kSettings,
        "the NVTX wrapper on or off"),
    env_row::boolean(Env::nvtx_sync_push, "LAPTIME_NVTX_SYNC_PUSH", "0", env_row::kSettings,
        "a CUDA sync before each push"),
    env_row::boolean(Env::nvtx_sync_pop, "LAPTIME_NVTX_SYNC_POP", "0", env_row::kSettings,
        "a CUDA sync before each pop"),
    env_row::boolean(Env::nvtx_check_order, "LAPTIME_NVTX_CHECK_ORDER", "the profile's, else 0",
        env_row::kSettings, "check the order of ranges"),
    env_row::make(Env::nvtx_domain, "LAPTIME_NVTX_DOMAIN", EnvType::Text, "the global domain",
        env_row::kSettings, "the NVTX domain"),
    env_row::boolean(Env::nvtx_counters, "LAPTIME_NVTX_COUNTERS", "the profile's, else 0",
        env_row::kSettings, "tracked names' CPU and I/O as NVTX counters"),
    env_row::counted(Env::nvtx_counters_hz, "LAPTIME_NVTX_COUNTERS_HZ", EnvType::Rate,
        "samples per second", 0, 1000, "the profile's, else 0", env_row::kSettings,
        "the process tree's figures as counters, this often"),
    env_row::boolean(Env::nvtx_ranges, "LAPTIME_NVTX_RANGES", "the profile's, else 0",
        env_row::kSettings, "every Stopwatch interval also an NVTX range"),
    env_row::choice(Env::on_error, "LAPTIME_ON_ERROR", "throw|warn|abort", false, "`throw`",
        "first use", "what a usage error does"),
    env_row::bounded(Env::max_names, "LAPTIME_MAX_NAMES", "names", 1, LAPTIME_MAX_NAMES,
        "the compile-time capacity", "the compile-time `LAPTIME_MAX_NAMES`", "first use",
        "a run-time limit on distinct names"),
    env_row::make(Env::output, "LAPTIME_OUTPUT", EnvType::Path, "none", env_row::kFirstEnable,
        "the JSON results' path at exit (a relative one from the folder of the first enable())"),
    env_row::boolean(Env::print_at_exit, "LAPTIME_PRINT_AT_EXIT", "0", env_row::kFirstEnable,
        "print the report at exit"),
    env_row::boolean(Env::signal_handlers, "LAPTIME_SIGNAL_HANDLERS", "1", env_row::kFirstEnable,
        "write the JSON on ending signals too"),
    env_row::choice(Env::report_format, "LAPTIME_REPORT_FORMAT", "table|seed", true, "`table`",
        "each enable()", "the printed report's layout: laptime's table or the seed's"),
    env_row::boolean(Env::workers, "LAPTIME_WORKERS", "1", env_row::kFirstEnable,
        "a shared file for worker processes"),
    env_row::make(Env::worker_share, "LAPTIME_WORKER_SHARE", EnvType::SetByLaptime, "none",
        "first use", "the parent's shared file, for its workers"),
    env_row::make(Env::cuda_driver, "LAPTIME_CUDA_DRIVER", EnvType::Path, "`libcuda.so.1`",
        "first CUDA use", "the CUDA driver library"),
    env_row::choice(Env::clock, "LAPTIME_CLOCK", "steady|tsc", false,
        "the invariant TSC, else `steady`", "first timestamp", "the clock of timestamps"),
    env_row::make(Env::singleton_anchor, "LAPTIME_SINGLETON_ANCHOR_2", EnvType::SetByLaptime,
        "none", "first use", "where laptime's process-wide state is"),
};
// clang-format on

/// The row of `v`.
constexpr const EnvVar& env_var(Env v) {
  return kEnvVars[static_cast<std::size_t>(v)];
}

constexpr bool env_table_in_order() {
  for (std::size_t i = 0; i < sizeof kEnvVars / sizeof kEnvVars[0]; ++i) {
    if (static_cast<std::size_t>(kEnvVars[i].id) != i) return false;
  }
  return sizeof kEnvVars / sizeof kEnvVars[0] == static_cast<std::size_t>(Env::count);
}
static_assert(env_table_in_order(), "kEnvVars has one row per Env, in Env's order");

// ---------------------------------------------------------------------------------------------
// Reading

/// Where variables come from: this process's environment (`read` null), or a getenv-like
/// function (settings_from_env's, a test's).
struct EnvSource {
  const char* (*read)(void* ctx, const char* name) = nullptr;
  void* ctx = nullptr;
};

/// The text of `v` (nullopt when unset or empty): the one read of a LAPTIME_* variable.
inline std::optional<std::string_view> env_text(const EnvVar& v, EnvSource src = {}) {
  const char* t = src.read != nullptr ? src.read(src.ctx, v.name) : env_raw(v.name);
  if (t == nullptr || *t == '\0') return std::nullopt;
  return std::string_view(t);
}

/// A variable's value (nullopt: unset, empty or malformed) and, when malformed or clamped, the
/// warning to give once.
template <class Type>
struct EnvReading {
  std::optional<Type> value;
  std::string warning;
};
using EnvBool = EnvReading<bool>;
using EnvInt = EnvReading<int>;

/// Index of `text` among `v.values` ("a|b|c"): exactly, or in any case where `v.any_case`.
inline std::optional<int> parse_choice(const EnvVar& v, std::string_view text) noexcept {
  auto lower = [](char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; };
  std::string_view rest = v.values;
  for (int i = 0;; ++i) {
    const std::size_t bar = rest.find('|');
    const std::string_view option = rest.substr(0, bar);
    bool same = option.size() == text.size();
    for (std::size_t k = 0; same && k < text.size(); ++k) {
      same = v.any_case ? lower(text[k]) == option[k] : text[k] == option[k];
    }
    if (same) return i;
    if (bar == std::string_view::npos) return std::nullopt;
    rest.remove_prefix(bar + 1);
  }
}

/// Why a value of `v` is malformed: one text per type (the end of malformed_env's warning).
inline std::string env_why(const EnvVar& v) {
  const std::string unit = v.values;
  switch (v.type) {
    case EnvType::Flag:
      return std::string(kNotABoolean);
    case EnvType::Int:
      return "is not a number of " + unit + " >= " + std::to_string(v.lowest);
    case EnvType::Rate:
      return "is not a number of " + unit + " from " + std::to_string(v.lowest) + " to " +
             std::to_string(v.highest);
    case EnvType::Choice:
      return "is not one of " + unit;
    case EnvType::BoolOrNames:
      return "is neither a boolean nor a list of at most " + std::to_string(v.highest) +
             " names (printable, comma-separated)";
    case EnvType::Text:  // the other types take any text
    case EnvType::Names:
    case EnvType::Path:
    case EnvType::SetByLaptime:
      break;
  }
  return "is not valid";
}

/// The warning of a malformed value of `v`.
inline std::string env_malformed(const EnvVar& v, std::string_view value) {
  return malformed_env(v.name, value, env_why(v));
}

inline EnvBool read_bool(const EnvVar& v, std::optional<std::string_view> text) {
  EnvBool b;
  if (!text) return b;
  b.value = parse_bool(*text);
  if (!b.value) b.warning = env_malformed(v, *text);
  return b;
}

/// Whether `text` (spaces around it allowed) is a number of digits alone: one too large for an
/// int is above a variable's bound, where it has one below an int's highest (LAPTIME_RECORD).
inline bool all_digits(std::string_view text) {
  text = trim_spaces(text);
  return !text.empty() && text.find_first_not_of("0123456789") == std::string_view::npos;
}

/// The integer reading: nullopt when unset or empty; when malformed or below the table's lowest,
/// nullopt and the table's warning; above its highest, the highest and a warning naming the bound
/// ("4096, the compile-time capacity"), also beyond an int where the highest is a bound below it.
inline EnvInt read_int(const EnvVar& v, std::optional<std::string_view> text) {
  EnvInt r;
  if (!text) return r;
  const int lowest = static_cast<int>(v.lowest);
  const int bound = static_cast<int>(v.highest);
  const std::optional<int> n = parse_int(*text);
  const bool huge = !n && bound < INT_MAX && all_digits(*text);
  if (!huge && (!n || *n < lowest)) {
    r.warning = env_malformed(v, *text);
    return r;
  }
  r.value = !huge && *n < bound ? *n : bound;
  if (huge || *n > bound) {
    const std::string_view digits = trim_spaces(*text);
    r.warning = std::string(v.name) + '=' + std::string(digits.substr(0, 64)) +
                (digits.size() > 64 ? "..." : "") + " is above " + std::to_string(bound) + ", " +
                std::string(v.bound_is) + "; " + std::to_string(bound) + " is used";
  }
  return r;
}

inline EnvReading<double> read_rate(const EnvVar& v, std::optional<std::string_view> text) {
  EnvReading<double> r;
  if (!text) return r;
  const std::optional<double> x = parse_plain_decimal(*text);
  if (x && *x >= static_cast<double>(v.lowest) && *x <= static_cast<double>(v.highest)) {
    r.value = *x;
  } else {
    r.warning = env_malformed(v, *text);
  }
  return r;
}

inline EnvReading<int> read_choice(const EnvVar& v, std::optional<std::string_view> text) {
  EnvReading<int> r;
  if (!text) return r;
  r.value = parse_choice(v, *text);
  if (!r.value) r.warning = env_malformed(v, *text);
  return r;
}

/// A comma-separated list of names, repeats dropped, the spaces around each item not part of its
/// name. Lenient (Names): empty items are dropped
/// and names past `bound` cut, counted in `cut`. Strict (BoolOrNames): an empty or unprintable
/// item (or one over 256 bytes), or an item after `bound` names, makes the list malformed.
struct NameList {
  std::vector<std::string> names;
  std::size_t cut = 0;
  bool ok = true;
};

inline NameList parse_names(std::string_view text, std::size_t bound, bool strict) {
  auto printable = [](std::string_view item) {
    if (item.empty() || item.size() > 256) return false;
    for (const char c : item) {
      const auto u = static_cast<unsigned char>(c);
      if (u < 0x20 || u == 0x7f) return false;
    }
    return true;
  };
  NameList r;
  for (;;) {
    const std::size_t comma = text.find(',');
    const std::string_view item = trim_spaces(text.substr(0, comma));
    if (strict) r.ok = r.ok && printable(item) && r.names.size() < bound;
    bool fresh = strict ? r.ok : !item.empty();
    for (std::size_t i = 0; fresh && i < r.names.size(); ++i) fresh = r.names[i] != item;
    if (fresh) {
      if (r.names.size() < bound) {
        r.names.emplace_back(item);
      } else {
        ++r.cut;
      }
    }
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return r;
}

/// Names: the list (nullopt when unset), with one warning when it was cut at its bound.
inline EnvReading<std::vector<std::string>> read_names(const EnvVar& v,
                                                       std::optional<std::string_view> text) {
  EnvReading<std::vector<std::string>> r;
  if (!text) return r;
  NameList list = parse_names(*text, static_cast<std::size_t>(v.highest), /*strict=*/false);
  if (list.cut > 0) {
    const std::string bound = std::to_string(v.highest);
    r.warning = std::string(v.name) + " lists " + std::to_string(list.cut) +
                " names more than its bound of " + bound + "; only the first " + bound +
                " are used";
  }
  r.value = std::move(list.names);
  return r;
}

/// BoolOrNames: `all` when a boolean, else `names` when a valid list; else a warning.
struct EnvBoolOrNames {
  std::optional<bool> all;
  std::optional<std::vector<std::string>> names;
  std::string warning;
};

inline EnvBoolOrNames read_bool_or_names(const EnvVar& v, std::optional<std::string_view> text) {
  EnvBoolOrNames r;
  if (!text) return r;
  r.all = parse_bool(*text);
  if (r.all) return r;
  NameList list = parse_names(*text, static_cast<std::size_t>(v.highest), /*strict=*/true);
  if (list.ok) {
    r.names = std::move(list.names);
  } else {
    r.warning = env_malformed(v, *text);
  }
  return r;
}

// The typed readings, each checked at compile time against the variable's type. `src`: this
// process's environment unless given.
template <Env Var>
std::optional<std::string_view> env_text(EnvSource src = {}) {
  constexpr EnvType t = env_var(Var).type;
  static_assert(t == EnvType::Text || t == EnvType::Path || t == EnvType::SetByLaptime);
  return env_text(env_var(Var), src);
}
template <Env Var>
EnvBool env_bool(EnvSource src = {}) {
  static_assert(env_var(Var).type == EnvType::Flag);
  return read_bool(env_var(Var), env_text(env_var(Var), src));
}
template <Env Var>
EnvInt env_int(EnvSource src = {}) {
  static_assert(env_var(Var).type == EnvType::Int);
  return read_int(env_var(Var), env_text(env_var(Var), src));
}
template <Env Var>
EnvReading<double> env_rate(EnvSource src = {}) {
  static_assert(env_var(Var).type == EnvType::Rate);
  return read_rate(env_var(Var), env_text(env_var(Var), src));
}
template <Env Var>
EnvReading<int> env_choice(EnvSource src = {}) {
  static_assert(env_var(Var).type == EnvType::Choice);
  return read_choice(env_var(Var), env_text(env_var(Var), src));
}
template <Env Var>
EnvReading<std::vector<std::string>> env_names(EnvSource src = {}) {
  static_assert(env_var(Var).type == EnvType::Names);
  return read_names(env_var(Var), env_text(env_var(Var), src));
}
template <Env Var>
EnvBoolOrNames env_bool_or_names(EnvSource src = {}) {
  static_assert(env_var(Var).type == EnvType::BoolOrNames);
  return read_bool_or_names(env_var(Var), env_text(env_var(Var), src));
}

}  // namespace detail
LAPTIME_END_NAMESPACE
