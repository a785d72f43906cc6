// laptime: CPU and I/O of the process tree and of the machine, sampled from /proc
// (docs/resources.md).
//
//   auto start = laptime::resources::sample();
//   run_one_iteration();
//   usage.add(start, laptime::resources::sample(), wall_ns);
//   if (auto cores = usage.process_cores()) std::printf("%.2f cores\n", *cores);
//
// A Sample holds raw counters at one instant; a Usage turns pairs of them into interval-weighted
// figures. Any figure /proc could not give is std::nullopt, never a guess. docs/resources.md
// explains what each figure means, how accurate it is and what one sample costs.
//
// The machinery is in detail/: procfs.hpp (the parsers, pure functions), resources_walk.hpp (the
// walk of a process tree under a proc root: sample_at) and resources_sampler.hpp (sample(): the
// process's own counters plus the background children sampler, so that a sample costs the same
// with 0 or 16 child processes).
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "laptime/config.hpp"
// Compiled out (LAPTIME_DISABLE) the bodies below are empty and need none of the machinery.
#if LAPTIME_ENABLED
#include "laptime/detail/procfs.hpp"
#include "laptime/detail/resources_sampler.hpp"
#include "laptime/detail/resources_walk.hpp"
#endif
#include "laptime/error.hpp"  // the error policy (set_error_policy), as this header always gave

