// laptime internals: the bottleneck verdict of a report ("verdict: data-bound: 61 % of each
// iteration waits in 'data fetch' ..."), from laptime's own figures. Pure functions of plain data
// (no clock, no /proc, no CUDA), tested with constructed figures in tests/verdict-test.cpp;
// docs/stopwatch.md ("Bottleneck verdict") states the rule for users.
#pragma once

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "laptime/config.hpp"
#include "laptime/impl/format.hpp"
#include "laptime/impl/slow_tail.hpp"
#include "laptime/results.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

/// Data-bound: the loop waits for data at least this share of each iteration.
inline constexpr double kDataBoundShare = 0.5;
/// GPU-bound: the GPU is busy at least this share of the step (the iteration less the data wait).
inline constexpr double kGpuBoundShare = 0.8;
/// No verdict where the data-wait name's time per iteration is over the loop's by more than this
/// share of it: its intervals are then not the loop's wait. Intervals on the loop's thread lie
/// inside its iterations and read the loop's own monotonic clock, so they cannot sum to more than
/// the loop, whatever the clock's granularity; this leaves room for what the verdict cannot see (a
/// thread's TSC read on another core, well under a microsecond) and lets a fetch outside the timed
/// iterations worth under 1 % of the loop (one fetch of a data-only loop over 100 iterations) keep
/// the verdict it would have had.
inline constexpr double kDataOverLoopSlack = 0.01;
/// Workers saturated: their CPU is at least this share of the cores the main process leaves, or
/// each worker is busy at least this share of the time.
inline constexpr double kSaturatedShare = 0.9;

/// The default data-wait names, normalised (normalized_name): the names users of the seed tool
/// and of laptime's examples give the fetch of the next batch.
inline constexpr std::string_view kDefaultDataNames[] = {
    "data",        "data fetch", "data loading", "data load",    "data wait",
    "data time",   "dataloader", "data loader",  "next batch",   "get batch",
    "fetch batch", "load batch", "batch fetch",  "batch loading"};

