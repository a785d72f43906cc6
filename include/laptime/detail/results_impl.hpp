// laptime internals: the renderings of Results, the text report and JSON (docs/reports.md). The
// implementation part (LAPTIME_IMPL: compiled once by src/laptime.cpp, or carried by
// <laptime/laptime.hpp>); also in the compiled-out build, where they render what they are given.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "laptime/config.hpp"
#include "laptime/detail/format.hpp"
#include "laptime/results.hpp"

LAPTIME_BEGIN_NAMESPACE

LAPTIME_IMPL std::string Results::to_text() const {
  using detail::append_int;
  using detail::append_left;
  using detail::append_right;
  using detail::format_duration;
  std::string out = "laptime stopwatch: ";
  append_int(out, iterations_measured);
  out += iterations_measured == 1 ? " measured iteration (" : " measured iterations (";
  append_int(out, num_warmup_iters);
  out += " warm-up";
  if (iterations_finished < num_warmup_iters) {
    out += ", ";
    append_int(out, iterations_finished);
    out += " done";
  }
  out += "); rank ";
  append_int(out, rank);
  out += '/';
  append_int(out, world_size);
  out += ", pid ";
  append_int(out, pid);
  out += ", host ";
  out += detail::escaped(host);
  if (!clock.empty()) {
    out += ", clock ";
    out += detail::escaped(clock);
  }
  out += '\n';
  if (worker_processes > 0 || workers_unrecorded > 0 || workers_pairs_dropped > 0) {
    out += "  worker processes: ";
    append_int(out, worker_processes);
    out += " measured (merged into the figures below, \"name \xc2\xb7 N workers\")";
    if (workers_unrecorded > 0) {
      out += "; ";
      append_int(out, workers_unrecorded);
      out += " found no free region and are missing";
    }
    if (workers_pairs_dropped > 0) {
      out += "; ";
      append_int(out, workers_pairs_dropped);
      out += " (thread, name) pairs did not fit in their worker's region and are missing";
    }
    out += '\n';
  }
  if (!gpu_timing_off.empty()) {
    out += "  gpu timing: off (";
    out += detail::escaped(gpu_timing_off);
    out += ")\n";
  }
  // One row: the label left-aligned in `width` columns, then each figure right-aligned.
  auto row = [&out](std::string_view label, std::size_t width,
                    std::initializer_list<std::pair<std::string_view, std::size_t>> cells) {
    out += "  ";
    append_left(out, label, width);
    for (const auto& [text, w] : cells) {
      out += ' ';
      append_right(out, text, w);
    }
    out += '\n';
  };
  if (!measurements.empty()) {
    std::vector<std::string> labels;  // names escaped: a name must not rewrite the terminal
    std::size_t width = 12;
    for (const auto& m : measurements) {
      labels.push_back(detail::escaped(m.name));
      if (!m.workers.empty()) {
        labels.back() += " \xc2\xb7 ";
        append_int(labels.back(), static_cast<long long>(m.workers.size()));
        labels.back() += m.workers.size() == 1 ? " worker" : " workers";
      }
      width = std::max(width, labels.back().size() + 2);
    }
    width = std::min<std::size_t>(width, 48);
    row("name", width,
        {{"per iter", 10},
         {"per call", 10},
         {"total", 10},
         {"count", 7},
         {"min", 10},
         {"median", 10},
         {"p90", 10},
         {"p99", 10},
         {"max", 10}});
    for (std::size_t i = 0; i < measurements.size(); ++i) {
      const MeasurementResult& m = measurements[i];
      std::string label = std::move(labels[i]);
      if (m.running == 1) {
        label += " [running]";
      } else if (m.running > 1) {
        label += " [running x";
        append_int(label, m.running);
        label += ']';
      }
      if (m.count == 0) {
        out += "  ";
        append_left(out, label, width);
        out += " no measurement after warm-up\n";
      } else {
        std::string count;
        append_int(count, m.count);
        row(label, width,
            {{iterations_measured > 0 ? format_duration(m.mean_per_iter_ns) : "n/a", 10},
             {format_duration(m.mean_per_interval_ns), 10},
             {format_duration(m.total_ns), 10},
             {count, 7},
             {format_duration(m.min_ns), 10},
             {format_duration(m.median_ns), 10},
             {format_duration(m.p90_ns), 10},
             {format_duration(m.p99_ns), 10},
             {format_duration(m.max_ns), 10}});
      }
      if (m.gpu) {
        const GpuFigures& g = *m.gpu;
        out += "  ";
        out.append(width, ' ');
        out += " gpu: ";
        out += format_duration(g.mean_per_iter_ns);
        out += " per iter, ";
        out += format_duration(g.mean_per_interval_ns);
        out += " per call, median ";
        out += format_duration(g.median_ns);
        out += ", ";
        append_int(out, g.count);
        out += " intervals";
        if (g.pending) {
          out += " (";
          append_int(out, g.pending);
          out += " pending)";
        }
        out += '\n';
      }
      if (m.resources) {
        const ResourceFigures& r = *m.resources;
        out += "  ";
        out.append(width, ' ');
        out += " cpu: process tree ";
        out += detail::format_optional(r.process_percent, " %");
        out += " of machine (";
        out += detail::format_optional(r.process_cores, "");
        out += " cores), system ";
        out += detail::format_optional(r.system_percent, " %");
        out += "; io: read ";
        out += detail::format_optional(r.rchar_mb_per_s, " MB/s");
        out += " (storage ";
        out += detail::format_optional(r.read_mb_per_s, " MB/s");
        out += "), write ";
        out += detail::format_optional(r.wchar_mb_per_s, " MB/s");
        out += " (storage ";
        out += detail::format_optional(r.write_mb_per_s, " MB/s");
        out += ")\n";
      }
    }
  }
  if (loop) {
    out += "  loop (between finish_iter calls): ";
    out += format_duration(loop->mean_ns);
    out += " per iteration, median ";
    out += format_duration(loop->median_ns);
    out += ", p90 ";
    out += format_duration(loop->p90_ns);
    out += ", max ";
    out += format_duration(loop->max_ns);
    out += ", ";
    append_int(out, loop->count);
    out += loop->count == 1 ? " iteration timed\n" : " iterations timed\n";
  }
  if (verdict) {
    out += "  verdict: ";
    out += detail::escaped(verdict->text);  // holds names: escaped, as in the table
    out += '\n';
  }
  if (!one_time.empty()) {
    out += "  one-time measurements:\n";
    for (const auto& o : one_time) {
      out += "    ";
      out += detail::escaped(o.name);
      out += ": ";
      out += o.running ? std::string("[running]") : format_duration(o.duration_ns);
      out += '\n';
    }
  }
  for (const std::string& w : warnings) {
    out += "  warning: ";
    out += w;
    out += '\n';
  }
  return out;
}

