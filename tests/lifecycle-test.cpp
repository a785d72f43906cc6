// An interval's life as a user relies on it (docs/stopwatch.md): which enable/reset period it
// belongs to, what a thread's exit does to it (ending it on another thread: handoff-test); and the
// calls a trainer sets up with (set_rank, GPU timing of selected names).
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "laptime/impl/stopwatch_state.hpp"  // the internals this test looks at
#include "laptime/stopwatch.hpp"
#include "stopwatch_support.hpp"

namespace {

using laptime_test::count_of;
using laptime_test::error_of;
using laptime_test::find;
using laptime_test::Fresh;
using laptime_test::wait_for;

// `n` iterations of one interval named "step".
void step_iterations(laptime::Stopwatch& sw, int n) {
  for (int i = 0; i < n; ++i) {
    sw.start_meas("step");
    sw.end_meas("step");
    sw.finish_iter();
  }
}

}  // namespace

TEST_CASE("an interval started before disable() is dropped: no false error after enable()" *
          LAPTIME_NEEDS_ENABLED) {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  sw.start_meas("step");
  sw.disable();
  sw.end_meas("step");  // not enabled: nothing happens, and nothing is left running
  sw.enable(0, std::nullopt, false);
  CHECK(error_of([&] { sw.start_meas("step"); }).empty());
  sw.end_meas("step");
  CHECK(error_of([&] { sw.finish_iter(); }).empty());
  CHECK(count_of("step") == 1);
  const auto m = find(sw.results(), "step");
  REQUIRE(m != nullptr);
  CHECK(m->running == 0);
}

TEST_CASE("an interval running across disable() and enable() is dropped when it ends" *
          LAPTIME_NEEDS_ENABLED) {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  sw.start_meas("step");
  sw.disable();
  sw.enable(0, std::nullopt, false);
  CHECK(error_of([&] { sw.end_meas("step"); }).empty());  // dropped silently
  CHECK(count_of("step") == 0);
  CHECK(error_of([&] { sw.finish_iter(); }).empty());  // nothing runs on this thread
}

TEST_CASE("an interval started before reset() is not counted after it" * LAPTIME_NEEDS_ENABLED) {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  sw.start_meas("step");
  sw.reset();
  CHECK(find(sw.results(), "step") == nullptr);  // not seen in this period, not running in it
  CHECK(error_of([&] { sw.end_meas("step"); }).empty());
  CHECK(count_of("step") == 0);
  // The next one counts, and finish_iter has nothing left running.
  sw.start_meas("step");
  sw.end_meas("step");
  CHECK(error_of([&] { sw.finish_iter(); }).empty());
  CHECK(count_of("step") == 1);
}

TEST_CASE("a one-time measurement running at reset() is dropped, its end no error, once" *
          LAPTIME_NEEDS_ENABLED) {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  sw.start_one_time_measurement("setup");
  sw.reset();
  CHECK(sw.results().one_time.empty());
  CHECK(error_of([&] { sw.end_one_time_measurement("setup"); }).empty());
  CHECK(sw.results().one_time.empty());
  CHECK(error_of([&] { sw.end_one_time_measurement("setup"); }).find("is running") !=
        std::string::npos);  // the second end is the program's error again
}

TEST_CASE("a one-time measurement is kept across disable(): ended while disabled, it is counted" *
          LAPTIME_NEEDS_ENABLED) {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  sw.start_one_time_measurement("kept");
  sw.start_one_time_measurement("ended while disabled");
  sw.disable();
  sw.start_one_time_measurement("started while disabled");  // nothing: measuring is off
  CHECK(error_of([&] { sw.end_one_time_measurement("ended while disabled"); }).empty());
  CHECK(error_of([&] { sw.end_one_time_measurement("started while disabled"); }).empty());
  sw.enable(0, std::nullopt, false);
  sw.end_one_time_measurement("kept");
  const auto one_time = sw.results().one_time;
  REQUIRE(one_time.size() == 2);
  for (const auto& o : one_time) CHECK_FALSE(o.running);
  CHECK(error_of([&] {
          sw.start_one_time_measurement("ended while disabled");
        }).find("was already measured") != std::string::npos);
}

TEST_CASE("finish_iter after reset() with an interval still open from before is no error" *
          LAPTIME_NEEDS_ENABLED) {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  sw.start_meas("loop");
  sw.reset();
  CHECK(error_of([&] { sw.finish_iter(); }).empty());
  CHECK(error_of([&] { sw.start_meas("loop"); }).empty());  // the old one was dropped
  sw.end_meas("loop");
  CHECK(count_of("loop") == 1);
}