/// Lower case; '_', '-', '.', '/' and ':' as spaces; spaces collapsed and trimmed:
/// "Data_Fetch" -> "data fetch".
inline std::string normalized_name(std::string_view name) {
  std::string out;
  for (const char ch : name) {
    // ASCII only: std::tolower follows the locale, and under tr_TR 'I' is not 'i'.
    char c = (ch >= 'A' && ch <= 'Z') ? static_cast<char>(ch - 'A' + 'a') : ch;
    if (c == '_' || c == '-' || c == '.' || c == '/' || c == ':' || c == '\t') c = ' ';
    if (c == ' ' && (out.empty() || out.back() == ' ')) continue;
    out += c;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

/// Whether the default rule takes `name` as the data wait: its normalised form is one of
/// kDefaultDataNames ("data", "Data fetch", "data_loading", "next-batch", ...).
inline bool is_default_data_name(std::string_view name) {
  const std::string n = normalized_name(name);
  for (const std::string_view d : kDefaultDataNames) {
    if (n == d) return true;
  }
  return false;
}

/// The data-wait name among `measurements`: `chosen` (Stopwatch::set_data_name) where given,
/// else the first (first-seen order) that is_default_data_name; empty when none.
inline std::string find_data_name(const std::vector<MeasurementResult>& measurements,
                                  std::string_view chosen) {
  if (!chosen.empty()) return std::string(chosen);
  for (const MeasurementResult& m : measurements) {
    if (is_default_data_name(m.name)) return m.name;
  }
  return {};
}

/// The figures a verdict is made of, per measured iteration. Absent: not measured.
struct VerdictFigures {
  std::optional<double> loop_ns;  ///< mean time between finish_iter() calls
  std::string data_name;          ///< the data-wait name; empty: none set and none by default
  bool data_seen = false;         ///< data_name was measured (in warm-up or after)
  double data_ns = 0;             ///< its host time per iteration
  std::optional<double> gpu_ns;   ///< GPU busy per iteration (the busiest name but the data's)
  std::string gpu_name;
  std::optional<double> tree_cores;  ///< process tree CPU during `cpu_name`
  std::optional<double> main_cores;  ///< the main process's own part of it
  std::string cpu_name;              ///< the tracked name the CPU figures come from
  int cpus = 0;                      ///< CPUs online; 0: unknown
  /// Worker processes measuring for this one: now, or the most at one time (docs/workers.md); 0:
  /// none known.
  int workers = 0;
  /// The live descendant processes during `cpu_name` (their mean); absent: not counted.
  std::optional<double> child_processes;
  /// GPU timing was asked for and cannot run (Results::gpu_timing_off): why, in short.
  std::string gpu_timing_off;
  /// GPU timing is on for some name, but no interval got GPU time (no current CUDA context on the
  /// measuring thread, a capturing stream: the warnings say which).
  bool gpu_untimed = false;
};

/// The worker processes the workers' CPU is shared by: those measuring with laptime, else the
/// live descendant processes during the tracked name (their mean, rounded: DataLoader workers
/// that do not measure are child processes all the same); nullopt where neither is known.
inline std::optional<int> worker_count(const VerdictFigures& f) {
  if (f.workers > 0) return f.workers;
  if (!f.child_processes) return std::nullopt;
  return static_cast<int>(std::lround(std::max(0.0, *f.child_processes)));
}

/// "61 %": a share as a whole percentage.
inline std::string percent(double share) {
  std::string s;
  append_fixed(s, share * 100.0, 0);
  s += " %";
  return s;
}

/// The loader workers' part of the verdict ("; loader workers (child processes) use 7.4 of 16
/// cores, 8 workers each busy 93 % of the time (saturated: ...)"), where the CPU of a tracked name
/// is known; sets `v`'s worker figures. Empty otherwise.
inline std::string workers_clause(const VerdictFigures& f, Verdict& v) {
  if (!f.tree_cores || !f.main_cores) return {};
  const double w = std::max(0.0, *f.tree_cores - *f.main_cores);
  std::optional<int> n = worker_count(f);
  v.worker_cores = w;
  v.main_cores = *f.main_cores;
  // Child processes used CPU, but none was alive at an interval's ends (each started and ended
  // within one, a decoder per batch): their count is not known, so there is no per-worker claim.
  const bool short_lived = n && *n == 0 && w >= 0.05;
  if (short_lived) n.reset();
  v.workers = n;
  if (n && *n == 0) {  // no child process: the loading runs in this one
    v.workers_saturated = false;
    std::string none = "; no loader worker processes, main process ";
    append_fixed(none, *f.main_cores, 1);
    return none + " (CPU of " + detail::quoted(f.cpu_name) + ")";
  }
  std::string workers = short_lived ? "; loader workers (short-lived child processes) use "
                                    : "; loader workers (child processes) use ";
  append_fixed(workers, w, 1);
  // The cores the main process leaves; workers that fill them cannot be helped by more.
  const bool full = f.cpus > 0 && w >= kSaturatedShare * (f.cpus - *f.main_cores);
  // Workers each busy nearly all the time are saturated too, however many cores are free: more
  // workers would help.
  const bool busy_workers = n && *n > 0 && w >= kSaturatedShare * *n;
  if (f.cpus > 0) {
    workers += " of ";
    append_int(workers, f.cpus);
    v.workers_saturated = w > 0.05 && (full || busy_workers);
    if (short_lived && !full) v.workers_saturated.reset();  // some may idle, or none
  } else if (busy_workers) {
    v.workers_saturated = true;  // the machine's size unknown: only the per-worker claim
  }
  workers += " cores";
  if (n && *n > 0) {
    workers += ", ";
    append_int(workers, *n);
    workers += *n == 1 ? " worker busy " : " workers each busy ";
    workers += percent(w / *n);
    workers += " of the time";
  }
  if (v.workers_saturated) {
    if (!*v.workers_saturated) {
      workers += " (not saturated)";
    } else if (full) {
      workers += " (saturated: no core left for more)";
    } else {
      workers += " (saturated: every worker is busy; free cores: more workers would help)";
    }
  }
  workers += ", main process ";
  append_fixed(workers, *f.main_cores, 1);
  workers += " (CPU of " + detail::quoted(f.cpu_name) + ")";
  return workers;
}

/// The "no verdict" line of a data-wait name whose time per iteration, `f.data_ns`, is over the
/// loop's (beyond kDataOverLoopSlack): its intervals overlap, or some lie outside the iterations
/// the loop timed, so they are not the loop's wait; both figures as measured.
inline std::string data_over_loop(const VerdictFigures& f, double loop) {
  const std::string name = detail::quoted(f.data_name);
  return "no verdict: " + name + " sums " + format_duration(f.data_ns) +
         " per iteration, more than the loop's " + format_duration(loop) +
         ", so it is not the loop's wait: it was timed on several threads or processes at once, or "
         "outside the timed iterations (the first one without warm-up, a fetch after the last "
         "finish_iter()); time only the loop thread's wait for the batch as " +
         name;
}

/// The verdict rule (docs/stopwatch.md, "Bottleneck verdict"):
///  - no verdict without a timed loop, or without a data-wait name that was measured, or where
///    that name sums more than the loop (data_over_loop);
///  - data-bound when the data wait is >= kDataBoundShare of the loop (up to the slack over it:
///    the whole iteration, the measured figures quoted);
///  - else GPU-bound when the GPU is busy >= kGpuBoundShare of the step (loop - data wait);
///  - else compute-bound (the host step dominates; said so with the GPU share where GPU timing
///    ran, with "GPU time not measured" where it did not).
/// Where the CPU of a tracked name is known, the loader workers (the process tree less the main
/// process) are added, saturated when they use >= kSaturatedShare of the cores the main process
/// leaves, or when each worker (worker_count: those measuring with laptime, else the live
/// descendant processes) is busy >= kSaturatedShare of the time.
inline Verdict verdict(const VerdictFigures& f) {
  Verdict v;
  v.cpus = f.cpus;
  const std::string workers = workers_clause(f, v);
  if (!f.loop_ns || *f.loop_ns <= 0) {
    v.kind = "none";
    v.text =
        "no verdict: no loop time yet (it needs a finish_iter() after the last warm-up iteration, "
        "or two without warm-up)";
    return v;
  }
  const double loop = *f.loop_ns;
  if (f.gpu_ns) v.gpu_share = *f.gpu_ns / loop;
  if (f.data_name.empty() || !f.data_seen) {
    v.kind = "none";
    v.text = f.data_name.empty()
                 ? "no verdict: no data-wait name (name the fetch of the batch \"data\" or "
                   "\"data fetch\", or call set_data_name(), or set LAPTIME_DATA_NAME)"
                 : "no verdict: the data-wait name " + detail::quoted(f.data_name) +
                       " was never measured";
    v.text += workers;
    return v;
  }
  if (f.data_ns > (1.0 + kDataOverLoopSlack) * loop) {
    v.kind = "none";
    v.text = data_over_loop(f, loop) + workers;
    return v;
  }
  const double share = std::min(f.data_ns / loop, 1.0);  // within the slack: the whole iteration
  const double data = share * loop;
  v.data_share = share;
  const std::string of_loop = format_duration(loop) + " per iteration";
  if (share >= kDataBoundShare) {
    v.kind = "data-bound";
    v.text = "data-bound: " + percent(share) + " of each iteration waits in " +
             detail::quoted(f.data_name) + " (" + format_duration(f.data_ns) + " of " + of_loop +
             ")";
  } else if (f.gpu_ns && *f.gpu_ns >= kGpuBoundShare * (loop - data)) {
    v.kind = "gpu-bound";
    v.text = "gpu-bound: the GPU is busy " + percent(std::min(*f.gpu_ns / loop, 1.0)) +
             " of each iteration (" + detail::quoted(f.gpu_name) + ": " +
             format_duration(*f.gpu_ns) + " of " + of_loop + "); " + percent(share) + " waits in " +
             detail::quoted(f.data_name);
  } else {
    v.kind = "compute-bound";
    v.text = "compute-bound: the host step takes " + percent(1.0 - share) + " of each iteration (" +
             format_duration(loop - data) + " of " + of_loop + "); " + percent(share) +
             " waits in " + detail::quoted(f.data_name);
    if (f.gpu_ns) {
      v.text += "; the GPU is busy " + percent(std::min(*f.gpu_ns / loop, 1.0)) + " (" +
                detail::quoted(f.gpu_name) + ")";
    } else {
      v.text += !f.gpu_timing_off.empty()
                    ? "; GPU time not measured (GPU timing is off: " + f.gpu_timing_off + ")"
                : f.gpu_untimed
                    ? "; GPU time not measured (no interval got GPU time: see the warnings)"
                    : "; GPU time not measured (enable_gpu_timing tells GPU-bound apart)";
    }
  }
  v.text += workers;
  return v;
}

/// The figures of `r` a verdict needs (pure: `r.loop`, `r.data_name`, `r.cpus` and the
/// measurements). GPU busy: the largest GPU time per iteration among the names other than the
/// data wait that do not enclose it (host time per iteration <= the step + 5 % of the loop: a
/// name around the fetch would count the GPU's idle time during the wait). CPU: the tracked name
/// with the largest total time.
inline VerdictFigures verdict_figures(const Results& r) {
  VerdictFigures f;
  f.cpus = r.cpus;
  f.workers = std::max(r.workers_alive, r.workers_peak);
  // The report's "gpu timing: off (...)" line has the whole reason; the verdict its first part.
  f.gpu_timing_off = r.gpu_timing_off.substr(0, r.gpu_timing_off.find(':'));
  if (r.loop && r.loop->count > 0) f.loop_ns = r.loop->mean_ns;
  f.data_name = r.data_name;
  for (const MeasurementResult& m : r.measurements) {
    if (!f.data_name.empty() && m.name == f.data_name) {
      f.data_seen = true;
      f.data_ns = m.mean_per_iter_ns;
    }
  }
  const double step_limit = f.loop_ns ? *f.loop_ns - f.data_ns + 0.05 * *f.loop_ns : 0.0;
  double best_total = -1;
  for (const MeasurementResult& m : r.measurements) {
    if (m.resources && m.resources->process_cores && m.resources->main_cores &&
        m.total_ns > best_total) {
      best_total = m.total_ns;
      f.tree_cores = m.resources->process_cores;
      f.main_cores = m.resources->main_cores;
      f.child_processes = m.resources->child_processes;
      f.cpu_name = m.name;
    }
    if (m.gpu && m.gpu->count == 0 && m.gpu->pending == 0 && !f.gpu_ns) f.gpu_untimed = true;
    if (m.name == f.data_name || !m.gpu || m.gpu->count == 0) continue;
    if (f.loop_ns && m.mean_per_iter_ns > step_limit) continue;  // encloses the data wait
    if (!f.gpu_ns || m.gpu->mean_per_iter_ns > *f.gpu_ns) {
      f.gpu_ns = m.gpu->mean_per_iter_ns;
      f.gpu_name = m.name;
      f.gpu_untimed = false;
    }
  }
  return f;
}

/// The verdict of `r` (what Stopwatch::results() puts in Results::verdict), which says so when
/// the tail of the loop, not its median, is the problem (`r.tail`: set it first).
inline Verdict verdict_of(const Results& r) {
  Verdict v = verdict(verdict_figures(r));
  if (r.tail) v.text += tail_verdict(*r.tail);
  return v;
}

}  // namespace detail
LAPTIME_END_NAMESPACE
