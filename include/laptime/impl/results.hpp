// laptime internals: the renderings of Results, the text report and JSON (docs/reports.md), both
// written over the one description of the figures in impl/report_fields.hpp. The implementation
// part (LAPTIME_IMPL: compiled once by src/laptime.cpp, or carried by <laptime/laptime.hpp>); also
// in the compiled-out build, where they render what they are given.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "laptime/config.hpp"
#include "laptime/impl/format.hpp"
#include "laptime/impl/report_fields.hpp"
#include "laptime/impl/report_tail.hpp"
#include "laptime/results.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

// ---- the text report -------------------------------------------------------------------------

/// The first line (iterations, rank, pid, host, clock), the worker processes, GPU timing off.
inline void text_header(std::string& out, const Results& r) {
  out += "laptime stopwatch: ";
  append_int(out, r.iterations_measured);
  out += r.iterations_measured == 1 ? " measured iteration (" : " measured iterations (";
  append_int(out, r.num_warmup_iters);
  out += " warm-up";
  if (r.iterations_finished < r.num_warmup_iters) {
    out += ", ";
    append_int(out, r.iterations_finished);
    out += " done";
  }
  out += "); rank ";
  append_int(out, r.rank);
  out += '/';
  append_int(out, r.world_size);
  out += ", pid ";
  append_int(out, r.pid);
  out += ", host ";
  out += escaped(r.host);
  if (!r.clock.empty()) {
    out += ", clock ";
    out += escaped(r.clock);
  }
  out += '\n';
  if (r.worker_processes > 0 || r.workers_unrecorded > 0 || r.workers_pairs_dropped > 0) {
    out += "  worker processes: ";
    append_int(out, r.worker_processes);
    out += " measured (merged into the figures below, \"name \xc2\xb7 N workers\")";
    if (r.workers_unrecorded > 0) {
      out += "; ";
      append_int(out, r.workers_unrecorded);
      out += " found no free region and are missing";
    }
    if (r.workers_pairs_dropped > 0) {
      out += "; ";
      append_int(out, r.workers_pairs_dropped);
      out += " (thread, name) pairs did not fit in their worker's region and are missing";
    }
    out += '\n';
  }
  if (!r.gpu_timing_off.empty()) {
    out += "  gpu timing: off (";
    out += escaped(r.gpu_timing_off);
    out += ")\n";
  }
}

/// One table row: the label left-aligned in `width` columns, then each cell right-aligned in the
/// width its figure has.
inline void text_row(std::string& out, std::string_view label, std::size_t width,
                     const std::array<std::string, kReportColumns>& cells) {
  std::array<std::size_t, kReportColumns> widths{};
  for (const Figure<MeasurementResult>& f : kMeasurementFigures) {
    widths[static_cast<std::size_t>(f.column)] = f.width;
  }
  out += "  ";
  append_left(out, label, width);
  for (std::size_t c = 0; c < kReportColumns; ++c) {
    out += ' ';
    append_right(out, cells[c], widths[c]);
  }
  out += '\n';
}

/// The table's header row, from the figures' headers.
inline std::array<std::string, kReportColumns> text_headers() {
  std::array<std::string, kReportColumns> cells;
  for (const Figure<MeasurementResult>& f : kMeasurementFigures) {
    cells[static_cast<std::size_t>(f.column)] = f.header;
  }
  return cells;
}

/// A name's row of figures ("n/a" for a figure it has none of).
inline std::array<std::string, kReportColumns> text_cells(const MeasurementResult& m,
                                                          FigureScope scope) {
  std::array<std::string, kReportColumns> cells;
  for (const Figure<MeasurementResult>& f : kMeasurementFigures) {
    std::string& cell = cells[static_cast<std::size_t>(f.column)];
    if (f.count != nullptr) {
      append_int(cell, m.*f.count);
    } else {
      const std::optional<double> v = figure_value(f, m, scope);
      cell = v ? format_duration(*v) : "n/a";
    }
  }
  return cells;
}

/// Each name's label (escaped: a name must not rewrite the terminal; "· N workers"), and the
/// width of the label column.
inline std::pair<std::vector<std::string>, std::size_t> text_labels(const Results& r) {
  std::vector<std::string> labels;
  std::size_t width = 12;
  for (const auto& m : r.measurements) {
    labels.push_back(escaped(m.name));
    if (!m.workers.empty()) {
      labels.back() += " \xc2\xb7 ";
      append_int(labels.back(), static_cast<long long>(m.workers.size()));
      labels.back() += m.workers.size() == 1 ? " worker" : " workers";
    }
    // The marker of a running interval is part of the label: the column is as wide as it.
    if (m.running == 1) {
      labels.back() += " [running]";
    } else if (m.running > 1) {
      labels.back() += " [running x";
      append_int(labels.back(), m.running);
      labels.back() += ']';
    }
    width = std::max(width, labels.back().size() + 2);
  }
  return {std::move(labels), std::min<std::size_t>(width, 48)};
}

