// A program's locale does not change what laptime reads or writes (docs/configuration.md, "number";
// docs/reports.md): a program that calls setlocale(LC_ALL, "") under de_DE (a decimal comma) or
// tr_TR (where 'I' lowers to a dotless i) still gets its LAPTIME_* decimals read, numbers written
// with a point, and the data-wait names recognised in any case.
//
// The locales come from Debian's `locales` package (scripts/deps.sh installs it): one that the
// machine has not generated is generated here, into a temporary folder named by LOCPATH.
#include <clocale>
#include <cstdlib>
#include <string>

#include "laptime/impl/clock.hpp"    // describe_clock
#include "laptime/impl/verdict.hpp"  // normalized_name, the default data-wait names
#include "laptime/laptime.hpp"
#include "reliability_support.hpp"
#include "test_support.hpp"

namespace {

/// Sets the whole locale to `name` (e.g. "de_DE.UTF-8"), generating it with localedef where the
/// machine lacks it; false if that fails too.
bool use_locale(const std::string& name) {
  if (std::setlocale(LC_ALL, name.c_str()) != nullptr) return true;
  static reliability::TempDir dir;
  const std::string lang = name.substr(0, name.find('.'));
  const std::string command =
      "localedef -i " + lang + " -f UTF-8 " + dir.file(name) + " > /dev/null 2>&1";
  if (std::system(command.c_str()) != 0) return false;
  ::setenv("LOCPATH", dir.file("").c_str(), 1);
  return std::setlocale(LC_ALL, name.c_str()) != nullptr;
}

/// Sets `name` for the scope (a REQUIRE names the package if it is missing), then "C" again.
struct LocaleScope {
  explicit LocaleScope(const std::string& name) {
    REQUIRE_MESSAGE(use_locale(name), name << ": not available, and localedef could not make it "
                                              "(Debian: apt-get install locales)");
  }
  ~LocaleScope() { std::setlocale(LC_ALL, "C"); }
};

}  // namespace

TEST_CASE("under de_DE a LAPTIME_* decimal with a point is read, and the clock keeps its point" *
          LAPTIME_NEEDS_ENABLED) {
  const LocaleScope de("de_DE.UTF-8");
  REQUIRE(std::string(std::localeconv()->decimal_point) == ",");  // strtod would stop at '.'
  const laptime::Settings s =
      laptime::settings_from_env(laptime_test::env({{"LAPTIME_NVTX_COUNTERS_HZ", "2.5"}}));
  CHECK(s.warnings.empty());
  CHECK(s.nvtx_counters_hz == 2.5);
  CHECK(laptime::detail::parse_plain_decimal(" 1000.00000000000000001 ") == 1000.0);
  CHECK(laptime::detail::parse_plain_decimal("0.0001") == 0.0001);
  CHECK(laptime::detail::parse_plain_decimal(".5") == 0.5);
  CHECK_FALSE(laptime::detail::parse_plain_decimal("2,5").has_value());
  laptime::detail::ClockInfo info;
  info.counter = true;
  info.hz = 2.45e9;
  CHECK(laptime::detail::describe_clock(info).find(" 2.45 GHz") != std::string::npos);
  info.hz = 999.5e6;
  CHECK(laptime::detail::describe_clock(info).find(" 999.50 MHz") != std::string::npos);
}

TEST_CASE("under de_DE the report's and the JSON's figures keep their point" *
          LAPTIME_NEEDS_ENABLED) {
  const LocaleScope de("de_DE.UTF-8");
  laptime::Results r;
  laptime::MeasurementResult m;
  m.name = "step";
  m.count = 2;
  m.total_ns = 2469;
  m.mean_per_iter_ns = m.mean_per_interval_ns = m.median_ns = 1234.5;
  r.measurements.push_back(m);
  r.iterations_measured = 2;
  const std::string text = r.to_text();
  CHECK(text.find("1.23 µs") != std::string::npos);
  CHECK(text.find("1,23") == std::string::npos);
  CHECK(r.to_json().find("\"mean_per_iter_s\": 1.2345e-06") != std::string::npos);
}

TEST_CASE("under tr_TR a data-wait name in capitals is still one ('I' lowers to 'i')") {
  const LocaleScope tr("tr_TR.UTF-8");
  CHECK(laptime::detail::normalized_name("DATA WAIT") == "data wait");
  CHECK(laptime::detail::is_default_data_name("DATA WAIT"));
  CHECK(laptime::detail::normalized_name("Data_ITER") == "data iter");
}