LAPTIME_BEGIN_NAMESPACE
namespace resources {

/// Raw counters at one instant, each group with its own validity flag. Only differences between
/// two Samples of the same process mean anything; Usage::add takes them.
struct Sample {
  /// The CPU used by the whole tree, in seconds: the process and each live descendant (their
  /// threads, live and exited) plus every descendant already reaped.
  bool tree_cpu_ok = false;
  double tree_cpu_s = 0;
  /// The process's own part of tree_cpu_s (all its threads; no child process), in seconds.
  double self_cpu_s = 0;
  /// The "cpu" line of /proc/stat in clock ticks: busy = total - idle - iowait.
  bool system_ok = false;
  std::uint64_t system_busy_ticks = 0, system_total_ticks = 0;
  /// /proc/<pid>/io summed over the tree (reaped children are inside their parent's counters).
  bool io_ok = false;
  std::uint64_t read_bytes = 0, write_bytes = 0, rchar = 0, wchar = 0;
  /// Processes counted in tree_cpu_s: the process itself plus its live descendants.
  std::uint32_t processes = 0;
  /// Bytes the sampler itself had read from /proc (process-wide) when it read this process's io
  /// file: its own reads count in rchar, and Usage::add takes them out again.
  std::uint64_t sampler_bytes = 0;
  /// CLOCK_MONOTONIC (ns) when the process's own CPU clock was read (precise samples only; 0
  /// otherwise). Usage::add divides by the time between two samples' readings rather than by
  /// the interval, which the samples' own cost lengthens on either side.
  std::int64_t taken_ns = 0;
};

#if LAPTIME_ENABLED
namespace detail {
/// A Sample of what a walk or the self sampler read.
inline Sample to_sample(const Reading& r) noexcept {
  Sample out;
  out.system_ok = r.system_ok;
  out.system_busy_ticks = r.system.busy;
  out.system_total_ticks = r.system.total;
  out.tree_cpu_ok = r.cpu_ok;
  out.tree_cpu_s = r.cpu_s;
  out.self_cpu_s = r.self_cpu_s;
  out.taken_ns = r.taken_ns;
  out.processes = r.processes;
  out.io_ok = r.io_ok;
  out.read_bytes = r.io.read_bytes;
  out.write_bytes = r.io.write_bytes;
  out.rchar = r.io.rchar;
  out.wchar = r.io.wchar;
  out.sampler_bytes = r.sampler_bytes;
  return out;
}
}  // namespace detail
#endif

/// Clock ticks per second of every /proc time field (sysconf(_SC_CLK_TCK)); 0 if unknown.
inline long clock_ticks() noexcept {
#if LAPTIME_ENABLED
  return detail::ticks_per_second();
#else
  return 0;
#endif
}

/// Reads the counters of process `pid` and its descendants, and of the machine, from the proc
/// file system mounted at `proc_root` (tests point it at a fixture directory). Never throws;
/// each source that cannot be read leaves its group invalid and warns once per process.
///
/// With `precise_self` (only for the calling process), the process's own CPU time comes from
/// CLOCK_PROCESS_CPUTIME_ID (nanoseconds) instead of /proc's clock ticks (10 ms at 100 Hz, far too
/// coarse for intervals of a few milliseconds); children's CPU can only come in ticks.
///
///   auto s = laptime::resources::sample_at("/proc", getpid());
inline Sample sample_at(std::string_view proc_root, pid_t pid, bool precise_self = false) noexcept {
#if LAPTIME_ENABLED
  return detail::to_sample(detail::walk_at(proc_root, pid, precise_self));
#else
  (void)proc_root;
  (void)pid;
  (void)precise_self;
  return Sample{};
#endif
}

/// The calling process and its descendants now. The process's own counters are read at the
/// call; its live descendants come from a background thread's readings (started by the first
/// call, sleeping while no call comes), or from a walk of /proc where those could be off
/// (docs/resources.md). Its cost does not grow with the number of child processes.
///
///   const auto start = laptime::resources::sample();
inline Sample sample() noexcept {
#if LAPTIME_ENABLED
  return detail::to_sample(detail::read_self());
#else
  return Sample{};
#endif
}

/// CPUs online now (sysconf(_SC_NPROCESSORS_ONLN), else the cpuN lines of /proc/stat); 0 if
/// unknown or compiled out.
inline int online_cpus() noexcept {
#if LAPTIME_ENABLED
  const long n = ::sysconf(_SC_NPROCESSORS_ONLN);
  if (n > 0) return static_cast<int>(n);
  try {
    std::vector<char> text;
    if (detail::read_all_at(AT_FDCWD, "/proc/stat", text) == 0) {
      return laptime::detail::procfs::count_cpu_lines(std::string_view(text.data(), text.size()));
    }
  } catch (...) {
  }
#endif
  return 0;
}

/// Resource use accumulated over intervals: plain arithmetic on Samples. Means are weighted by
/// interval length, because they are ratios of sums. A group counts in an interval only if it was
/// valid at both ends (and its counters did not go backwards, as when a descendant left the tree).
///
///   laptime::resources::Usage u;
///   u.add(start, laptime::resources::sample(), wall_ns);
///   std::optional<double> pct = u.process_percent();  // nullopt: no valid interval
class Usage {
 public:
  /// Adds the interval from `start` to `end`, `wall_ns` nanoseconds long.
  void add(const Sample& start, const Sample& end, std::uint64_t wall_ns) noexcept {
#if LAPTIME_ENABLED
    ++intervals_;
    if (start.tree_cpu_ok && end.tree_cpu_ok && end.tree_cpu_s >= start.tree_cpu_s) {
      cpu_s_ += end.tree_cpu_s - start.tree_cpu_s;
      self_cpu_s_ += end.self_cpu_s >= start.self_cpu_s ? end.self_cpu_s - start.self_cpu_s : 0.0;
      // The CPU counters were read taken_ns apart: that, not the interval, is their window.
      const bool timed = start.taken_ns > 0 && end.taken_ns > start.taken_ns;
      const std::uint64_t window =
          timed ? static_cast<std::uint64_t>(end.taken_ns - start.taken_ns) : wall_ns;
      cpu_wall_ns_ += window;
      // The live descendants at both ends (the process itself is one of `processes`; 0: a
      // Sample that did not count them).
      if (start.processes > 0 && end.processes > 0) {
        children_s_ += 0.5 * static_cast<double>(start.processes + end.processes - 2) *
                       static_cast<double>(window) * 1e-9;
        children_wall_ns_ += window;
      }
    }
    if (start.system_ok && end.system_ok && end.system_busy_ticks >= start.system_busy_ticks &&
        end.system_total_ticks >= start.system_total_ticks) {
      busy_ticks_ += end.system_busy_ticks - start.system_busy_ticks;
      total_ticks_ += end.system_total_ticks - start.system_total_ticks;
    }
    if (start.io_ok && end.io_ok && end.read_bytes >= start.read_bytes &&
        end.write_bytes >= start.write_bytes && end.rchar >= start.rchar &&
        end.wchar >= start.wchar) {
      read_bytes_ += end.read_bytes - start.read_bytes;
      write_bytes_ += end.write_bytes - start.write_bytes;
      // The sampler's own /proc reads between the two io readings are not the program's.
      const std::uint64_t rchar = end.rchar - start.rchar;
      const std::uint64_t own =
          end.sampler_bytes >= start.sampler_bytes ? end.sampler_bytes - start.sampler_bytes : 0;
      rchar_ += rchar > own ? rchar - own : 0;
      wchar_ += end.wchar - start.wchar;
      io_wall_ns_ += wall_ns;
    }
#else
    (void)start;
    (void)end;
    (void)wall_ns;
#endif
  }

