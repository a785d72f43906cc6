// laptime: a snapshot of the Stopwatch's results, and its two renderings: the text report
// (print_eval_times) and JSON (to_json, SPEC §6). Rendering is plain code over plain data.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "laptime/config.hpp"
#include "laptime/detail/format.hpp"

LAPTIME_BEGIN_NAMESPACE

/// Where periodic and at-exit reports are printed: fn(text, size, user_data). The Python module
/// installs one that writes to sys.stdout.
using PrintFunction = void (*)(const char* text, std::size_t size, void* user_data);

/// Resource figures of a tracked name, weighted by interval length. nullopt: could not be read.
struct ResourceFigures {
  std::optional<double> process_percent;  ///< process tree CPU, % of the machine
  std::optional<double> process_cores;    ///< process tree CPU, cores busy
  std::optional<double> system_percent;   ///< whole machine, /proc/stat
  std::optional<double> read_mb_per_s;    ///< storage reads of the tree (read_bytes)
  std::optional<double> write_mb_per_s;   ///< storage writes of the tree (write_bytes)
  std::optional<double> rchar_mb_per_s;   ///< all reads, page cache included (rchar)
  std::optional<double> wchar_mb_per_s;   ///< all writes (wchar)
};

/// GPU time of a name's intervals, from CUDA events (Stopwatch::enable_gpu_timing).
struct GpuFigures {
  std::uint64_t count = 0;    ///< resolved intervals after warm-up
  std::uint64_t pending = 0;  ///< recorded, not yet resolved
  double total_ns = 0, mean_per_iter_ns = 0, mean_per_interval_ns = 0;
  double min_ns = 0, median_ns = 0, max_ns = 0;
};

/// One measured name. Durations in nanoseconds.
struct MeasurementResult {
  std::string name;
  std::uint64_t count = 0;  ///< intervals after warm-up
  double total_ns = 0, mean_per_iter_ns = 0, mean_per_interval_ns = 0;
  double min_ns = 0, median_ns = 0, p90_ns = 0, p99_ns = 0, max_ns = 0;
  int running = 0;                           ///< threads on which it is running right now
  std::optional<ResourceFigures> resources;  ///< tracked names only
  std::optional<GpuFigures> gpu;             ///< with GPU timing only
};

struct OneTimeResult {
  std::string name;
  double duration_ns = 0;
  bool running = false;
};

/// Everything the Stopwatch knows, at one moment.
struct Results {
  int schema = 1;
  int rank = 0, world_size = 1;
  long pid = 0;
  std::string host;
  int num_warmup_iters = 0;
  std::int64_t iterations_finished = 0;
  std::int64_t iterations_measured = 0;
  std::vector<MeasurementResult> measurements;  ///< first-seen order
  std::vector<OneTimeResult> one_time;

  /// The report print_eval_times writes (SPEC §1).
  std::string to_text() const;
  /// JSON, schema version 1 (SPEC §6).
  std::string to_json() const;
};

inline std::string Results::to_text() const {
  using detail::format_duration;
  std::string out;
  out += fmt::format("laptime stopwatch: {} measured iteration{} ({} warm-up", iterations_measured,
                     iterations_measured == 1 ? "" : "s", num_warmup_iters);
  if (iterations_finished < num_warmup_iters) {
    out += fmt::format(", {} done", iterations_finished);
  }
  out += fmt::format("); rank {}/{}, pid {}, host {}\n", rank, world_size, pid, host);
  if (!measurements.empty()) {
    std::size_t width = 12;
    for (const auto& m : measurements) width = std::max(width, m.name.size() + 2);
    width = std::min<std::size_t>(width, 48);
    out += fmt::format("  {:<{}} {:>10} {:>10} {:>10} {:>7} {:>10} {:>10} {:>10} {:>10} {:>10}\n",
                       "name", width, "per iter", "per call", "total", "count", "min", "median",
                       "p90", "p99", "max");
    for (const auto& m : measurements) {
      std::string label = m.name;
      if (m.running > 0)
        label += m.running == 1 ? " [running]" : fmt::format(" [running x{}]", m.running);
      if (m.count == 0) {
        out += fmt::format("  {:<{}} no measurement after warm-up\n", label, width);
      } else {
        out += fmt::format(
            "  {:<{}} {:>10} {:>10} {:>10} {:>7} {:>10} {:>10} {:>10} {:>10} {:>10}\n", label,
            width,
            iterations_measured > 0 ? format_duration(m.mean_per_iter_ns) : std::string("n/a"),
            format_duration(m.mean_per_interval_ns), format_duration(m.total_ns), m.count,
            format_duration(m.min_ns), format_duration(m.median_ns), format_duration(m.p90_ns),
            format_duration(m.p99_ns), format_duration(m.max_ns));
      }
      if (m.gpu) {
        const GpuFigures& g = *m.gpu;
        out += fmt::format("  {:<{}} gpu: {} per iter, {} per call, median {}, {} intervals", "",
                           width, format_duration(g.mean_per_iter_ns),
                           format_duration(g.mean_per_interval_ns), format_duration(g.median_ns),
                           g.count);
        if (g.pending) out += fmt::format(" ({} pending)", g.pending);
        out += "\n";
      }
      if (m.resources) {
        const ResourceFigures& r = *m.resources;
        out += fmt::format(
            "  {:<{}} cpu: process tree {} of machine ({} cores), system {}; io: read {} "
            "(storage {}), write {} (storage {})\n",
            "", width, detail::format_optional(r.process_percent, " %"),
            detail::format_optional(r.process_cores, ""),
            detail::format_optional(r.system_percent, " %"),
            detail::format_optional(r.rchar_mb_per_s, " MB/s"),
            detail::format_optional(r.read_mb_per_s, " MB/s"),
            detail::format_optional(r.wchar_mb_per_s, " MB/s"),
            detail::format_optional(r.write_mb_per_s, " MB/s"));
      }
    }
  }
  if (!one_time.empty()) {
    out += "  one-time measurements:\n";
    for (const auto& o : one_time) {
      out += fmt::format("    {}: {}\n", o.name,
                         o.running ? std::string("[running]") : format_duration(o.duration_ns));
    }
  }
  return out;
}

