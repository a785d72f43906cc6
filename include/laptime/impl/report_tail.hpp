// laptime internals: the slow tail (Results::tail, impl/slow_tail.hpp) in the text report and
// in the JSON ("slow_tail", docs/reports.md "The slow tail"). Part of the renderings of
// impl/results.hpp; tested in tests/tail-test.cpp.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "laptime/config.hpp"
#include "laptime/impl/format.hpp"
#include "laptime/impl/report_fields.hpp"
#include "laptime/results.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

/// Causes the text report names per slow iteration, the largest first: at most
/// kTailCausesShown, each over kTailCauseShare of the iteration's excess over the median (a name
/// a few microseconds over its median does not explain a slow iteration). The JSON has them all.
inline constexpr std::size_t kTailCausesShown = 3;
inline constexpr double kTailCauseShare = 0.1;

/// How many of `s.causes` (the largest first) the report names.
inline std::size_t causes_shown(const SlowIteration& s, double median_ns) {
  std::size_t n = 0;
  while (n < s.causes.size() && n < kTailCausesShown &&
         s.causes[n].ns - s.causes[n].median_ns >= kTailCauseShare * (s.ns - median_ns)) {
    ++n;
  }
  return n;
}

/// "'data' +11.0 ms (11.1 ms, median 120 µs, on loader-1)": a cause, with its thread where the
/// name ran on several (there, which thread it was tells which worker was slow).
inline void append_cause_text(std::string& out, const TailCause& c) {
  out += detail::quoted(c.name) + " +" + format_duration(c.ns - c.median_ns);
  out += " (" + format_duration(c.ns) + ", median " + format_duration(c.median_ns);
  if (c.threads > 1) {
    out += ", on ";
    if (c.thread.empty()) {
      out += "tid ";
      append_int(out, c.tid);
    } else {
      out += escaped(c.thread);
    }
  }
  out += ')';
}

/// The report's "slow tail" lines: the iterations' median and p99, how many took over 3x the
/// median, then one line per slow iteration with its largest causes.
inline void append_tail_text(std::string& out, const SlowTail& t) {
  out += "  slow tail: ";
  append_int(out, t.iterations);
  out += t.iterations == 1 ? " measured iteration recorded" : " measured iterations recorded";
  out += ", median " + format_duration(t.median_ns) + ", p99 " + format_duration(t.p99_ns) + ", ";
  append_int(out, t.over_3x_median);
  out += " over 3x the median";
  out += t.slowest.empty() ? "\n" : "; slowest:\n";
  for (const SlowIteration& s : t.slowest) {
    out += "    iteration ";
    append_int(out, s.iteration);
    out += ": " + format_duration(s.ns) + " (";
    const double ratio = t.median_ns > 0 ? s.ns / t.median_ns : 0.0;
    if (finite_bits(ratio)) {
      append_fixed(out, ratio, 1);
    } else {
      out += "n/a";  // Results made in code may hold anything
    }
    out += "x the median)";
    const std::size_t shown = causes_shown(s, t.median_ns);
    if (shown == 0) out += ": no name over its median explains it";
    for (std::size_t i = 0; i < shown; ++i) {
      out += i == 0 ? ": " : ", ";
      append_cause_text(out, s.causes[i]);
    }
    if (const std::size_t more = s.causes.size() - shown; more > 0) {
      out += shown == 0 ? " (" : " (and ";
      append_int(out, more);
      out += shown == 0 ? "" : " more";
      out +=
          more == 1 ? " name, a little over its median)" : " names, a little over their medians)";
    }
    out += '\n';
  }
}

/// `, "key": seconds` (all digits: these are sums of exact intervals, not histogram quantiles).
inline void json_seconds(std::string& o, const char* key, double ns) {
  json_key(o, key);
  json_number(o, ns / 1e9);
}

/// `, "slow_tail": {...}`: the same as the report, every cause of each slow iteration.
inline void append_tail_json(std::string& o, const SlowTail& t) {
  o += ", \"slow_tail\": {\"iterations\": ";
  append_int(o, t.iterations);
  json_seconds(o, "median_s", t.median_ns);
  json_seconds(o, "p99_s", t.p99_ns);
  json_int(o, "over_3x_median", t.over_3x_median);
  json_bool(o, "tail_bound", t.tail_bound);
  o += ", \"slowest\": [";
  for (std::size_t i = 0; i < t.slowest.size(); ++i) {
    const SlowIteration& s = t.slowest[i];
    o += i > 0 ? ", {\"iteration\": " : "{\"iteration\": ";
    append_int(o, s.iteration);
    json_seconds(o, "time_s", s.ns);
    o += ", \"causes\": [";
    for (std::size_t j = 0; j < s.causes.size(); ++j) {
      const TailCause& c = s.causes[j];
      o += j > 0 ? ", {\"name\": " : "{\"name\": ";
      json_string(o, c.name);
      json_seconds(o, "time_s", c.ns);
      json_seconds(o, "median_s", c.median_ns);
      json_seconds(o, "over_median_s", c.ns - c.median_ns);
      json_int(o, "tid", c.tid);
      json_text(o, "thread", c.thread);
      json_int(o, "threads", c.threads);
      o += '}';
    }
    o += "]}";
  }
  o += "]}";
}

}  // namespace detail
LAPTIME_END_NAMESPACE