TEST_CASE("the end of an interval dropped by finish_iter after reset() is still no error" *
          LAPTIME_NEEDS_ENABLED) {
  // Found by the fuzzer: finish_iter cleared the old interval, and its end_meas then raised.
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  sw.start_meas("a");
  sw.reset();
  CHECK(error_of([&] { sw.finish_iter(); }).empty());
  CHECK(error_of([&] { sw.end_meas("a"); }).empty());  // ends the dropped interval: nothing
  CHECK(count_of("a") == 0);
  CHECK(error_of([&] { sw.end_meas("a"); }).find("is not running") != std::string::npos);
}

#if LAPTIME_ENABLED
namespace {
// A thread_local whose destructor measures, made before laptime's own thread_local: it is
// destroyed after it, at the thread's exit.
std::atomic<int> g_exit_stage{0};
std::string g_exit_error;
struct MeasuresAtExit {
  bool armed = false;
  ~MeasuresAtExit() {
    if (!armed) return;
    g_exit_error = error_of([] {
      auto& sw = laptime::Stopwatch::instance();
      sw.start_meas("thread exit");
      g_exit_stage = 1;
      wait_for(g_exit_stage, 2);  // meanwhile, a new thread attaches
      sw.end_meas("thread exit");
    });
    g_exit_stage = 3;
  }
};
}  // namespace
#endif

TEST_CASE("a measurement in a thread_local destructor is counted: the record is not handed on" *
          LAPTIME_NEEDS_ENABLED) {
#if LAPTIME_ENABLED
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  g_exit_stage = 0;
  g_exit_error.clear();
  std::thread exiting([&] {
    thread_local MeasuresAtExit guard;
    guard.armed = true;     // constructed first, so destroyed after laptime's record cache
    sw.start_meas("work");  // laptime's per-thread state is made here
    sw.end_meas("work");
  });
  wait_for(g_exit_stage, 1);
  std::thread newcomer([&] {  // before the fix it adopted the exiting thread's record
    sw.start_meas("newcomer");
    sw.end_meas("newcomer");
  });
  newcomer.join();
  g_exit_stage = 2;
  wait_for(g_exit_stage, 3);
  exiting.join();
  CHECK(g_exit_error.empty());
  CHECK(count_of("thread exit") == 1);
  CHECK(count_of("newcomer") == 1);
  CHECK(count_of("work") == 1);
#endif
}

TEST_CASE("records of exited threads are reused: memory follows threads alive at once" *
          LAPTIME_NEEDS_ENABLED) {
#if LAPTIME_ENABLED
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  auto records = [] {
    int n = 0;
    laptime::detail::stopwatch_state().threads.for_each(
        [&](laptime::detail::ThreadRecord&, long, bool) { ++n; });
    return n;
  };
  for (int i = 0; i < 5; ++i) {
    std::thread([&] {
      sw.start_meas("respawned");
      sw.end_meas("respawned");
    }).join();
  }
  const int before = records();
  for (int i = 0; i < 50; ++i) {
    std::thread([&] {
      sw.start_meas("respawned");
      sw.end_meas("respawned");
    }).join();
  }
  CHECK(records() == before);
  CHECK(count_of("respawned") == 55);
#endif
}

TEST_CASE("set_rank labels reports, for programs that learn their rank from MPI or NCCL" *
          LAPTIME_NEEDS_ENABLED) {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  sw.set_rank(3, 8);
  auto r = sw.results();
  CHECK(r.rank == 3);
  CHECK(r.world_size == 8);
  CHECK(sw.to_json().find("\"rank\": 3, \"world_size\": 8") != std::string::npos);
  sw.set_rank(5);  // world size kept
  r = sw.results();
  CHECK(r.rank == 5);
  CHECK(r.world_size == 8);
  CHECK_THROWS_AS(sw.set_rank(-1), laptime::UsageError);
  // A rank's world size must be able to exceed it: the highest rank is INT_MAX - 1, as for the
  // launchers' variables; INT_MAX is a usage error and changes nothing.
  CHECK_THROWS_AS(sw.set_rank(INT_MAX), laptime::UsageError);
  CHECK_THROWS_AS(sw.set_rank(INT_MAX, 4), laptime::UsageError);
  CHECK(sw.results().rank == 5);
  // A world size given with the rank must exceed it (a swapped pair is a usage error, not a
  // silently grown world); a kept one grows to fit.
  CHECK_THROWS_AS(sw.set_rank(5, 4), laptime::UsageError);
  CHECK_THROWS_AS(sw.set_rank(4, 4), laptime::UsageError);
  CHECK(sw.results().world_size == 8);
  sw.set_rank(INT_MAX - 1);
  r = sw.results();
  CHECK(r.rank == INT_MAX - 1);
  CHECK(r.world_size == INT_MAX);
  sw.set_rank(0, 1);
}