inline std::string Results::to_json() const {
  using detail::json_number;
  using detail::json_string;
  auto seconds = [](double ns) { return std::optional<double>(ns / 1e9); };
  std::string o = "{";
  o += fmt::format("\"schema\": {}, \"rank\": {}, \"world_size\": {}, \"pid\": {}, \"host\": ",
                   schema, rank, world_size, pid);
  json_string(o, host);
  o += fmt::format(", \"num_warmup_iters\": {}, \"iterations_measured\": {}, ", num_warmup_iters,
                   iterations_measured);
  o += fmt::format("\"iterations_finished\": {}, \"measurements\": [", iterations_finished);
  // Appends `, "key": value` (null for a missing figure).
  auto num = [&o](const char* key, std::optional<double> v) {
    o += ", \"";
    o += key;
    o += "\": ";
    json_number(o, v);
  };
  const std::optional<double> none;
  bool first = true;
  for (const auto& m : measurements) {
    if (!first) o += ", ";
    first = false;
    o += "{\"name\": ";
    json_string(o, m.name);
    o += fmt::format(", \"count\": {}", m.count);
    const bool any = m.count > 0;  // no interval after warm-up: statistics are null, not 0/0
    num("total_s", seconds(m.total_ns));
    num("mean_per_iter_s", iterations_measured > 0 ? seconds(m.mean_per_iter_ns) : none);
    num("mean_per_interval_s", any ? seconds(m.mean_per_interval_ns) : none);
    num("min_s", any ? seconds(m.min_ns) : none);
    num("median_s", any ? seconds(m.median_ns) : none);
    num("p90_s", any ? seconds(m.p90_ns) : none);
    num("p99_s", any ? seconds(m.p99_ns) : none);
    num("max_s", any ? seconds(m.max_ns) : none);
    o += fmt::format(", \"running\": {}", m.running > 0 ? "true" : "false");
    if (m.resources) {
      const ResourceFigures& r = *m.resources;
      o += ", \"cpu\": {\"process_percent\": ";
      json_number(o, r.process_percent);
      num("process_cores", r.process_cores);
      num("system_percent", r.system_percent);
      o += "}, \"io\": {\"read_mb_per_s\": ";
      json_number(o, r.read_mb_per_s);
      num("write_mb_per_s", r.write_mb_per_s);
      num("rchar_mb_per_s", r.rchar_mb_per_s);
      num("wchar_mb_per_s", r.wchar_mb_per_s);
      o += "}";
    }
    if (m.gpu) {
      const GpuFigures& g = *m.gpu;
      const bool gany = g.count > 0;
      o += fmt::format(", \"gpu\": {{\"count\": {}, \"pending\": {}", g.count, g.pending);
      num("total_s", seconds(g.total_ns));
      num("mean_per_iter_s", iterations_measured > 0 ? seconds(g.mean_per_iter_ns) : none);
      num("mean_per_interval_s", gany ? seconds(g.mean_per_interval_ns) : none);
      num("min_s", gany ? seconds(g.min_ns) : none);
      num("median_s", gany ? seconds(g.median_ns) : none);
      num("max_s", gany ? seconds(g.max_ns) : none);
      o += "}";
    }
    o += "}";
  }
  o += "], \"one_time\": [";
  first = true;
  for (const auto& t : one_time) {
    if (!first) o += ", ";
    first = false;
    o += "{\"name\": ";
    json_string(o, t.name);
    num("duration_s", t.running ? none : seconds(t.duration_ns));
    o += fmt::format(", \"running\": {}}}", t.running ? "true" : "false");
  }
  o += "]}";
  return o;
}

LAPTIME_END_NAMESPACE