namespace detail {
/// `, "samples": {...}`: one compact array per interval, [name, start_ns, dur_ns, iter], so that
/// a ring of 100k intervals stays a few MB of JSON.
inline void append_samples_json(std::string& o, const Samples& s) {
  o += ", \"samples\": {\"clock\": \"steady_clock_ns\", \"capacity\": ";
  append_int(o, s.capacity);
  o += ", \"fields\": [\"name\", \"start_ns\", \"dur_ns\", \"iter\"], \"unrecorded\": ";
  append_int(o, s.unrecorded);
  o += ", \"names\": [";
  for (std::size_t i = 0; i < s.names.size(); ++i) {
    if (i > 0) o += ", ";
    json_string(o, s.names[i]);
  }
  o += "], \"iterations\": [";
  for (std::size_t i = 0; i < s.iteration_ends.size(); ++i) {
    o += i > 0 ? ", [" : "[";
    append_int(o, s.iteration_ends[i].first);
    o += ", ";
    append_int(o, s.iteration_ends[i].second);
    o += ']';
  }
  o += "], \"threads\": [";
  for (std::size_t t = 0; t < s.threads.size(); ++t) {
    const ThreadSamples& th = s.threads[t];
    o += t > 0 ? ", {\"tid\": " : "{\"tid\": ";
    append_int(o, th.tid);
    o += ", \"name\": ";
    json_string(o, th.name);
    o += ", \"intervals\": [";
    for (std::size_t i = 0; i < th.intervals.size(); ++i) {
      const RecordedInterval& r = th.intervals[i];
      o += i > 0 ? ", [" : "[";
      append_int(o, r.name);
      o += ", ";
      append_int(o, r.start_ns);
      o += ", ";
      append_int(o, r.duration_ns);
      o += ", ";
      append_int(o, r.iteration);
      o += ']';
    }
    o += "]}";
  }
  o += "]}";
}
}  // namespace detail