TEST_CASE("enable() after disable() with another warm-up keeps the measured iterations measured" *
          LAPTIME_NEEDS_ENABLED) {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(2, std::nullopt, false);
  step_iterations(sw, 22);  // 2 warm-up, 20 measured
  sw.disable();
  SUBCASE("a shorter warm-up") {
    sw.enable(0, std::nullopt, false);
  }
  SUBCASE("a longer one") {
    sw.enable(30, std::nullopt, false);
  }
  step_iterations(sw, 1);
  const auto r = sw.results();
  // Every measured iteration has its interval: the warm-up stays the run's first 2 iterations
  // (reset() starts a new one), so the past is not re-labelled.
  CHECK(r.num_warmup_iters == 2);
  CHECK(r.iterations_measured == 21);
  CHECK(find(r, "step")->count == 21);
  sw.reset();
  sw.disable();
  sw.enable(5, std::nullopt, false);
  step_iterations(sw, 6);
  CHECK(sw.results().num_warmup_iters == 5);
  CHECK(sw.results().iterations_measured == 1);
}

TEST_CASE("the loop time leaves out the time while disabled: no iteration spans disable()" *
          LAPTIME_NEEDS_ENABLED) {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  step_iterations(sw, 5);
  sw.disable();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // an evaluation phase
  sw.finish_iter();
  sw.enable(0, std::nullopt, false);
  step_iterations(sw, 5);
  const auto r = sw.results();
  REQUIRE(r.loop.has_value());
  CHECK(r.loop->count == 8);  // 4 and 4: each run's first finish_iter starts the timing
  CHECK(r.loop->max_ns < 100e6);
}

TEST_CASE("a warm-up shortened while it runs ends where it is: its iterations stay warm-up" *
          LAPTIME_NEEDS_ENABLED) {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(5, std::nullopt, false);
  step_iterations(sw, 3);  // warm-up iterations: their intervals are not kept
  sw.disable();
  sw.enable(0, std::nullopt, false);
  step_iterations(sw, 2);
  const auto r = sw.results();
  CHECK(r.num_warmup_iters == 3);
  CHECK(r.iterations_measured == 2);
  CHECK(find(r, "step")->count == 2);
  CHECK(find(r, "step")->mean_per_iter_ns ==
        doctest::Approx(find(r, "step")->mean_per_interval_ns));
}

TEST_CASE("reset() after an enable() whose warm-up was kept starts a run with the new warm-up" *
          LAPTIME_NEEDS_ENABLED) {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(2, std::nullopt, false);
  step_iterations(sw, 22);
  sw.disable();
  sw.enable(0, std::nullopt, false);  // kept: 2
  CHECK(sw.results().num_warmup_iters == 2);
  sw.reset();  // a new run: the warm-up asked for last
  step_iterations(sw, 3);
  const auto r = sw.results();
  CHECK(r.num_warmup_iters == 0);
  CHECK(r.iterations_measured == 3);
  CHECK(find(r, "step")->count == 3);
}

