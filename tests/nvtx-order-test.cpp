// NVTXRangeWrapper under tests/nvtx_recorder, as in nvtx-test.cpp: the order of pushes and pops
// (order tracking and its usage errors, the Warn policy), ranges nested on several threads,
// scopes (RAII ranges and the macros), and the Stopwatch on the timeline: its iteration marks
// and its intervals as NVTX ranges.
#include <atomic>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "laptime/nvtx.hpp"
#include "laptime/settings.hpp"
#include "laptime/stopwatch.hpp"
#include "nvtx_support.hpp"

using namespace nvtx_test;

TEST_CASE(
    "with order tracking, popping the wrong name is a usage error that names the expected "
    "range, the innermost one, the thread and its stack, and pops nothing" *
    NEEDS_RECORDER) {
  const Fresh fresh;
  NVTXRangeWrapper& nvtx = NVTXRangeWrapper::instance();
  nvtx.enable(false, false, true);
  nvtx.name_current_thread("trainer");
  nvtx.range_push("step");
  nvtx.range_push("forward");
  nvtx.range_push("attention");
  clear_events();

  const std::string message = usage_error_of([&] { nvtx.range_pop("forward"); });
  CHECK(message.find("laptime: range_pop('forward'): ") == 0);
  CHECK(message.find("expected to close range 'forward'") != std::string::npos);
  CHECK(message.find("innermost open range is 'attention'") != std::string::npos);
  CHECK(message.find("'step' > 'forward' > 'attention'") != std::string::npos);
  CHECK(message.find("nothing was popped") != std::string::npos);
  CHECK(message.find("NVTX name 'trainer'") != std::string::npos);
  CHECK(message.find("thread " + std::to_string(laptime::detail::current_tid())) !=
        std::string::npos);
  CHECK(all_events().empty());  // no pop reached NVTX

  // The stack is unchanged: the right pops still work, in order.
  nvtx.range_pop("attention");
  nvtx.range_pop("forward");
  nvtx.range_pop("step");
  CHECK_EVENTS(my_events(), {"pop global", "pop global", "pop global"});
}

TEST_CASE("with order tracking, popping with no open range is a usage error and pops nothing" *
          NEEDS_RECORDER) {
  const Fresh fresh;
  NVTXRangeWrapper& nvtx = NVTXRangeWrapper::instance();
  nvtx.enable(false, false, true);
  clear_events();
  const std::string named = usage_error_of([&] { nvtx.range_pop("step"); });
  CHECK(named.find("expected to close range 'step', but this thread has no open range") !=
        std::string::npos);
  CHECK(named.find("outermost first: (none)") != std::string::npos);
  const std::string unnamed = usage_error_of([&] { nvtx.range_pop(); });
  CHECK(unnamed.find("no open range on this thread to pop") != std::string::npos);
  CHECK(all_events().empty());
}

TEST_CASE("the order check works the same without a profiler or without the NVTX headers" *
          LAPTIME_NEEDS_ENABLED) {
  const Fresh fresh;
  NVTXRangeWrapper& nvtx = NVTXRangeWrapper::instance();
  nvtx.enable(false, false, true);
  check_order_errors(nvtx);
}

TEST_CASE(
    "under the Warn policy a wrong pop is reported, leaves the stack unchanged and the "
    "wrapper keeps working" *
    NEEDS_RECORDER) {
  const Fresh fresh;
  NVTXRangeWrapper& nvtx = NVTXRangeWrapper::instance();
  nvtx.enable(false, false, true);
  nvtx.range_push("outer");
  nvtx.range_push("inner");
  laptime::set_error_policy(laptime::ErrorPolicy::Warn);
  clear_events();
  nvtx.range_pop("outer");  // prints a warning, returns
  nvtx.range_pop("inner");
  nvtx.range_pop("outer");
  nvtx.range_pop();  // nothing open: warned, nothing popped
  CHECK_EVENTS(my_events(), {"pop global", "pop global"});
}

TEST_CASE(
    "with order tracking off the expected name is ignored and every pop reaches the "
    "profiler" *
    NEEDS_RECORDER) {
  const Fresh fresh;
  NVTXRangeWrapper& nvtx = NVTXRangeWrapper::instance();
  nvtx.enable(false, false, false);
  clear_events();
  nvtx.range_push("a");
  nvtx.range_pop("b");
  nvtx.range_pop("c");  // unbalanced: passed on as it is, as NVTX itself would
  CHECK_EVENTS(my_events(), {"register global a", "push global a", "pop global", "pop global"});
}

