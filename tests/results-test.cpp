// What the report and the JSON print, whatever the names and the program's locale, and how often
// laptime warns about the same cause.
// A small name table, so that the test can fill it (one executable, one translation unit). The
// table's size is part of the layout, so this file compiles the implementation itself, on
// purpose (the library beside it was compiled with the default; the weak definitions of this
// file, first on the link line, are the ones the program uses).
#define LAPTIME_MAX_NAMES 16

#include <unistd.h>

#include <clocale>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "laptime/impl/format.hpp"          // format_duration, the report's units
#include "laptime/impl/implementation.hpp"  // with this file's LAPTIME_MAX_NAMES, see above
#include "laptime/laptime.hpp"
#include "stopwatch_support.hpp"
#include "test_support.hpp"

namespace {

using laptime_test::find;
using laptime_test::Fresh;

// A name that would clear the screen, set the window title and move the cursor if printed raw,
// with a C1 control (U+009B, CSI) and a byte that is not UTF-8.
const std::string kHostile =
    "evil\x1b[2J\x1b]0;owned\x07\r\n\t\xc2\x9b"
    "31m\xff"
    "end";

// True when `text` holds a control character other than the line ends a report is made of.
bool has_control(const std::string& text) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if ((c < 0x20 && c != '\n') || c == 0x7f) return true;
    if (c == 0xc2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
        static_cast<unsigned char>(text[i + 1]) < 0xa0) {
      return true;
    }
  }
  return false;
}

// Everything written to stderr while `fn` runs.
template <class Fn>
[[maybe_unused]] std::string capture_stderr(Fn&& fn) {
  std::fflush(stderr);
  char path[] = "/tmp/laptime-results-test-XXXXXX";
  const int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  const int saved = ::dup(2);
  ::dup2(fd, 2);
  fn();
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  std::string out;
  char buf[4096];
  ::lseek(fd, 0, SEEK_SET);
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  ::unlink(path);
  return out;
}

[[maybe_unused]] std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

laptime::Results sample_results() {
  laptime::Results r;
  r.pid = 4242;
  r.host = "node1";
  r.num_warmup_iters = 1;
  r.iterations_finished = 4;
  r.iterations_measured = 3;
  laptime::MeasurementResult m;
  m.name = "step";
  m.count = 3;
  m.total_ns = 3.5e6;
  m.mean_per_iter_ns = m.mean_per_interval_ns = 1.1666e6;
  m.min_ns = 812;
  m.median_ns = 3414;
  m.p90_ns = 17.25e6;
  m.p99_ns = 723e9;
  m.max_ns = 723.4e9;
  laptime::ResourceFigures f;
  f.process_percent = 5.55;
  f.process_cores = 14.1;
  f.read_mb_per_s = 120.0;
  m.resources = f;
  r.measurements.push_back(m);
  r.one_time.push_back({"pipe_create", 1.5e9, false});
  return r;
}

}  // namespace

TEST_CASE("a name cannot rewrite the terminal: the report escapes it as the JSON does" *
          LAPTIME_NEEDS_ENABLED) {
  laptime::Results r = sample_results();
  r.measurements[0].name = kHostile;
  r.one_time[0].name = kHostile;
  r.host = "host\x1b[1m";
  const std::string text = r.to_text();
  CHECK_FALSE(has_control(text));
  // A byte that is not UTF-8 shows as `ls -b` shows it in a file name (the JSON has U+FFFD).
  CHECK(text.find("evil\\u001b[2J\\u001b]0;owned\\u0007\\u000d\\u000a\\u0009\\u009b31m\\xff"
                  "end") != std::string::npos);
  CHECK(text.find("host\\u001b[1m") != std::string::npos);
  const std::string json = r.to_json();
  CHECK_FALSE(has_control(json));
  // A backslash in a name is doubled in the report, so that an escape is never ambiguous.
  r.measurements[0].name = "a\\u001b";
  CHECK(r.to_text().find("a\\\\u001b") != std::string::npos);
}

TEST_CASE("a name in a usage error message is escaped too" * LAPTIME_NEEDS_ENABLED) {
#if LAPTIME_ENABLED
  laptime::detail::testing_reset_stopwatch();
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  std::string message;
  try {
    sw.end_meas(kHostile);
  } catch (const laptime::UsageError& e) {
    message = e.what();
  }
  REQUIRE_FALSE(message.empty());
  CHECK_FALSE(has_control(message));
  CHECK(message.find("'evil\\u001b[2J") != std::string::npos);
  laptime::detail::testing_reset_stopwatch();
#endif
}

