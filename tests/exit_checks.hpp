// What exit-test and exit-signals-test check a helper process with (exit_helpers.hpp runs it):
// the environment it gets, and the results file it must leave.
#pragma once

#include <cstdlib>
#include <map>
#include <string>

#include <doctest/doctest.h>
#include "reliability_support.hpp"

namespace exit_test {

// The environment of a helper: `vars`, and under ThreadSanitizer a shorter sleep at exit. TSan
// sleeps there (atexit_sleep_ms, default 1 s) to let threads still running race with exit; 50 ms
// keeps that window and makes 100 runs take seconds, not minutes.
inline std::map<std::string, std::string> helper_env(std::map<std::string, std::string> vars) {
  const char* tsan = std::getenv("TSAN_OPTIONS");
  vars["TSAN_OPTIONS"] = std::string(tsan != nullptr ? tsan : "") + ":atexit_sleep_ms=50";
  vars.emplace("LAPTIME_PROFILE", "");
  return vars;
}

// A complete, valid results file with `iters` measured iterations of "main loop".
inline void check_json_file(const std::string& path, int iters) {
  std::string error;
  const auto json = reliability::parse_json(reliability::read_file(path), &error);
  REQUIRE_MESSAGE(json != nullptr, path << " is not complete, valid JSON: " << error);
  CHECK(json->get("iterations_measured")->number == iters);
  const reliability::Json* loop = reliability::find_measurement(*json, "main loop");
  REQUIRE(loop != nullptr);
  CHECK(loop->get("count")->number == iters);
}

}  // namespace exit_test
