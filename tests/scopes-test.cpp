// Timing a scope (docs/stopwatch.md): ScopedMeasurement and LAPTIME_MEAS, also when the scope
// throws, when it re-enters a name that runs, and when one expansion holds two of them.
#include <chrono>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>

#include "laptime/nvtx.hpp"
#include "laptime/stopwatch.hpp"
#include "stopwatch_support.hpp"

namespace {

using laptime_test::error_of;
using laptime_test::find;
using laptime_test::Fresh;
using laptime_test::spin_for;

// A name whose text outlives the scope is taken; a temporary std::string, gone before the scope's
// end reads it, does not compile (in both builds: the class is the same compiled out).
using Scoped = laptime::ScopedMeasurement;
static_assert(std::is_constructible<Scoped, const char*>::value, "a literal");
static_assert(std::is_constructible<Scoped, std::string&>::value, "a variable");
static_assert(std::is_constructible<Scoped, const std::string&>::value, "a const variable");
static_assert(std::is_constructible<Scoped, std::string_view>::value, "a view");
static_assert(!std::is_constructible<Scoped, std::string&&>::value, "a temporary std::string");
static_assert(!std::is_constructible<Scoped, std::string>::value, "a std::string by value");

// Each macro takes one __COUNTER__ value, compiled in or out (this file is built both ways): nvcc
// compiles laptime out in its device pass, and a kernel or a doctest case named with __COUNTER__
// after one of them must get the same name in both passes (a user's trial: the doctest cases of a
// .cu file did not compile, and a kernel launch found no kernel).
constexpr int kCounterBefore = __COUNTER__;
[[maybe_unused]] void every_macro_once(const char* name) {
  LAPTIME_MEAS(name);
  LAPTIME_RANGE("range");
  LAPTIME_FUNC_RANGE();
}
static_assert(__COUNTER__ - kCounterBefore == 4, "one value per macro, and this one");

}  // namespace

TEST_CASE("LAPTIME_MEAS and ScopedMeasurement time their scope, also when it throws" *
          LAPTIME_NEEDS_ENABLED) {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  {
    LAPTIME_MEAS("scope");
    spin_for(std::chrono::microseconds(100));
  }
  try {
    laptime::ScopedMeasurement m("throwing scope");
    throw std::runtime_error("boom");
  } catch (const std::runtime_error&) {
  }
  sw.finish_iter();  // nothing left running
  const auto r = sw.results();
  CHECK(find(r, "scope")->count == 1);
  CHECK(find(r, "scope")->min_ns >= 100e3);
  CHECK(find(r, "throwing scope")->count == 1);
}

TEST_CASE(
    "a scope that re-enters a running name under the warn policy leaves the outer one "
    "running: recursion is measured once, from its outer call" *
    LAPTIME_NEEDS_ENABLED) {
  Fresh fresh;
  laptime::set_error_policy(laptime::ErrorPolicy::Warn);
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  {
    LAPTIME_MEAS("recursive");
    {
      LAPTIME_MEAS("recursive");  // warned: already running; this scope ends nothing
      spin_for(std::chrono::microseconds(50));
    }
    spin_for(std::chrono::microseconds(200));  // still inside the outer interval
  }
  laptime::set_error_policy(laptime::ErrorPolicy::Throw);
  CHECK(error_of([&] { sw.finish_iter(); }).empty());  // nothing left running
  const auto r = sw.results();
  REQUIRE(find(r, "recursive") != nullptr);
  CHECK(find(r, "recursive")->count == 1);
  CHECK(find(r, "recursive")->min_ns >= 250e3);  // the outer scope, whole
}

// A name passed only to LAPTIME_MEAS is used in both builds: compiled out (the disabled tree, with
// -Werror), an unused parameter or variable would stop the user's -Wall -Wextra -Werror build.
static void timed_stage(std::string_view stage_name) {
  LAPTIME_MEAS(stage_name);
  const char* inner = "inner stage";
  LAPTIME_MEAS(inner);
  LAPTIME_MEAS([] { return "computed stage"; }());  // any expression, compiled out too
}

TEST_CASE("a name that is a parameter or a variable, passed only to LAPTIME_MEAS, is timed" *
          LAPTIME_NEEDS_ENABLED) {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  timed_stage("stage");
  CHECK(find(sw.results(), "stage")->count == 1);
  CHECK(find(sw.results(), "inner stage")->count == 1);
  CHECK(find(sw.results(), "computed stage")->count == 1);
}

// A project's own macro that times two scopes at once expands both LAPTIME_MEAS on one line: each
// must declare a variable of its own (a redeclaration error, or -Wshadow, otherwise).
#define TIME_BOTH(a, b) \
  LAPTIME_MEAS(a);      \
  LAPTIME_MEAS(b)

TEST_CASE("two LAPTIME_MEAS in one macro expansion, and on one line, time both" *
          LAPTIME_NEEDS_ENABLED) {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  { TIME_BOTH("outer", "inner"); }
  // clang-format off
  { LAPTIME_MEAS("left"); { LAPTIME_MEAS("right"); } }
  // clang-format on
  sw.finish_iter();
  const auto r = sw.results();
  for (const char* name : {"outer", "inner", "left", "right"}) {
    REQUIRE(find(r, name) != nullptr);
    CHECK(find(r, name)->count == 1);
  }
}

TEST_CASE("a scope that ends on another thread ends the interval it started, not that thread's" *
          LAPTIME_NEEDS_ENABLED) {
  // A coroutine holds a scope across co_await and is resumed on another thread (a thread pool),
  // where its name runs too: each interval keeps its own duration.
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  alignas(Scoped) unsigned char frame[sizeof(Scoped)];  // where a coroutine keeps its locals
  std::thread([&] { ::new (frame) Scoped("request"); }).join();  // 60 ms in all
  std::this_thread::sleep_for(std::chrono::milliseconds(40));
  sw.start_meas("request");  // this thread's own, 40 ms in all
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::launder(reinterpret_cast<Scoped*>(frame))->~Scoped();  // resumed here: its end
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  sw.end_meas("request");
  const auto r = sw.results();
  const auto m = find(r, "request");
  REQUIRE(m != nullptr);
  CHECK(m->count == 2);
  CHECK(m->min_ns >= 35e6);  // 20 ms where the scope ended this thread's interval
  CHECK(m->max_ns >= 55e6);
  CHECK(m->max_ns < 75e6);  // 80 ms where this thread's end then ended the scope's
}

TEST_CASE("a scope held across reset() and ended on another thread ends nothing of that thread's" *
          LAPTIME_NEEDS_ENABLED) {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  alignas(Scoped) unsigned char frame[sizeof(Scoped)];
  std::thread([&] { ::new (frame) Scoped("request"); }).join();
  sw.reset();  // the scope's interval belongs to the run before: it ends nothing
  sw.start_meas("request");
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::launder(reinterpret_cast<Scoped*>(frame))->~Scoped();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  sw.end_meas("request");  // this thread's own still runs
  const auto m = find(sw.results(), "request");
  REQUIRE(m != nullptr);
  CHECK(m->count == 1);
  CHECK(m->min_ns >= 35e6);
}
