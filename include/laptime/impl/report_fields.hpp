// laptime internals: the one description of the figures a report shows. Each figure of a name, a
// worker, the GPU and the loop is listed once, with its JSON key and form, when it is null, and
// where it stands in the text report; the renderers (impl/results.hpp) walk these tables,
// so the text and the JSON cannot disagree on what a figure is. Plain data, tested through the
// renderers with known results in tests/results-test.cpp and tests/output-test.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "laptime/config.hpp"
#include "laptime/impl/format.hpp"
#include "laptime/results.hpp"

LAPTIME_BEGIN_NAMESPACE
namespace detail {

/// How a figure is written in the JSON: nanoseconds as seconds with every digit, a quantile with
/// the 3 significant digits a histogram bucket holds, or an integer count.
enum class FigureForm : unsigned char { seconds, quantile, count };

/// When a figure has no value (JSON null, "n/a" in the report): never, when the thing has no
/// interval after warm-up (statistics of nothing are null, not 0/0), or when no iteration was
/// measured (a time per iteration).
enum class FigureNull : unsigned char { never, no_count, no_iterations };

/// One figure of a `T`: a duration (`value`, nanoseconds) or a count (`count`).
template <class Type>
struct Figure {
  // Members named through aliases: nvcc's host pass writes `double Type::*value;` back as
  // `double (Type::*value);`, which g++ -Wall (-Wparentheses) rejects under -Werror.
  using Value = double Type::*;
  using Count = std::uint64_t Type::*;
  const char* key;  ///< the JSON key
  FigureForm form;
  FigureNull null;
  Value value;
  Count count;
  /// In the text report: the column's header and width, and the column's place (-1: not shown).
  const char* header;
  unsigned char width;
  signed char column;