TEST_CASE("ranges nest correctly on several threads at once, each with its own stack" *
          NEEDS_RECORDER) {
  const Fresh fresh;
  NVTXRangeWrapper& nvtx = NVTXRangeWrapper::instance();
  nvtx.enable(false, false, true);
  clear_events();
  constexpr int kThreads = 4;
  constexpr int kIterations = 200;
  std::vector<long> tids(kThreads);
  std::vector<std::string> failures(kThreads);
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int k = 0; k < kThreads; ++k) {
    threads.emplace_back([&, k] {
      tids[k] = laptime::detail::current_tid();
      const std::string outer = "worker " + std::to_string(k);
      ++ready;
      while (ready.load() < kThreads) {
      }
      try {
        for (int i = 0; i < kIterations; ++i) {
          nvtx.range_push(outer);
          nvtx.range_push("shared inner");
          nvtx.range_pop("shared inner");
          nvtx.range_pop(outer);
        }
      } catch (const std::exception& e) {
        failures[k] = e.what();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  int registrations = 0;
  for (const std::string& e : all_events()) registrations += e.rfind("register ", 0) == 0 ? 1 : 0;
  CHECK(registrations == kThreads + 1);  // each name once per process, whoever saw it first
  for (int k = 0; k < kThreads; ++k) {
    CHECK(failures[k].empty());
    std::vector<std::string> expected;
    for (int i = 0; i < kIterations; ++i) {
      expected.insert(expected.end(), {"push global worker " + std::to_string(k),
                                       "push global shared inner", "pop global", "pop global"});
    }
    std::vector<std::string> actual;
    for (const std::string& e : events_of(tids[k])) {
      if (e.rfind("register ", 0) != 0) actual.push_back(e);
    }
    CHECK(joined(actual) == joined(expected));
  }
  CHECK(recorder_stat("unknown") == 0);
}

TEST_CASE("RAII ranges and the macros pop what they pushed, also when an exception unwinds" *
          NEEDS_RECORDER) {
  const Fresh fresh;
  NVTXRangeWrapper& nvtx = NVTXRangeWrapper::instance();
  nvtx.enable(false, false, true);
  clear_events();
  {
    LAPTIME_RANGE("block");
    instrumented_function();
    // A temporary name: the scope keeps the registered copy, not the caller's buffer.
    const laptime::NVTXScopedRange scoped{std::string("dynamic ") + std::to_string(42)};
  }
  CHECK_THROWS_AS(
      [] {
        LAPTIME_RANGE("throwing");
        throw std::runtime_error("unwind");
      }(),
      std::runtime_error);
  CHECK_EVENTS(my_events(),
               {"register global block", "push global block",
                "register global instrumented_function", "push global instrumented_function",
                "pop global", "register global dynamic 42", "push global dynamic 42", "pop global",
                "pop global", "register global throwing", "push global throwing", "pop global"});
}

TEST_CASE("a scope that leaves an inner range open reports it at its end and pops nothing" *
          NEEDS_RECORDER) {
  const Fresh fresh;
  NVTXRangeWrapper& nvtx = NVTXRangeWrapper::instance();
  nvtx.enable(false, false, true);
  clear_events();
  {
    LAPTIME_RANGE("scope");
    nvtx.range_push("left open");
  }  // reported on stderr (a destructor does not throw); neither range popped
  CHECK_EVENTS(my_events(), {"register global scope", "push global scope",
                             "register global left open", "push global left open"});
  clear_events();
  nvtx.range_pop("left open");
  nvtx.range_pop("scope");
  CHECK_EVENTS(my_events(), {"pop global", "pop global"});
}

TEST_CASE(
    "a scope knows its own range: an inner one of the same name, or both past the name "
    "table, left open is reported and nothing popped" *
    NEEDS_RECORDER) {
  const Fresh fresh;
  NVTXRangeWrapper& nvtx = NVTXRangeWrapper::instance();
  nvtx.enable(false, false, true);
  {
    const laptime::NVTXScopedRange scope{"same"};
    nvtx.range_push("same");
  }  // the innermost range is the inner push, not the scope's
  nvtx.range_pop("same");
  nvtx.range_pop("same");
  for (int i = 0; i < LAPTIME_NVTX_MAX_NAMES; ++i) {
    nvtx.range_push("name " + std::to_string(i));
    nvtx.range_pop();
  }
  clear_events();
  {
    const laptime::NVTXScopedRange scope{"scoped"};  // both sent as text, beyond the table
    nvtx.range_push("leaked");
  }
  CHECK_EVENTS(my_events(), {"push global scoped", "push global leaked"});
  CHECK(usage_error_of([&] { nvtx.range_pop("leaked"); }) == "(no UsageError)");
  CHECK(usage_error_of([&] { nvtx.range_pop("scoped"); }) == "(no UsageError)");
}

TEST_CASE("a scope opened before enable pops nothing at its end" * NEEDS_RECORDER) {
  const Fresh fresh;
  NVTXRangeWrapper& nvtx = NVTXRangeWrapper::instance();
  {
    const laptime::NVTXScopedRange before{"before enable"};
    nvtx.enable(false, false, true);
    clear_events();
  }
  CHECK(all_events().empty());
}

// ---- The Stopwatch on the timeline: iteration marks, intervals as NVTX ranges (docs/nvtx.md) ----

TEST_CASE("the Stopwatch's finish_iter marks each iteration while the wrapper is enabled" *
          NEEDS_RECORDER) {
#if LAPTIME_ENABLED
  const Fresh fresh;
  laptime::detail::testing_reset_stopwatch();
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(1, std::nullopt, false);
  sw.finish_iter();  // wrapper not enabled yet: no mark
  CHECK(my_events().empty());
  NVTXRangeWrapper::instance().enable(false, false, false);
  clear_events();
  sw.finish_iter();
  sw.finish_iter();
  CHECK_EVENTS(my_events(), {"mark global iteration 2", "mark global iteration 3"});
  laptime::detail::testing_reset_stopwatch();
#endif
}

TEST_CASE(
    "with NVTX ranges on, every Stopwatch interval is an NVTX range of the same registered name, "
    "nested on the measuring thread, and shares the wrapper's handle" *
    NEEDS_RECORDER) {
#if LAPTIME_ENABLED
  const FreshUnified fresh;
  NVTXRangeWrapper& nvtx = NVTXRangeWrapper::instance();
  nvtx.enable(false, false, false);
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(1, std::nullopt, false);
  sw.set_nvtx_ranges(true);
  clear_events();
  for (int i = 0; i < 2; ++i) {  // the warm-up iteration is on the timeline too
    sw.start_meas("step");
    sw.start_meas("forward");
    sw.end_meas("forward");
    nvtx.range_push("step");  // by hand: the same registered string, not registered again
    nvtx.range_pop();
    sw.end_meas("step");
    sw.finish_iter();
  }
  CHECK_EVENTS(my_events(),
               {"register global step", "push global step", "register global forward",
                "push global forward", "pop global", "push global step", "pop global", "pop global",
                "mark global iteration 1", "push global step", "push global forward", "pop global",
                "push global step", "pop global", "pop global", "mark global iteration 2"});
  CHECK(recorder_stat("registered") == 6);
  CHECK(recorder_stat("ascii") == 2);  // the two marks
  CHECK(count_of("step") == 1);        // the Stopwatch itself is unchanged
#endif
}

TEST_CASE(
    "with NVTX ranges off (the default), or before the Stopwatch is enabled, it emits nothing" *
    NEEDS_RECORDER) {
#if LAPTIME_ENABLED
  const FreshUnified fresh;
  NVTXRangeWrapper::instance().enable(false, false, true);
  auto& sw = laptime::Stopwatch::instance();
  sw.set_nvtx_ranges(true);
  clear_events();
  sw.start_meas("before enable");
  sw.end_meas("before enable");
  CHECK(my_events().empty());
  sw.set_nvtx_ranges(false);
  sw.enable(0, std::nullopt, false);
  sw.start_meas("off");
  sw.end_meas("off");
  sw.set_nvtx_ranges(true);
  sw.set_nvtx_ranges(false);  // on and off again: back to nothing
  sw.start_meas("off");
  sw.end_meas("off");
  CHECK(my_events().empty());
  CHECK(count_of("off") == 2);
#endif
}

TEST_CASE(
    "with NVTX ranges on and the NVTX wrapper not enabled nothing is sent; ranges start once it "
    "is" *
    NEEDS_RECORDER) {
#if LAPTIME_ENABLED
  const FreshUnified fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  sw.set_nvtx_ranges(true);
  clear_events();
  sw.start_meas("early");
  sw.end_meas("early");
  CHECK(my_events().empty());
  NVTXRangeWrapper::instance().enable(false, false, false);
  clear_events();
  sw.start_meas("early");
  sw.end_meas("early");
  CHECK_EVENTS(my_events(), {"register global early", "push global early", "pop global"});
  CHECK(count_of("early") == 2);
#endif
}

TEST_CASE(
    "an interval ended on another thread: the name uses start/end ranges from then on, and the "
    "first one's push is popped by its own thread at its next start of the name" *
    NEEDS_RECORDER) {
#if LAPTIME_ENABLED
  const FreshUnified fresh;
  NVTXRangeWrapper::instance().enable(false, false, false);
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  sw.set_nvtx_ranges(true);
  clear_events();
  long ender_tid = 0;
  const auto end_elsewhere = [&] {
    std::thread([&] {
      ender_tid = laptime::detail::current_tid();
      laptime::Stopwatch::instance().end_meas("batch");
    }).join();
  };
  sw.start_meas("batch");
  end_elsewhere();  // the first: pushed here, cannot be popped there
  CHECK(events_of(ender_tid).empty());
  CHECK_EVENTS(my_events(), {"register global batch", "push global batch"});
  clear_events();
  sw.start_meas("batch");  // pops the owed push, then a start/end range
  end_elsewhere();
  CHECK_EVENTS(my_events(), {"pop global", "start global batch"});
  CHECK_EVENTS(events_of(ender_tid), {"end global"});
  clear_events();
  sw.start_meas("batch");  // ended on its own thread: still a start/end range
  sw.end_meas("batch");
  CHECK_EVENTS(my_events(), {"start global batch", "end global"});
  CHECK(count_of("batch") == 3);
#endif
}

TEST_CASE(
    "with order tracking, Stopwatch ranges are on the wrapper's stack: range_pop sees them, and "
    "an end_meas whose range is not the innermost is a usage error after the interval counted" *
    NEEDS_RECORDER) {
#if LAPTIME_ENABLED
  const FreshUnified fresh;
  NVTXRangeWrapper& nvtx = NVTXRangeWrapper::instance();
  nvtx.enable(false, false, true);
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  sw.set_nvtx_ranges(true);
  clear_events();
  nvtx.range_push("outer");
  sw.start_meas("fwd");
  CHECK(usage_error_of([&] { nvtx.range_pop("outer"); }).find("innermost open range is 'fwd'") !=
        std::string::npos);
  sw.end_meas("fwd");
  nvtx.range_pop("outer");
  CHECK_EVENTS(my_events(), {"register global outer", "push global outer", "register global fwd",
                             "push global fwd", "pop global", "pop global"});
  clear_events();
  sw.start_meas("bwd");
  nvtx.range_push("inner");
  const std::string message = usage_error_of([&] { sw.end_meas("bwd"); });
  CHECK(message.find("end_meas('bwd')") != std::string::npos);
  CHECK(message.find("innermost open range is 'inner'") != std::string::npos);
  CHECK(message.find("'bwd' > 'inner'") != std::string::npos);
  CHECK(count_of("bwd") == 1);  // the measurement itself ended
  nvtx.range_pop("inner");
  nvtx.range_pop("bwd");  // nothing was popped: the range is still open, as after range_pop
  CHECK_EVENTS(my_events(), {"register global bwd", "push global bwd", "register global inner",
                             "push global inner", "pop global", "pop global"});
  // Without tracking nothing is checked: the pop closes the innermost range, as range_pop() does.
#endif
}

TEST_CASE("an interval dropped by reset() closes its NVTX range when its end_meas comes" *
          NEEDS_RECORDER) {
#if LAPTIME_ENABLED
  const FreshUnified fresh;
  NVTXRangeWrapper::instance().enable(false, false, true);
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  sw.set_nvtx_ranges(true);
  clear_events();
  sw.start_meas("dropped");
  sw.reset();
  sw.end_meas("dropped");  // silently dropped (docs/stopwatch.md), its range closed
  CHECK_EVENTS(my_events(), {"register global dropped", "push global dropped", "pop global"});
  CHECK(count_of("dropped") == -1);
#endif
}

TEST_CASE("ranges switched off while an interval runs: its end closes its range, later open none" *
          NEEDS_RECORDER) {
#if LAPTIME_ENABLED
  const FreshUnified fresh;
  NVTXRangeWrapper::instance().enable(false, false, true);
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  sw.set_nvtx_ranges(true);
  clear_events();
  NVTXRangeWrapper::instance().range_push("outer");
  sw.start_meas("off");
  sw.set_nvtx_ranges(false);
  sw.end_meas("off");
  sw.start_meas("off");
  sw.end_meas("off");
  NVTXRangeWrapper::instance().range_pop("outer");  // the innermost again: no usage error
  CHECK_EVENTS(my_events(), {"register global outer", "push global outer", "register global off",
                             "push global off", "pop global", "pop global"});
  CHECK(count_of("off") == 2);
#endif
}

TEST_CASE(
    "LAPTIME_NVTX_RANGES and the profiling profile turn the ranges on, and win over the code's "
    "set_nvtx_ranges" *
    NEEDS_RECORDER) {
#if LAPTIME_ENABLED
  using Env = std::vector<std::pair<std::string, std::string>>;
  const auto parse = [](const Env& env) {
    return laptime::settings_from_env([&](const char* name) -> const char* {
      for (const auto& [k, v] : env) {
        if (k == name) return v.c_str();
      }
      return nullptr;
    });
  };
  CHECK_FALSE(parse({}).nvtx_ranges);
  CHECK_FALSE(parse({}).from_env.nvtx_ranges);
  CHECK(parse({{"LAPTIME_NVTX_RANGES", "1"}}).nvtx_ranges);
  CHECK(parse({{"LAPTIME_PROFILE", "profiling"}}).nvtx_ranges);
  CHECK(parse({{"LAPTIME_PROFILE", "profiling"}}).from_env.nvtx_ranges);
  CHECK_FALSE(parse({{"LAPTIME_PROFILE", "debugging"}}).nvtx_ranges);
  CHECK_FALSE(parse({{"LAPTIME_PROFILE", "evaluation"}}).from_env.nvtx_ranges);
  CHECK_FALSE(parse({{"LAPTIME_PROFILE", "profiling"}, {"LAPTIME_NVTX_RANGES", "0"}}).nvtx_ranges);
  const laptime::Settings bad = parse({{"LAPTIME_NVTX_RANGES", "maybe"}});
  CHECK_FALSE(bad.nvtx_ranges);
  CHECK_FALSE(bad.from_env.nvtx_ranges);
  REQUIRE(bad.warnings.size() == 1);
  CHECK(bad.warnings[0].find("LAPTIME_NVTX_RANGES") != std::string::npos);

  SUBCASE("the profiling profile: Stopwatch, wrapper and ranges from one variable") {
    const FreshUnified fresh;
    laptime::apply_settings(parse({{"LAPTIME_PROFILE", "profiling"}, {"LAPTIME_WARMUP", "0"}}), 0);
    auto& sw = laptime::Stopwatch::instance();
    sw.set_nvtx_ranges(false);  // the environment's choice wins (docs/configuration.md)
    clear_events();
    sw.start_meas("profiled");
    sw.end_meas("profiled");
    CHECK_EVENTS(my_events(), {"register global profiled", "push global profiled", "pop global"});
  }
  SUBCASE("LAPTIME_NVTX_RANGES=0 wins over the code's set_nvtx_ranges(true)") {
    const FreshUnified fresh;
    laptime::apply_settings(parse({{"LAPTIME_NVTX_RANGES", "0"}, {"LAPTIME_NVTX", "1"}}), 0);
    auto& sw = laptime::Stopwatch::instance();
    sw.enable(0, std::nullopt, false);
    sw.set_nvtx_ranges(true);
    clear_events();
    sw.start_meas("quiet");
    sw.end_meas("quiet");
    CHECK(my_events().empty());
  }
#endif
}

int main(int argc, char** argv) {
  return run_under_recorder(argc, argv);
}