LAPTIME_IMPL std::string Results::to_json() const {
  using detail::append_int;
  using detail::json_number;
  using detail::json_string;
  auto seconds = [](double ns) { return std::optional<double>(ns / 1e9); };
  // Appends `, "key": value` (null for a missing figure).
  std::string o = "{";
  auto num = [&o](const char* key, std::optional<double> v) {
    o += ", \"";
    o += key;
    o += "\": ";
    json_number(o, v);
  };
  // Appends `, "key": quantile` (3 significant digits: histogram buckets are good to 1 %).
  auto quantile = [&o](const char* key, std::optional<double> v) {
    o += ", \"";
    o += key;
    o += "\": ";
    json_number(o, v, 3);
  };
  // Appends `, "key": integer`.
  auto integer = [&o](const char* key, auto v) {
    o += ", \"";
    o += key;
    o += "\": ";
    append_int(o, v);
  };
  auto boolean = [&o](const char* key, bool v) {
    o += ", \"";
    o += key;
    o += v ? "\": true" : "\": false";
  };
  o += "\"schema\": ";
  append_int(o, schema);
  integer("rank", rank);
  integer("world_size", world_size);
  integer("pid", pid);
  o += ", \"host\": ";
  json_string(o, host);
  if (!clock.empty()) {
    o += ", \"clock\": ";
    json_string(o, clock);
  }
  integer("num_warmup_iters", num_warmup_iters);
  integer("iterations_measured", iterations_measured);
  integer("iterations_finished", iterations_finished);
  if (!gpu_timing_off.empty()) {
    o += ", \"gpu_timing_off\": ";
    json_string(o, gpu_timing_off);
  }
  if (worker_processes > 0 || workers_unrecorded > 0 || workers_pairs_dropped > 0) {
    integer("worker_processes", worker_processes);
    integer("workers_alive", workers_alive);
    integer("workers_unrecorded", workers_unrecorded);
    integer("workers_pairs_dropped", workers_pairs_dropped);
  }
  o += ", \"measurements\": [";
  const std::optional<double> none;
  bool first = true;
  for (const auto& m : measurements) {
    if (!first) o += ", ";
    first = false;
    o += "{\"name\": ";
    json_string(o, m.name);
    integer("count", m.count);
    const bool any = m.count > 0;  // no interval after warm-up: statistics are null, not 0/0
    num("total_s", seconds(m.total_ns));
    num("mean_per_iter_s", iterations_measured > 0 ? seconds(m.mean_per_iter_ns) : none);
    num("mean_per_interval_s", any ? seconds(m.mean_per_interval_ns) : none);
    num("min_s", any ? seconds(m.min_ns) : none);
    quantile("median_s", any ? seconds(m.median_ns) : none);
    quantile("p90_s", any ? seconds(m.p90_ns) : none);
    quantile("p99_s", any ? seconds(m.p99_ns) : none);
    num("max_s", any ? seconds(m.max_ns) : none);
    boolean("running", m.running > 0);
    if (m.resources) {
      const ResourceFigures& r = *m.resources;
      o += ", \"cpu\": {\"process_percent\": ";
      json_number(o, r.process_percent);
      num("process_cores", r.process_cores);
      num("main_cores", r.main_cores);
      num("system_percent", r.system_percent);
      o += "}, \"io\": {\"read_mb_per_s\": ";
      json_number(o, r.read_mb_per_s);
      num("write_mb_per_s", r.write_mb_per_s);
      num("rchar_mb_per_s", r.rchar_mb_per_s);
      num("wchar_mb_per_s", r.wchar_mb_per_s);
      o += "}";
    }
    if (!m.workers.empty()) {
      o += ", \"workers\": [";
      for (std::size_t w = 0; w < m.workers.size(); ++w) {
        const WorkerResult& wr = m.workers[w];
        const bool wany = wr.count > 0;
        o += w == 0 ? "{\"pid\": " : ", {\"pid\": ";
        append_int(o, wr.pid);
        o += ", \"label\": ";
        json_string(o, wr.label);
        boolean("alive", wr.alive);
        integer("count", wr.count);
        num("total_s", seconds(wr.total_ns));
        num("mean_per_interval_s", wany ? seconds(wr.mean_per_interval_ns) : none);
        quantile("median_s", wany ? seconds(wr.median_ns) : none);
        quantile("p90_s", wany ? seconds(wr.p90_ns) : none);
        num("max_s", wany ? seconds(wr.max_ns) : none);
        o += "}";
      }
      o += "]";
    }
    if (m.gpu_unavailable) {
      o += ", \"gpu\": null";
    } else if (m.gpu) {
      const GpuFigures& g = *m.gpu;
      const bool gany = g.count > 0;
      o += ", \"gpu\": {\"count\": ";
      append_int(o, g.count);
      integer("pending", g.pending);
      num("total_s", seconds(g.total_ns));
      num("mean_per_iter_s", iterations_measured > 0 ? seconds(g.mean_per_iter_ns) : none);
      num("mean_per_interval_s", gany ? seconds(g.mean_per_interval_ns) : none);
      num("min_s", gany ? seconds(g.min_ns) : none);
      quantile("median_s", gany ? seconds(g.median_ns) : none);
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
    boolean("running", t.running);
    o += "}";
  }
  o += "]";
  if (!warnings.empty()) {
    o += ", \"warnings\": [";
    for (std::size_t i = 0; i < warnings.size(); ++i) {
      if (i > 0) o += ", ";
      json_string(o, warnings[i]);
    }
    o += "]";
  }
  if (loop) {
    o += ", \"loop\": {\"count\": ";
    append_int(o, loop->count);
    num("total_s", seconds(loop->total_ns));
    num("mean_s", seconds(loop->mean_ns));
    num("min_s", seconds(loop->min_ns));
    quantile("median_s", seconds(loop->median_ns));
    quantile("p90_s", seconds(loop->p90_ns));
    num("max_s", seconds(loop->max_ns));
    o += "}";
  }
  if (verdict) {
    const Verdict& v = *verdict;
    o += ", \"verdict\": {\"kind\": ";
    json_string(o, v.kind);
    o += ", \"text\": ";
    json_string(o, v.text);
    o += ", \"data_name\": ";
    if (data_name.empty()) {
      o += "null";
    } else {
      json_string(o, data_name);
    }
    num("data_share", v.data_share);
    num("gpu_share", v.gpu_share);
    num("worker_cores", v.worker_cores);
    num("main_cores", v.main_cores);
    integer("cpus", v.cpus);
    o += ", \"workers_saturated\": ";
    o += !v.workers_saturated ? "null" : *v.workers_saturated ? "true" : "false";
    o += "}";
  }
  if (samples) detail::append_samples_json(o, *samples);
  o += "}";
  return o;
}

LAPTIME_END_NAMESPACE