TEST_CASE("a long name is cut in a usage error message, at a character, with its length" *
          LAPTIME_NEEDS_ENABLED) {
#if LAPTIME_ENABLED
  laptime::detail::testing_reset_stopwatch();
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  // "a" then é (two bytes) repeated: byte 200 is the second byte of an é, the cut steps back.
  std::string name = "a";
  while (name.size() < 100000) name += "\xc3\xa9";
  std::string message;
  try {
    sw.end_meas(name);
  } catch (const laptime::UsageError& e) {
    message = e.what();
  }
  CHECK(message.size() < 1000);  // was 300 kB: the name three times whole
  CHECK(message.find("\xc3\xa9\xc3\xa9...' (100001 bytes)") != std::string::npos);
  CHECK(message.find("\\x") == std::string::npos);  // no byte of a split character
  // Bytes that are not UTF-8 are cut where they stand: something of the name is shown.
  CHECK(laptime::detail::quoted(std::string(300, '\x80')).find("\\x80...' (300 bytes)") !=
        std::string::npos);
  laptime::detail::testing_reset_stopwatch();
#endif
}

// This file is compiled with -ffinite-math-only (tests/CMakeLists.txt), as -ffast-math builds are:
// std::isfinite is then folded to true.
TEST_CASE("NaN and infinity are null in the JSON and n/a in the report, also under -ffast-math" *
          LAPTIME_NEEDS_ENABLED) {
  laptime::Results r;
  r.iterations_measured = 1;
  r.iterations_finished = 1;
  laptime::MeasurementResult m;
  m.name = "x";
  m.count = 1;
  volatile double zero = 0;
  m.total_ns = zero / zero;
  m.mean_per_iter_ns = 1.0 / zero;
  m.mean_per_interval_ns = -1.0 / zero;
  m.min_ns = m.median_ns = m.p90_ns = m.p99_ns = m.max_ns = 5;
  r.measurements.push_back(m);
  const std::string json = r.to_json();
  CHECK(json.find("\"total_s\": null, \"mean_per_iter_s\": null, \"mean_per_interval_s\": null") !=
        std::string::npos);
  CHECK(json.find("nan") == std::string::npos);
  CHECK(json.find("inf") == std::string::npos);
  const std::string text = r.to_text();
  CHECK(text.find("nan") == std::string::npos);
  CHECK(text.find("inf") == std::string::npos);
  CHECK(text.find("n/a") != std::string::npos);
  CHECK(laptime::detail::finite_bits(5e-324));  // the smallest subnormal
  CHECK(laptime::detail::finite_bits(1.7976931348623157e308));
}

TEST_CASE("numbers are written with a '.' whatever the program's locale" * LAPTIME_NEEDS_ENABLED) {
  // A locale whose decimal point is ',' (test_support.hpp makes it where the machine lacks it).
  const laptime_test::LocaleScope de("de_DE.UTF-8");
  char probe[32];
  std::snprintf(probe, sizeof probe, "%.1f", 1.5);
  CHECK(std::string(probe) == "1,5");  // the locale is in force: printf would write ','
  const laptime::Results r = sample_results();
  const std::string text = r.to_text();
  const std::string json = r.to_json();
  CHECK(text.find("1.17 ms") != std::string::npos);
  CHECK(text.find("5.5 %") != std::string::npos);
  CHECK(json.find("\"total_s\": 0.0035,") != std::string::npos);
  CHECK(json.find("\"process_percent\": 5.55,") != std::string::npos);
  CHECK(laptime::detail::format_duration(3414) == "3.41 \xC2\xB5s");
}

TEST_CASE("the report keeps its layout: units, padding and columns" * LAPTIME_NEEDS_ENABLED) {
  const std::string text = sample_results().to_text();
  CHECK(text ==
        "laptime stopwatch: 3 measured iterations (1 warm-up); rank 0/1, pid 4242, host node1\n"
        "  name           per iter   per call      total   count        min     median        p90"
        "        p99        max\n"
        "  step            1.17 ms    1.17 ms    3.50 ms       3     812 ns    3.41 \xC2\xB5s    "
        "17.2 ms      723 s      723 s\n"
        "               cpu: process tree 5.5 % of machine (14.1 cores), system n/a; io: read n/a "
        "(storage 120.0 MB/s), write n/a (storage n/a)\n"
        "  one-time measurements:\n"
        "    pipe_create: 1.50 s\n");
}