/// The lines under a name's row: its GPU time, its CPU and I/O.
inline void text_details(std::string& out, const MeasurementResult& m, std::size_t width) {
  if (m.gpu) {
    const GpuFigures& g = *m.gpu;
    out += "  ";
    out.append(width, ' ');
    out += " gpu: ";
    if (g.count == 0) {
      out += "no interval timed";  // no zero that reads as a measurement
    } else {
      out += figures_sentence(kGpuFigures, g);
      out += ", ";
      append_int(out, g.count);
      out += " intervals";
    }
    if (g.pending) {
      out += " (";
      append_int(out, g.pending);
      out += " pending)";
    }
    out += '\n';
  }
  if (m.resources) {
    const ResourceFigures& f = *m.resources;
    out += "  ";
    out.append(width, ' ');
    out += " cpu: process tree " + format_optional(f.process_percent, " %");
    out += " of machine (" + format_optional(f.process_cores, "") + " cores), system ";
    out += format_optional(f.system_percent, " %");
    out += "; io: read " + format_optional(f.rchar_mb_per_s, " MB/s");
    out += " (storage " + format_optional(f.read_mb_per_s, " MB/s");
    out += "), write " + format_optional(f.wchar_mb_per_s, " MB/s");
    out += " (storage " + format_optional(f.write_mb_per_s, " MB/s") + ")\n";
  }
}

/// The table of names: a header row, then a row per name and the lines under it.
inline void text_table(std::string& out, const Results& r) {
  if (r.measurements.empty()) return;
  auto [labels, width] = text_labels(r);
  text_row(out, "name", width, text_headers());
  for (std::size_t i = 0; i < r.measurements.size(); ++i) {
    const MeasurementResult& m = r.measurements[i];
    const std::string label = std::move(labels[i]);
    if (m.count == 0) {
      out += "  ";
      append_left(out, label, width);
      out += " no measurement after warm-up\n";
    } else {
      text_row(out, label, width, text_cells(m, {true, r.iterations_measured > 0}));
    }
    text_details(out, m, width);
  }
}

/// The loop's line, the verdict, the slow tail, one-time measurements and repeated warnings.
inline void text_footer(std::string& out, const Results& r) {
  if (r.loop) {
    out += "  loop (between finish_iter calls): ";
    out += figures_sentence(kLoopFigures, *r.loop);
    out += ", ";
    append_int(out, r.loop->count);
    out += r.loop->count == 1 ? " iteration timed\n" : " iterations timed\n";
  }
  if (r.verdict) {
    out += "  verdict: ";
    out += escaped(r.verdict->text);  // holds names: escaped, as in the table
    out += '\n';
  }
  if (r.tail) append_tail_text(out, *r.tail);
  if (!r.one_time.empty()) {
    out += "  one-time measurements:\n";
    for (const auto& o : r.one_time) {
      out += "    ";
      out += escaped(o.name);
      out += ": ";
      out += o.running ? std::string("[running]") : format_duration(o.duration_ns);
      out += '\n';
    }
  }
  for (const std::string& w : r.warnings) {
    out += "  warning: ";
    out += w;
    out += '\n';
  }
}

// ---- JSON ------------------------------------------------------------------------------------

/// `"schema": 1, "rank": ...` up to the worker processes' counts.
inline void json_header(std::string& o, const Results& r) {
  o += "\"schema\": ";
  append_int(o, r.schema);
  json_int(o, "rank", r.rank);
  json_int(o, "world_size", r.world_size);
  json_int(o, "pid", r.pid);
  json_text(o, "host", r.host);
  if (!r.clock.empty()) {
    json_text(o, "clock", r.clock);
  }
  json_int(o, "num_warmup_iters", r.num_warmup_iters);
  json_int(o, "iterations_measured", r.iterations_measured);
  json_int(o, "iterations_finished", r.iterations_finished);
  if (!r.gpu_timing_off.empty()) {
    json_text(o, "gpu_timing_off", r.gpu_timing_off);
  }
  if (r.worker_processes > 0 || r.workers_unrecorded > 0 || r.workers_pairs_dropped > 0) {
    json_int(o, "worker_processes", r.worker_processes);
    json_int(o, "workers_alive", r.workers_alive);
    json_int(o, "workers_peak", r.workers_peak);
    json_int(o, "workers_unrecorded", r.workers_unrecorded);
    json_int(o, "workers_pairs_dropped", r.workers_pairs_dropped);
  }
}

