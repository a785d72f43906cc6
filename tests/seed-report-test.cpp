// The report in the seed tool's layout (Stopwatch::set_report_format, LAPTIME_REPORT_FORMAT):
// what a script that read the seed's printed sections finds there, from a real Stopwatch run.
#include <chrono>
#include <cstdlib>
#include <sstream>
#include <string>
#include <thread>

#include "laptime/impl/seed_report.hpp"
#include "laptime/laptime.hpp"
#include "test_support.hpp"

namespace {
std::string python_repr(double v) {
  std::string s;
  laptime::detail::append_python_float(s, v);
  return s;
}

}  // namespace

TEST_CASE("seconds are written as Python's repr() writes a float, digit for digit") {
  // The expected texts are Python 3.11's repr() of the same doubles.
  CHECK(python_repr(0.034242291450500485) == "0.034242291450500485");
  CHECK(python_repr(100.0) == "100.0");
  CHECK(python_repr(1e-05) == "1e-05");
  CHECK(python_repr(1.5e-05) == "1.5e-05");
  CHECK(python_repr(0.0001) == "0.0001");
  CHECK(python_repr(1e16) == "1e+16");
  CHECK(python_repr(1e15) == "1000000000000000.0");
  CHECK(python_repr(0.0) == "0.0");
  CHECK(python_repr(3.0) == "3.0");
  CHECK(python_repr(1234.5) == "1234.5");
  CHECK(python_repr(5e-324) == "5e-324");
  CHECK(python_repr(0.1) == "0.1");
  CHECK(python_repr(2.5e-07) == "2.5e-07");
  CHECK(python_repr(-0.5) == "-0.5");
  CHECK(python_repr(123456789012345.6) == "123456789012345.6");
  CHECK(python_repr(1.7976931348623157e308) == "1.7976931348623157e+308");
  CHECK(python_repr(99.99999999999999) == "99.99999999999999");
}

#if LAPTIME_ENABLED
namespace {
// The float after "  `name`: " in the section that starts with `title`.
double seed_value(const std::string& text, const std::string& title, const std::string& name) {
  const auto section = text.find(title);
  REQUIRE(section != std::string::npos);
  const std::string key = "  `" + name + "`: ";
  const auto at = text.find(key, section);
  REQUIRE(at != std::string::npos);
  return std::strtod(text.c_str() + at + key.size(), nullptr);
}

void sleep_ms(int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}
}  // namespace

