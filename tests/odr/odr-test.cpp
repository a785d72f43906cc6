// One program, two builds of laptime: the compiled-out part records nothing and costs nothing,
// the instrumented part works, and they do not collide (docs/configuration.md, LAPTIME_DISABLE).
#include <string>

#include "parts.hpp"
#include "test_support.hpp"

TEST_CASE(
    "code built with and without LAPTIME_DISABLE links into one program and each behaves "
    "as built") {
  CHECK(std::string(instrumented::stopwatch_type()) != compiled_out::stopwatch_type());
  compiled_out::run_loop(5);
  instrumented::run_loop(3);
  const std::string on = instrumented::json();
  const std::string off = compiled_out::json();
  CHECK(on.find("\"name\": \"instrumented step\", \"count\": 3") != std::string::npos);
  CHECK(on.find("compiled_out step") == std::string::npos);
  CHECK(off.find("\"measurements\": []") != std::string::npos);
}