TEST_CASE("a running name's marker widens the name column: every row's figures stay aligned" *
          LAPTIME_NEEDS_ENABLED) {
  laptime::Results r = sample_results();
  laptime::MeasurementResult loader = r.measurements[0];
  loader.name = "loader: decode";
  loader.running = 1;
  loader.resources.reset();
  r.measurements.push_back(loader);
  const std::string text = r.to_text();
  INFO(text);
  const auto row = [&](const std::string& start) {
    const auto at = text.find("\n  " + start);
    REQUIRE(at != std::string::npos);
    return text.substr(at + 1, text.find('\n', at + 1) - at - 1);
  };
  const std::string header = row("name"), step = row("step "), running = row("loader: decode");
  CHECK(running.find("loader: decode [running] ") == 2);
  // "per iter" and its figure end in the same column on every row.
  const auto end_of = [](const std::string& line, const std::string& what) {
    return line.find(what) + what.size();
  };
  CHECK(end_of(step, "1.17 ms") == end_of(header, "per iter"));
  CHECK(end_of(running, "1.17 ms") == end_of(header, "per iter"));
}

TEST_CASE("quantiles are exported with the digits a histogram has, exact figures with all" *
          LAPTIME_NEEDS_ENABLED) {
  laptime::Results r = sample_results();
  r.measurements[0].median_ns = 3096575.5;  // a bucket midpoint, good to 1 %
  r.measurements[0].min_ns = 3096575.5;     // an exact figure
  const std::string json = r.to_json();
  CAPTURE(json);
  CHECK(json.find("\"median_s\": 0.0031,") != std::string::npos);
  CHECK(json.find("\"p99_s\": 723,") != std::string::npos);
  CHECK(json.find("\"min_s\": 0.0030965755,") != std::string::npos);
}

TEST_CASE("the JSON carries the schema 1 keys" * LAPTIME_NEEDS_ENABLED) {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(1, std::nullopt, false);
  sw.track_cpu_usage("training loop");
  for (int i = 0; i < 3; ++i) {
    sw.start_meas("training loop");
    sw.start_meas("quote\"and\\back\nslash");
    sw.end_meas("quote\"and\\back\nslash");
    sw.end_meas("training loop");
    sw.finish_iter();
  }
  const std::string j = sw.to_json();
  for (const char* key : {"\"schema\": 1",
                          "\"rank\": ",
                          "\"world_size\": ",
                          "\"pid\": ",
                          "\"host\": ",
                          "\"num_warmup_iters\": 1",
                          "\"iterations_measured\": 2",
                          "\"measurements\": [",
                          "\"name\": \"training loop\"",
                          "\"count\": 2",
                          "\"total_s\": ",
                          "\"mean_per_iter_s\": ",
                          "\"mean_per_interval_s\": ",
                          "\"min_s\": ",
                          "\"median_s\": ",
                          "\"p90_s\": ",
                          "\"p99_s\": ",
                          "\"max_s\": ",
                          "\"running\": false",
                          "\"cpu\": {\"process_percent\": ",
                          "\"process_cores\": ",
                          "\"system_percent\": ",
                          "\"io\": {\"read_mb_per_s\": ",
                          "\"write_mb_per_s\": ",
                          "\"one_time\": ["}) {
    CAPTURE(key);
    CHECK(j.find(key) != std::string::npos);
  }
  CHECK(j.find("\"name\": \"quote\\\"and\\\\back\\u000aslash\"") != std::string::npos);
  // cpu/io only for tracked names: exactly one "cpu" object
  CHECK(j.find("\"cpu\"") == j.rfind("\"cpu\""));
  CHECK(j.front() == '{');
  CHECK(j.back() == '}');
}

