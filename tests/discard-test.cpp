// discard_meas (docs/stopwatch.md): an interval begun for work that never came ends uncounted, and
// the name goes on as if it had not started; the integrations rely on it for the fetch they
// start before knowing whether another step follows.
#include <string>
#include <thread>

#include "laptime/stopwatch.hpp"
#include "stopwatch_support.hpp"

using laptime_test::error_of;
using laptime_test::find;
using laptime_test::Fresh;

TEST_CASE("discard_meas ends the calling thread's interval uncounted" * LAPTIME_NEEDS_ENABLED) {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  for (int i = 0; i < 3; ++i) {
    sw.start_meas("fetch");
    sw.end_meas("fetch");
    sw.finish_iter();
  }
  sw.start_meas("fetch");  // the step it was for never comes
  sw.discard_meas("fetch");
  sw.finish_iter();  // nothing runs on this thread any more
  const auto m = find(sw.results(), "fetch");
  REQUIRE(m != nullptr);
  CHECK(m->count == 3);
  CHECK_FALSE(m->running);
  sw.start_meas("fetch");  // the name starts again as usual
  sw.end_meas("fetch");
  CHECK(find(sw.results(), "fetch")->count == 4);
}

TEST_CASE("discard_meas of a name not running on this thread is a usage error" *
          LAPTIME_NEEDS_ENABLED) {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  CHECK(error_of([&] { sw.discard_meas("never"); }).find("'never' is not running on this thread") !=
        std::string::npos);
  std::thread([&] { sw.start_meas("elsewhere"); }).join();
  CHECK(error_of([&] { sw.discard_meas("elsewhere"); }).find("discard_meas('elsewhere')") !=
        std::string::npos);
  sw.end_meas("elsewhere");  // still running, and its own end counts it
  CHECK(find(sw.results(), "elsewhere")->count == 1);
}

TEST_CASE("discard_meas does nothing before enable() and while disabled") {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  CHECK_NOTHROW(sw.discard_meas("before"));
  sw.enable(0, std::nullopt, false);
  sw.start_meas("dropped by disable");
  sw.disable();
  CHECK_NOTHROW(sw.discard_meas("dropped by disable"));
  CHECK_NOTHROW(sw.discard_meas("never"));
#if LAPTIME_ENABLED  // compiled out, every call does nothing
  sw.enable(0, std::nullopt, false);
  // Started in the earlier period: its discard ends it silently, as its end_meas would.
  CHECK_NOTHROW(sw.discard_meas("dropped by disable"));
  CHECK(error_of([&] { sw.discard_meas("dropped by disable"); }).find("not running") !=
        std::string::npos);  // once
#endif
}