/// A name's object in "measurements": its figures, CPU and I/O, workers and GPU time.
inline void json_measurement(std::string& o, const MeasurementResult& m, bool iterations) {
  o += "{\"name\": ";
  json_string(o, m.name);
  append_figures_json(o, kMeasurementFigures, m, {m.count > 0, iterations});
  json_bool(o, "running", m.running > 0);
  if (m.resources) {
    o += ", \"cpu\": {";
    append_figures_json(o, kCpuFigures, *m.resources, /*first=*/true);
    o += "}, \"io\": {";
    append_figures_json(o, kIoFigures, *m.resources, /*first=*/true);
    o += "}";
  }
  if (!m.workers.empty()) {
    o += ", \"workers\": [";
    for (std::size_t w = 0; w < m.workers.size(); ++w) {
      const WorkerResult& wr = m.workers[w];
      o += w == 0 ? "{\"pid\": " : ", {\"pid\": ";
      append_int(o, wr.pid);
      json_text(o, "label", wr.label);
      json_bool(o, "alive", wr.alive);
      append_figures_json(o, kWorkerFigures, wr, {wr.count > 0, true});
      o += "}";
    }
    o += "]";
  }
  if (m.gpu_unavailable) {
    o += ", \"gpu\": null";
  } else if (m.gpu) {
    o += ", \"gpu\": {";
    append_figures_json(o, kGpuFigures, *m.gpu, {m.gpu->count > 0, iterations}, /*first=*/true);
    o += "}";
  }
  o += "}";
}

/// "one_time" and, where some warning repeated, "warnings".
inline void json_one_time_and_warnings(std::string& o, const Results& r) {
  o += ", \"one_time\": [";
  for (std::size_t i = 0; i < r.one_time.size(); ++i) {
    const OneTimeResult& t = r.one_time[i];
    o += i > 0 ? ", {\"name\": " : "{\"name\": ";
    json_string(o, t.name);
    json_key(o, "duration_s");
    json_number(o, t.running ? std::nullopt : std::optional<double>(t.duration_ns / 1e9));
    json_bool(o, "running", t.running);
    o += "}";
  }
  o += "]";
  if (!r.warnings.empty()) {
    o += ", \"warnings\": [";
    for (std::size_t i = 0; i < r.warnings.size(); ++i) {
      if (i > 0) o += ", ";
      json_string(o, r.warnings[i]);
    }
    o += "]";
  }
}

/// "loop" and "verdict", where the results have them.
inline void json_loop_and_verdict(std::string& o, const Results& r) {
  if (r.loop) {
    o += ", \"loop\": {";
    append_figures_json(o, kLoopFigures, *r.loop, {}, /*first=*/true);
    o += "}";
  }
  if (!r.verdict) return;
  const Verdict& v = *r.verdict;
  o += ", \"verdict\": {\"kind\": ";
  json_string(o, v.kind);
  json_text(o, "text", v.text);
  json_key(o, "data_name");
  if (r.data_name.empty()) {
    o += "null";
  } else {
    json_string(o, r.data_name);
  }
  append_figures_json(o, kVerdictFigures, v);
  json_int(o, "cpus", v.cpus);
  json_key(o, "workers_saturated");
  o += !v.workers_saturated ? "null" : *v.workers_saturated ? "true" : "false";
  json_key(o, "workers");
  if (v.workers) {
    append_int(o, *v.workers);
  } else {
    o += "null";
  }
  o += "}";
}

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
    if (i > 0) o += ", ";
    json_int_array(o, s.iteration_ends[i].first, s.iteration_ends[i].second);
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
      if (i > 0) o += ", ";
      json_int_array(o, r.name, r.start_ns, r.duration_ns, r.iteration);
    }
    o += "]}";
  }
  o += "]}";
}
}  // namespace detail

#if LAPTIME_ENABLED  // compiled out, both are inline and empty (laptime/results.hpp)
LAPTIME_IMPL std::string Results::to_text() const {
  std::string out;
  detail::text_header(out, *this);
  detail::text_table(out, *this);
  detail::text_footer(out, *this);
  return out;
}

LAPTIME_IMPL std::string Results::to_json() const {
  std::string o = "{";
  detail::json_header(o, *this);
  o += ", \"measurements\": [";
  for (std::size_t i = 0; i < measurements.size(); ++i) {
    if (i > 0) o += ", ";
    detail::json_measurement(o, measurements[i], iterations_measured > 0);
  }
  o += "]";
  detail::json_one_time_and_warnings(o, *this);
  detail::json_loop_and_verdict(o, *this);
  if (tail) detail::append_tail_json(o, *tail);
  if (samples) detail::append_samples_json(o, *samples);
  o += "}";
  return o;
}
#endif

LAPTIME_END_NAMESPACE