  /// Adds everything `other` accumulated (another thread's Usage, for instance).
  void merge(const Usage& other) noexcept {
#if LAPTIME_ENABLED
    intervals_ += other.intervals_;
    cpu_s_ += other.cpu_s_;
    self_cpu_s_ += other.self_cpu_s_;
    cpu_wall_ns_ += other.cpu_wall_ns_;
    children_s_ += other.children_s_;
    children_wall_ns_ += other.children_wall_ns_;
    busy_ticks_ += other.busy_ticks_;
    total_ticks_ += other.total_ticks_;
    read_bytes_ += other.read_bytes_;
    write_bytes_ += other.write_bytes_;
    rchar_ += other.rchar_;
    wchar_ += other.wchar_;
    io_wall_ns_ += other.io_wall_ns_;
#else
    (void)other;
#endif
  }

  /// CPU seconds of the process tree per wall second: 2.0 is two cores busy.
  std::optional<double> process_cores() const {
    if (cpu_wall_ns_ == 0) return std::nullopt;
    return cpu_s_ / (static_cast<double>(cpu_wall_ns_) * 1e-9);
  }

  /// The part of process_cores() the process itself used (all its threads), without its child
  /// processes: process_cores() - main_cores() is what the children (loader workers) used.
  std::optional<double> main_cores() const {
    if (cpu_wall_ns_ == 0) return std::nullopt;
    return self_cpu_s_ / (static_cast<double>(cpu_wall_ns_) * 1e-9);
  }
  /// The live descendant processes (children, their children...) during the intervals, on
  /// average over both ends of each, weighted like process_cores(): the loader workers whose CPU
  /// is process_cores() - main_cores(). nullopt without an interval whose Samples counted them.
  ///
  ///   u.child_processes();  // 8 DataLoader workers alive throughout: 8.0
  std::optional<double> child_processes() const {
    if (children_wall_ns_ == 0) return std::nullopt;
    return children_s_ / (static_cast<double>(children_wall_ns_) * 1e-9);
  }
  /// process_cores() as a percentage of `cpus` CPUs: 100 is all of them. nullopt without a
  /// valid interval or with `cpus` <= 0 (unknown).
  ///
  ///   u.process_percent(8);  // 2 cores busy: 25.0
  std::optional<double> process_percent(int cpus) const {
    const auto cores = process_cores();
    if (!cores || cpus <= 0) return std::nullopt;
    return *cores / cpus * 100.0;
  }
  /// process_percent(online_cpus()): a percentage of the CPUs online now.
  std::optional<double> process_percent() const {
    return process_percent(online_cpus());
  }

  /// Busy share of all CPU time of the machine, in percent. nullopt also when no clock tick
  /// (10 ms) elapsed in the valid intervals: /proc/stat cannot resolve less.
  std::optional<double> system_percent() const {
    if (total_ticks_ == 0) return std::nullopt;
    return static_cast<double>(busy_ticks_) / static_cast<double>(total_ticks_) * 100.0;
  }

  /// Bytes the tree fetched from storage per second, in MB (1e6 bytes); page-cache hits are not in
  /// it.
  std::optional<double> read_mb_per_s() const {
    return rate(read_bytes_);
  }
  /// Bytes the tree caused to be written to storage per second, in MB.
  std::optional<double> write_mb_per_s() const {
    return rate(write_bytes_);
  }
  /// Bytes the tree passed to read()-like calls per second, in MB, page-cache hits included.
  std::optional<double> rchar_mb_per_s() const {
    return rate(rchar_);
  }
  /// Bytes the tree passed to write()-like calls per second, in MB.
  std::optional<double> wchar_mb_per_s() const {
    return rate(wchar_);
  }

  /// Intervals added (valid or not), merged ones included.
  std::uint64_t intervals() const {
    return intervals_;
  }

 private:
  std::optional<double> rate(std::uint64_t bytes) const {
    if (io_wall_ns_ == 0) return std::nullopt;
    return static_cast<double>(bytes) * 1e-6 / (static_cast<double>(io_wall_ns_) * 1e-9);
  }

  std::uint64_t intervals_ = 0;
  double cpu_s_ = 0;
  double self_cpu_s_ = 0;  // the process's own part of cpu_s_
  std::uint64_t cpu_wall_ns_ = 0;
  double children_s_ = 0;  // live descendants times seconds
  std::uint64_t children_wall_ns_ = 0;
  std::uint64_t busy_ticks_ = 0, total_ticks_ = 0;
  std::uint64_t read_bytes_ = 0, write_bytes_ = 0, rchar_ = 0, wchar_ = 0;
  std::uint64_t io_wall_ns_ = 0;
};

}  // namespace resources
LAPTIME_END_NAMESPACE