TEST_CASE("GPU timing of selected names leaves the other names without GPU figures" *
          LAPTIME_NEEDS_ENABLED) {
#if LAPTIME_ENABLED  // laptime::cuda is not there compiled out
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  sw.enable_gpu_timing_for("forward");
  for (const char* name : {"forward", "data fetch"}) {
    sw.start_meas(name);
    sw.end_meas(name);
  }
  sw.finish_iter();
  const auto r = sw.results();
  const auto fwd = find(r, "forward");
  const auto fetch = find(r, "data fetch");
  REQUIRE(fwd != nullptr);
  REQUIRE(fetch != nullptr);
  if (laptime::cuda::GpuEventTimer::instance().available()) {
    CHECK(fwd->gpu.has_value());
    CHECK(r.gpu_timing_off.empty());
  } else {
    // No GPU here: said once, at the top, and no made-up zero figure for the name.
    CHECK_FALSE(fwd->gpu.has_value());
    CHECK(fwd->gpu_unavailable);
    CHECK(r.gpu_timing_off.rfind("CUDA unavailable", 0) == 0);
    CHECK(r.to_text().find("gpu timing: off (CUDA unavailable") != std::string::npos);
    CHECK(r.to_text().find(" gpu: ") == std::string::npos);
    CHECK(sw.to_json().find("\"gpu\": null") != std::string::npos);
    CHECK(sw.to_json().find("\"gpu_timing_off\": \"CUDA unavailable") != std::string::npos);
  }
  CHECK_FALSE(fetch->gpu.has_value());
  CHECK_FALSE(fetch->gpu_unavailable);
  CHECK(fwd->count == 1);  // host timing goes on whether or not a GPU is there
  sw.disable_gpu_timing();
#endif
}

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define LAPTIME_SANITIZED 1
#endif
#endif

#if LAPTIME_ENABLED
namespace {
long rss_kib() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  long pages = 0, resident = 0;
  if (f != nullptr) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return resident * (::sysconf(_SC_PAGESIZE) / 1024);
}
}  // namespace
#endif

TEST_CASE("memory per (thread, name) stays under 2 KiB, whatever the number of intervals" *
          LAPTIME_NEEDS_ENABLED) {
#if LAPTIME_ENABLED
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  constexpr int kThreads = 8;
  constexpr int kNames = 64;
  std::vector<std::string> names;
  for (int i = 0; i < kNames; ++i) names.push_back("memory name " + std::to_string(i));
  std::atomic<int> done{0};
  std::atomic<bool> measure_more{false};
  std::atomic<bool> stop{false};
  const long before = rss_kib();
  long after_first = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (const auto& n : names) {
        sw.start_meas(n);
        sw.end_meas(n);
      }
      ++done;
      while (!measure_more) std::this_thread::yield();
      for (int round = 0; round < 2000; ++round) {  // many more intervals: no more memory
        for (const auto& n : names) {
          sw.start_meas(n);
          sw.end_meas(n);
        }
      }
      ++done;
      while (!stop) std::this_thread::yield();  // alive until measured: stacks stay mapped
    });
  }
  wait_for(done, kThreads);
  after_first = rss_kib();
  measure_more = true;
  wait_for(done, 2 * kThreads);
  const long after_many = rss_kib();
  stop = true;
  for (auto& t : threads) t.join();
  const double per_pair = static_cast<double>(after_first - before) / (kThreads * kNames);
  MESSAGE("RSS growth per (thread, name): " << per_pair << " KiB; after 2000 more intervals each: "
                                            << (after_many - after_first) << " KiB in all");
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__) && !defined(LAPTIME_SANITIZED)
  // (Sanitizer runtimes add their own shadow memory and redzones: no RSS bound holds there.)
  CHECK(per_pair <
        2.0);  // the slot, the histogram's table and one 256-byte block (docs/performance.md)
  // 1,024,000 more intervals: at most a block per power of two newly touched (a preempted
  // interval), never memory per interval.
  CHECK(after_many - after_first < kThreads * kNames * 2);
#endif
  CHECK(count_of("memory name 0") == kThreads * 2001);
#endif
}

TEST_CASE(
    "measurements running on other threads are legitimate at finish_iter and count in the "
    "iteration in which they end" *
    LAPTIME_NEEDS_ENABLED) {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(1, std::nullopt, false);
  std::atomic<int> phase{0};
  std::thread loader([&] {
    sw.start_meas("prefetch");  // starts during warm-up iteration 0
    phase = 1;
    while (phase.load() != 2) std::this_thread::yield();
    sw.end_meas("prefetch");  // ends after warm-up: counts
    phase = 3;
  });
  while (phase.load() != 1) std::this_thread::yield();
  CHECK_NOTHROW(sw.finish_iter());
  {
    const auto m = find(sw.results(), "prefetch");
    REQUIRE(m != nullptr);
    CHECK(m->running == 1);
    std::ostringstream text;
    sw.print_eval_times(text);  // allowed while measurements run
    CHECK(text.str().find("prefetch [running]") != std::string::npos);
    CHECK(sw.to_json().find("\"running\": true") != std::string::npos);
  }
  phase = 2;
  loader.join();
  const auto m = find(sw.results(), "prefetch");
  REQUIRE(m != nullptr);
  CHECK(m->count == 1);
  CHECK(m->running == 0);
}