TEST_CASE("the seed's report layout: its sections, in seconds, with laptime's figures") {
  laptime::detail::testing_reset_stopwatch();
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(1, std::nullopt, false);
  CHECK(sw.report().rfind("laptime stopwatch", 0) == 0);  // laptime's table by default
  sw.set_report_format(laptime::ReportFormat::Seed);
  const std::string rule(50, '~');
  const std::string head = "######################### Stopwatch #########################\n" + rule;

  CHECK(sw.report() == head + "\nwarmup not finished (0 out of 1 warmup iterations finished)\n" +
                           rule + "\n" + std::string(61, '#') + "\n");
  sw.start_one_time_measurement("preparation");
  sw.start_meas("step");
  sw.end_meas("step");
  sw.finish_iter();  // the warm-up
  CHECK(sw.report().find("warmup finished (1 iterations), but no iterations were performed "
                         "after that\n" +
                         rule + "\nOne-time measurements:\n  `preparation`: running\n") !=
        std::string::npos);
  sw.end_one_time_measurement("preparation");

  sw.set_cpu_usage_meas_name("step");
  for (int i = 0; i < 3; ++i) {
    sw.start_meas("step");
    for (int k = 0; k < 2; ++k) {
      sw.start_meas("load");
      sleep_ms(2);
      sw.end_meas("load");
    }
    sw.end_meas("step");
    sw.finish_iter();
  }
  const std::string text = sw.report();
  const laptime::Results r = sw.results();
  INFO(text);
  // The seed's order of sections, each name in backquotes, first-seen order.
  const char* titles[] = {"Num. measured iterations: 3\n",
                          "Average runtime per iteration:\n",
                          "Average runtime per measured interval:\n",
                          "Total runtime:\n",
                          "Mean CPU usage during `step`: ",
                          "One-time measurements:\n"};
  std::size_t at = 0;
  for (const char* t : titles) {
    const auto found = text.find(t, at);
    CHECK_MESSAGE(found != std::string::npos, t);
    at = found == std::string::npos ? at : found;
  }
  CHECK(text.rfind(head + "\nNum. measured iterations: 3\n. . . ", 0) == 0);
  CHECK(text.find("  `step`: ") < text.find("  `load`: "));
  // Seconds, as laptime measured them: two 2 ms loads per iteration.
  const double per_iter = seed_value(text, "Average runtime per iteration:", "load");
  const double per_call = seed_value(text, "Average runtime per measured interval:", "load");
  const double total = seed_value(text, "Total runtime:", "load");
  CHECK(per_iter == doctest::Approx(r.measurements[1].mean_per_iter_ns * 1e-9));
  CHECK(per_call == doctest::Approx(r.measurements[1].mean_per_interval_ns * 1e-9));
  CHECK(total == doctest::Approx(r.measurements[1].total_ns * 1e-9));
  CHECK(per_iter == doctest::Approx(2 * per_call));
  CHECK(per_call >= 0.002);
  CHECK(per_call < 0.5);
  // The CPU line is the whole machine's share, as the seed's psutil.cpu_percent() was.
  REQUIRE(r.measurements[0].resources);
  REQUIRE(r.measurements[0].resources->system_percent);
  CHECK(text.find("Mean CPU usage during `step`: " +
                  python_repr(*r.measurements[0].resources->system_percent) + "\n") !=
        std::string::npos);
  CHECK(seed_value(text, "One-time measurements:", "preparation") > 0);
  CHECK(text.size() > 61);
  CHECK(text.substr(text.size() - 62) == std::string(61, '#') + "\n");
  // print_eval_times prints the same layout; the JSON is not affected.
  std::ostringstream printed;
  sw.print_eval_times(printed);
  CHECK(printed.str().rfind(head, 0) == 0);
  CHECK(sw.to_json().find("\"measurements\"") != std::string::npos);
  sw.set_report_format(laptime::ReportFormat::Table);
  CHECK(sw.report().rfind("laptime stopwatch", 0) == 0);
  laptime::detail::testing_reset_stopwatch();
}

TEST_CASE("a tracked name whose intervals no CPU tick saw still has its CPU line: nan") {
  // A seed log parser reads one line per tracked name; /proc/stat counts ticks (10 ms), so
  // microsecond intervals may see none and have no system figure.
  laptime::Results r;
  r.iterations_finished = r.iterations_measured = 1;
  r.measurements.resize(1);
  r.measurements[0].name = "tiny";
  r.measurements[0].resources.emplace();
  CHECK(laptime::detail::seed_text(r).find("Mean CPU usage during `tiny`: nan\n") !=
        std::string::npos);
}

TEST_CASE(
    "names in the seed's layout are escaped as in the table: no control character, no forged "
    "line") {
  laptime::Results r;
  r.iterations_finished = r.iterations_measured = 1;
  r.measurements.resize(1);
  r.measurements[0].name = "\x1b]0;title\x07\nNum. measured iterations: 999";
  r.measurements[0].count = 1;
  r.measurements[0].resources.emplace();
  r.one_time.resize(1);
  r.one_time[0].name = "\x1b[2J";
  const std::string text = laptime::detail::seed_text(r);
  CAPTURE(text);
  CHECK(text.find('\x1b') == std::string::npos);
  CHECK(text.find('\x07') == std::string::npos);
  CHECK(text.find("\nNum. measured iterations: 999") == std::string::npos);
  CHECK(text.find("`\\u001b]0;title\\u0007\\u000aNum. measured iterations: 999`") !=
        std::string::npos);
}

TEST_CASE("LAPTIME_REPORT_FORMAT wins over set_report_format and is read at each enable()") {
  laptime::detail::testing_reset_stopwatch();
  auto& sw = laptime::Stopwatch::instance();
  ::setenv("LAPTIME_REPORT_FORMAT", "SEED", 1);
  sw.enable(0, std::nullopt, false);
  CHECK(sw.report().rfind("#########", 0) == 0);
  sw.set_report_format(laptime::ReportFormat::Table);  // the environment wins
  CHECK(sw.report().rfind("#########", 0) == 0);
  ::setenv("LAPTIME_REPORT_FORMAT", "table", 1);
  sw.enable(0, std::nullopt, false);
  CHECK(sw.report().rfind("laptime stopwatch", 0) == 0);
  ::unsetenv("LAPTIME_REPORT_FORMAT");
  laptime::detail::testing_reset_stopwatch();
}
#endif