TEST_CASE("names are arbitrary bytes: empty, long, non-UTF-8" * LAPTIME_NEEDS_ENABLED) {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  const std::string long_name(10000, 'x');
  const std::string bad_utf8 = "caf\xe9 \xff";
  const std::string with_nul("a\0b", 3);
  for (const std::string& n : {std::string(), long_name, bad_utf8, with_nul}) {
    sw.start_meas(n);
    sw.end_meas(n);
  }
  sw.finish_iter();
  const auto r = sw.results();
  CHECK(r.measurements.size() == 4);
  CHECK(find(r, with_nul) != nullptr);
  CHECK(find(r, "a") == nullptr);  // "a\0b" is its own name
  const std::string j = sw.to_json();
  CHECK(j.find("caf\xEF\xBF\xBD \xEF\xBF\xBD") != std::string::npos);  // replaced, valid UTF-8
  CHECK(j.find("a\\u0000b") != std::string::npos);
}

TEST_CASE(
    "names past LAPTIME_MAX_NAMES warn once under the Warn policy, and the report counts "
    "the rest" *
    LAPTIME_NEEDS_ENABLED) {
#if LAPTIME_ENABLED
  laptime::detail::testing_reset_stopwatch();
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  laptime::set_error_policy(laptime::ErrorPolicy::Warn);
  const std::string err = capture_stderr([&] {
    for (int round = 0; round < 3; ++round) {
      for (int i = 0; i < 40; ++i) {  // 40 names: the table holds 16, some taken by other cases
        const std::string name = "name " + std::to_string(i);
        sw.start_meas(name);
        sw.end_meas(name);
      }
      sw.finish_iter();
    }
    sw.track_cpu_usage("one name too many");
  });
  laptime::set_error_policy(laptime::ErrorPolicy::Throw);
  CHECK(count(err, "LAPTIME_MAX_NAMES") == 1);
  CHECK(count(err, "\n") == 1);
  const std::string report = sw.report();
  CAPTURE(report);
  CHECK(report.find("more calls with names past LAPTIME_MAX_NAMES were not measured") !=
        std::string::npos);
  const std::string json = sw.to_json();
  CHECK(json.find("\"warnings\": [\"") != std::string::npos);
  CHECK(count(report, "warning:") == 1);
  laptime::detail::testing_reset_stopwatch();
#endif
}

TEST_CASE("the compiled-out Stopwatch's JSON and report are those of empty results") {
  // What LAPTIME_DISABLE's to_json() and report() return without linking the renderer.
  CHECK(laptime::Results{}.to_json() == laptime::detail::kEmptyResultsJson);
  CHECK(laptime::Results{}.to_text() == laptime::detail::kEmptyResultsText);
#if !LAPTIME_ENABLED
  CHECK(laptime::Stopwatch::instance().to_json() == laptime::Results{}.to_json());
  CHECK(laptime::Stopwatch::instance().report() == laptime::Results{}.to_text());
  // Compiled out there is no renderer: results with figures render as empty ones.
  CHECK(sample_results().to_text() == laptime::detail::kEmptyResultsText);
  CHECK(sample_results().to_json() == laptime::detail::kEmptyResultsJson);
#endif
}

TEST_CASE("GPU timing on with no interval timed shows no zero that reads as a measurement" *
          LAPTIME_NEEDS_ENABLED) {
#if LAPTIME_ENABLED  // the verdict's rule is the implementation's
  // GPU timing on, but every interval was measured on a thread with no current CUDA context: the
  // name has GPU figures with a count of 0 (a user's trial saw "gpu: 0 ns per iter, ... median
  // 0 ns, 0 intervals" and a verdict telling to enable the GPU timing that was on).
  laptime::Results r;
  r.iterations_measured = 10;
  r.loop = laptime::LoopFigures{};
  r.loop->count = 10;
  r.loop->mean_ns = 4e6;
  r.data_name = "data";
  for (const char* name : {"data", "step"}) {
    laptime::MeasurementResult m;
    m.name = name;
    m.count = 10;
    m.mean_per_iter_ns = m.mean_per_interval_ns = m.median_ns = name[0] == 'd' ? 1e6 : 3e6;
    m.total_ns = 10 * m.mean_per_iter_ns;
    if (name[0] == 's') m.gpu = laptime::GpuFigures{};
    r.measurements.push_back(m);
  }
  const std::string text = r.to_text();
  CHECK(text.find("gpu: no interval timed") != std::string::npos);
  CHECK(text.find("0 ns per iter") == std::string::npos);
  const laptime::Verdict v = laptime::detail::verdict(laptime::detail::verdict_figures(r));
  CHECK(v.text.find("no interval got GPU time") != std::string::npos);
  CHECK(v.text.find("enable_gpu_timing tells") == std::string::npos);
#endif
}