  constexpr Figure(const char* k, double Type::*v, FigureForm f, FigureNull n,
                   const char* h = nullptr, unsigned char w = 0, signed char c = -1)
      : key(k), form(f), null(n), value(v), count(nullptr), header(h), width(w), column(c) {}
  constexpr Figure(const char* k, std::uint64_t Type::*v, const char* h = nullptr,
                   unsigned char w = 0, signed char c = -1)
      : key(k),
        form(FigureForm::count),
        null(FigureNull::never),
        value(nullptr),
        count(v),
        header(h),
        width(w),
        column(c) {}
};

constexpr FigureForm kSec = FigureForm::seconds;
constexpr FigureForm kQuant = FigureForm::quantile;
constexpr FigureNull kNever = FigureNull::never;
constexpr FigureNull kNoCount = FigureNull::no_count;
constexpr FigureNull kNoIters = FigureNull::no_iterations;

/// A name's figures: the JSON's order, and the report table's columns (`column`).
using MR = MeasurementResult;
inline constexpr Figure<MR> kMeasurementFigures[] = {
    {"count", &MR::count, "count", 7, 3},
    {"total_s", &MR::total_ns, kSec, kNever, "total", 10, 2},
    {"mean_per_iter_s", &MR::mean_per_iter_ns, kSec, kNoIters, "per iter", 10, 0},
    {"mean_per_interval_s", &MR::mean_per_interval_ns, kSec, kNoCount, "per call", 10, 1},
    {"min_s", &MR::min_ns, kSec, kNoCount, "min", 10, 4},
    {"median_s", &MR::median_ns, kQuant, kNoCount, "median", 10, 5},
    {"p90_s", &MR::p90_ns, kQuant, kNoCount, "p90", 10, 6},
    {"p99_s", &MR::p99_ns, kQuant, kNoCount, "p99", 10, 7},
    {"max_s", &MR::max_ns, kSec, kNoCount, "max", 10, 8},
};
inline constexpr std::size_t kReportColumns = 9;

/// One worker process's figures of a name (JSON only: the report merges them into the name's).
using WR = WorkerResult;
inline constexpr Figure<WR> kWorkerFigures[] = {
    {"count", &WR::count},
    {"total_s", &WR::total_ns, kSec, kNever},
    {"mean_per_interval_s", &WR::mean_per_interval_ns, kSec, kNoCount},
    {"median_s", &WR::median_ns, kQuant, kNoCount},
    {"p90_s", &WR::p90_ns, kQuant, kNoCount},
    {"max_s", &WR::max_ns, kSec, kNoCount},
};

/// A name's GPU time; `column` orders the report's "gpu:" line.
using GF = GpuFigures;
inline constexpr Figure<GF> kGpuFigures[] = {
    {"count", &GF::count},
    {"pending", &GF::pending},
    {"total_s", &GF::total_ns, kSec, kNever},
    {"mean_per_iter_s", &GF::mean_per_iter_ns, kSec, kNoIters, " per iter", 0, 0},
    {"mean_per_interval_s", &GF::mean_per_interval_ns, kSec, kNoCount, " per call", 0, 1},
    {"min_s", &GF::min_ns, kSec, kNoCount},
    {"median_s", &GF::median_ns, kQuant, kNoCount, "median ", 0, 2},
    {"max_s", &GF::max_ns, kSec, kNoCount},
};

/// The loop's time; `column` orders the report's "loop" line.
using LF = LoopFigures;
inline constexpr Figure<LF> kLoopFigures[] = {
    {"count", &LF::count},
    {"total_s", &LF::total_ns, kSec, kNever},
    {"mean_s", &LF::mean_ns, kSec, kNever, " per iteration", 0, 0},
    {"min_s", &LF::min_ns, kSec, kNever},
    {"median_s", &LF::median_ns, kQuant, kNever, "median ", 0, 1},
    {"p90_s", &LF::p90_ns, kQuant, kNever, "p90 ", 0, 2},
    {"max_s", &LF::max_ns, kSec, kNever, "max ", 0, 3},
};

/// A figure that may be unavailable (nullopt: null in the JSON, "n/a" in the report).
template <class Type>
struct OptionalFigure {
  using Value = std::optional<double> Type::*;  // an alias for nvcc, as in Figure
  const char* key;
  Value value;
};

/// A tracked name's CPU ("cpu": {...}) and I/O ("io": {...}) in the JSON.
using RF = ResourceFigures;
inline constexpr OptionalFigure<RF> kCpuFigures[] = {{"process_percent", &RF::process_percent},
                                                     {"process_cores", &RF::process_cores},
                                                     {"main_cores", &RF::main_cores},
                                                     {"child_processes", &RF::child_processes},
                                                     {"system_percent", &RF::system_percent}};
inline constexpr OptionalFigure<RF> kIoFigures[] = {{"read_mb_per_s", &RF::read_mb_per_s},
                                                    {"write_mb_per_s", &RF::write_mb_per_s},
                                                    {"rchar_mb_per_s", &RF::rchar_mb_per_s},
                                                    {"wchar_mb_per_s", &RF::wchar_mb_per_s}};
/// The verdict's figures ("verdict": {...}).
inline constexpr OptionalFigure<Verdict> kVerdictFigures[] = {
    {"data_share", &Verdict::data_share},
    {"gpu_share", &Verdict::gpu_share},
    {"worker_cores", &Verdict::worker_cores},
    {"main_cores", &Verdict::main_cores}};

/// Whether the thing a figure belongs to has intervals after warm-up, and the run iterations.
struct FigureScope {
  bool has_count = true;
  bool has_iterations = true;
};

/// The figure's value in nanoseconds (a count as is), or nullopt where it has none.
template <class Type>
std::optional<double> figure_value(const Figure<Type>& f, const Type& t, FigureScope scope) {
  if ((f.null == kNoCount && !scope.has_count) || (f.null == kNoIters && !scope.has_iterations)) {
    return std::nullopt;
  }
  return f.count != nullptr ? static_cast<double>(t.*f.count) : t.*f.value;
}

/// `"key": ` after a comma, or first in its object.
inline void json_key(std::string& o, const char* key, bool first = false) {
  o += first ? "\"" : ", \"";
  o += key;
  o += "\": ";
}

/// `, "key": 12`: an integer field.
template <class Int>
void json_int(std::string& o, const char* key, Int v) {
  json_key(o, key);
  append_int(o, v);
}

/// `, "key": "text"`: a string field, escaped.
inline void json_text(std::string& o, const char* key, std::string_view text) {
  json_key(o, key);
  json_string(o, text);
}

/// `, "key": true`: a boolean field.
inline void json_bool(std::string& o, const char* key, bool v) {
  json_key(o, key);
  o += v ? "true" : "false";
}

/// `[1, 2, 3]`: integers as one JSON array.
template <class... Int>
void json_int_array(std::string& o, Int... v) {
  o += '[';
  const char* sep = "";
  ((o += sep, append_int(o, v), sep = ", "), ...);
  o += ']';
}

/// Appends the figures of `t` in the order of `table`, each `, "key": value` (the first without
/// its comma where `first`).
template <class Type, std::size_t Size>
void append_figures_json(std::string& o, const Figure<Type> (&table)[Size], const Type& t,
                         FigureScope scope, bool first = false) {
  for (const Figure<Type>& f : table) {
    json_key(o, f.key, first);
    first = false;
    if (f.count != nullptr) {
      append_int(o, t.*f.count);
      continue;
    }
    const std::optional<double> ns = figure_value(f, t, scope);
    json_number(o, ns ? std::optional<double>(*ns / 1e9) : std::nullopt, f.form == kQuant ? 3 : 9);
  }
}

template <class Type, std::size_t Size>
void append_figures_json(std::string& o, const OptionalFigure<Type> (&table)[Size], const Type& t,
                         bool first = false) {
  for (const OptionalFigure<Type>& f : table) {
    json_key(o, f.key, first);
    first = false;
    json_number(o, t.*f.value);
  }
}

/// The figures of `t` that a report line shows, in their order: "1.00 ms per iter, 1.00 ms per
/// call, median 900 µs" (a header ending in a space is said before the duration, others after).
template <class Type, std::size_t Size>
std::string figures_sentence(const Figure<Type> (&table)[Size], const Type& t) {
  std::string out;
  for (signed char column = 0;; ++column) {
    const Figure<Type>* found = nullptr;
    for (const Figure<Type>& f : table) {
      if (f.column == column) found = &f;
    }
    if (found == nullptr) return out;
    if (column > 0) out += ", ";
    const std::string header = found->header;
    const bool before = !header.empty() && header.back() == ' ';
    if (before) out += header;
    out += format_duration(t.*found->value);
    if (!before) out += header;
  }
}

}  // namespace detail
LAPTIME_END_NAMESPACE
