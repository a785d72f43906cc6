// The Stopwatch as a user relies on it: docs/stopwatch.md (behaviour and errors) and
// docs/reports.md (JSON).
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <memory>
#include <new>
#include <sstream>
#include <string>
#include <vector>

#include "laptime/detail/thread.hpp"  // current_tid
#include "laptime/stopwatch.hpp"
#include "stopwatch_support.hpp"

namespace {

// Counts every allocation of the process, to show that the hot path allocates nothing; those of
// a histogram block's size (detail/histogram.hpp: 64 32-bit counts) are counted apart too.
std::atomic<long> g_allocations{0};
std::atomic<long> g_block_sized{0};
std::atomic<bool> g_fail_block_sized{false};  // no memory for a histogram block
#if LAPTIME_ENABLED
constexpr std::size_t kHistogramBlockBytes = laptime::detail::Histogram::kSub * 4;
#else
constexpr std::size_t kHistogramBlockBytes = 256;  // no histogram when compiled out
#endif

using laptime_test::error_of;
using laptime_test::find;
using laptime_test::Fresh;
using laptime_test::spin_for;

}  // namespace

// A replacement allocator pair: GCC's -Wmismatched-new-delete does not see that these match.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (n == kHistogramBlockBytes) {
    g_block_sized.fetch_add(1, std::memory_order_relaxed);
    if (g_fail_block_sized.load(std::memory_order_relaxed)) throw std::bad_alloc();
  }
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
// The nothrow form too: the sanitizers' runtimes define their own, bypassing the lines above.
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return ::operator new(n);
  } catch (...) {
    return nullptr;
  }
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}

TEST_CASE("before enable, every call does nothing and records nothing" * LAPTIME_NEEDS_ENABLED) {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  CHECK_FALSE(sw.is_enabled());
  sw.start_meas("x");
  sw.end_meas("never started");  // not an error before enable: nothing is checked
  sw.finish_iter();
  sw.start_one_time_measurement("once");
  CHECK(sw.results().measurements.empty());
  CHECK(sw.results().one_time.empty());
  CHECK(sw.get_num_nonwarmup_iters_measured() == 0);
}

TEST_CASE("warm-up iterations are not accumulated" * LAPTIME_NEEDS_ENABLED) {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(2, std::nullopt, false);
  CHECK(sw.is_enabled());
  for (int i = 0; i < 5; ++i) {
    sw.start_meas("step");
    // Warm-up is slow, as in real life. The gap is wide so that a loaded machine cannot blur it.
    spin_for(std::chrono::microseconds(i < 2 ? 40000 : 100));
    sw.end_meas("step");
    sw.finish_iter();
  }
  const auto r = sw.results();
  CHECK(r.iterations_measured == 3);
  CHECK(sw.get_num_nonwarmup_iters_measured() == 3);
  const auto m = find(r, "step");
  REQUIRE(m != nullptr);
  CHECK(m->count == 3);
  CHECK(m->max_ns < 30e6);  // none of the 40 ms warm-up intervals
  CHECK(m->min_ns >= 1e5);
  CHECK(m->mean_per_iter_ns == doctest::Approx(m->total_ns / 3));
}

TEST_CASE("the count of measured iterations is exact past 2^31" * LAPTIME_NEEDS_ENABLED) {
#if LAPTIME_ENABLED
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  // 2^31 calls of finish_iter() take a minute: the count is set where they would have left it.
  const std::int64_t many = (std::int64_t{1} << 31) + 5;
  laptime::detail::stopwatch_core().iter_gate().finished.store(many);
  CHECK(sw.get_num_nonwarmup_iters_measured() == many);
  CHECK(sw.results().iterations_measured == many);
#endif
}

TEST_CASE(
    "a name seen only in warm-up is reported as having no measurement, never a division by "
    "zero" *
    LAPTIME_NEEDS_ENABLED) {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(3, std::nullopt, false);
  sw.start_meas("pipeline warm-up only");
  sw.end_meas("pipeline warm-up only");
  sw.finish_iter();
  const auto r = sw.results();
  const auto m = find(r, "pipeline warm-up only");
  REQUIRE(m != nullptr);
  CHECK(m->count == 0);
  std::ostringstream text;
  sw.print_eval_times(text);
  CHECK(text.str().find("pipeline warm-up only") != std::string::npos);
  CHECK(text.str().find("no measurement after warm-up") != std::string::npos);
  CHECK(text.str().find("nan") == std::string::npos);
  const std::string json = sw.to_json();
  CHECK(json.find("\"mean_per_interval_s\": null") != std::string::npos);
  CHECK(json.find("nan") == std::string::npos);
  CHECK(json.find("inf") == std::string::npos);
}

TEST_CASE("several intervals of one name in an iteration add up" * LAPTIME_NEEDS_ENABLED) {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  for (int i = 0; i < 4; ++i) {
    for (int k = 0; k < 3; ++k) {
      sw.start_meas("loss");
      spin_for(std::chrono::microseconds(200));
      sw.end_meas("loss");
    }
    sw.finish_iter();
  }
  const auto m = find(sw.results(), "loss");
  REQUIRE(m != nullptr);
  CHECK(m->count == 12);
  CHECK(m->mean_per_iter_ns == doctest::Approx(m->total_ns / 4));
  CHECK(m->mean_per_iter_ns == doctest::Approx(3 * m->mean_per_interval_ns));
  CHECK(m->mean_per_interval_ns >= 2e5);
}

TEST_CASE("a name measured only in some iterations is averaged over all measured iterations" *
          LAPTIME_NEEDS_ENABLED) {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(1, std::nullopt, false);
  for (int i = 0; i < 11; ++i) {  // 1 warm-up + 10 measured; "checkpoint" in 2 of them
    sw.start_meas("step");
    sw.end_meas("step");
    if (i == 4 || i == 9) {
      sw.start_meas("checkpoint");
      spin_for(std::chrono::microseconds(500));
      sw.end_meas("checkpoint");
    }
    sw.finish_iter();
  }
  const auto r = sw.results();
  const auto m = find(r, "checkpoint");
  REQUIRE(m != nullptr);
  CHECK(m->count == 2);
  CHECK(m->mean_per_iter_ns == doctest::Approx(m->total_ns / 10));
  CHECK(m->mean_per_interval_ns == doctest::Approx(m->total_ns / 2));
  // measurements keep first-seen order
  REQUIRE(r.measurements.size() == 2);
  CHECK(r.measurements[0].name == "step");
  CHECK(r.measurements[1].name == "checkpoint");
}

namespace {
std::vector<std::int64_t> g_printed_at;
void record_print(const char* text, std::size_t size, void*) {
  g_printed_at.push_back(laptime::Stopwatch::instance().results().iterations_finished);
  CHECK(std::string(text, size).find("laptime stopwatch") != std::string::npos);
}
}  // namespace

TEST_CASE("periodic printing with warm-up 2 and every 3 prints after iterations 5, 8 and 11" *
          LAPTIME_NEEDS_ENABLED) {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  g_printed_at.clear();
  sw.set_print_function(record_print, nullptr);
  sw.enable(2, 3, false);
  for (int i = 0; i < 12; ++i) {
    sw.start_meas("step");
    sw.end_meas("step");
    sw.finish_iter();
  }
  CHECK(g_printed_at == std::vector<std::int64_t>{5, 8, 11});
}

TEST_CASE("a negative print_every_n_iters is a usage error, not a division by zero" *
          LAPTIME_NEEDS_ENABLED) {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  // C++ messages name C++'s "no value", not Python's None.
  CHECK_THROWS_WITH_AS(sw.enable(0, -5, false), doctest::Contains("std::nullopt"),
                       laptime::UsageError);
  CHECK_THROWS_WITH_AS(sw.enable(-1, std::nullopt, false), doctest::Contains("num_warmup_iters"),
                       laptime::UsageError);
  CHECK_FALSE(sw.is_enabled());
}

TEST_CASE("print_every_n_iters = 0 means never, as LAPTIME_PRINT_EVERY=0 does" *
          LAPTIME_NEEDS_ENABLED) {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  g_printed_at.clear();
  sw.set_print_function(record_print, nullptr);
  sw.enable(0, 0, false);
  CHECK(sw.is_enabled());
  CHECK_NOTHROW(sw.enable(0, std::nullopt, false));  // the same setting, spelled the other way
  for (int i = 0; i < 5; ++i) sw.finish_iter();
  CHECK(g_printed_at.empty());
}

TEST_CASE("enable again with the same arguments is a no-op, with different ones an error" *
          LAPTIME_NEEDS_ENABLED) {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(1, 10, false);
  sw.start_meas("a");
  sw.end_meas("a");
  sw.finish_iter();
  CHECK_NOTHROW(sw.enable(1, 10, false));
  CHECK(sw.results().iterations_finished == 1);  // nothing was reset
  const std::string msg = error_of([] { laptime::Stopwatch::instance().enable(2, 10, false); });
  CHECK(msg.find("already enabled") != std::string::npos);
  CHECK(msg.find("num_warmup_iters=1") != std::string::npos);
  CHECK(msg.find("num_warmup_iters=2") != std::string::npos);
  CHECK(sw.results().num_warmup_iters == 1);
}

TEST_CASE("one-time measurements stand outside the iteration scheme" * LAPTIME_NEEDS_ENABLED) {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(100, std::nullopt, false);  // all iterations are warm-up: one-time ones still count
  sw.start_one_time_measurement("pipe_create");
  spin_for(std::chrono::microseconds(1000));
  sw.end_one_time_measurement("pipe_create");
  sw.start_one_time_measurement("build");
  auto r = sw.results();
  REQUIRE(r.one_time.size() == 2);
  CHECK(r.one_time[0].name == "pipe_create");
  CHECK(r.one_time[0].duration_ns >= 1e6);
  CHECK_FALSE(r.one_time[0].running);
  CHECK(r.one_time[1].running);
  CHECK(sw.to_json().find("\"one_time\": [{\"name\": \"pipe_create\", \"duration_s\": ") !=
        std::string::npos);
  CHECK_THROWS_WITH_AS(sw.start_one_time_measurement("pipe_create"),
                       doctest::Contains("was already measured"), laptime::UsageError);
  CHECK_THROWS_WITH_AS(sw.end_one_time_measurement("never"),
                       doctest::Contains("no one-time measurement 'never' is running"),
                       laptime::UsageError);
  sw.end_one_time_measurement("build");
  CHECK_FALSE(sw.results().one_time[1].running);
}

TEST_CASE(
    "misuse raises UsageError naming the call, the measurement and the thread, and leaves "
    "the state intact" *
    LAPTIME_NEEDS_ENABLED) {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  const std::string tid = std::to_string(laptime::detail::current_tid());

  sw.start_meas("fwd");
  std::string msg = error_of([] { laptime::Stopwatch::instance().start_meas("fwd"); });
  CHECK(msg.find("start_meas('fwd')") != std::string::npos);
  CHECK(msg.find("already running on this thread") != std::string::npos);
  CHECK(msg.find("thread " + tid) != std::string::npos);

  msg = error_of([] { laptime::Stopwatch::instance().finish_iter(); });
  CHECK(msg.find("finish_iter()") != std::string::npos);
  CHECK(msg.find("'fwd'") != std::string::npos);
  CHECK(msg.find("thread " + tid) != std::string::npos);
  CHECK(sw.results().iterations_finished == 0);  // the failed call did not advance

  sw.end_meas("fwd");  // the first start is still the running one
  msg = error_of([] { laptime::Stopwatch::instance().end_meas("fwd"); });
  CHECK(msg.find("end_meas('fwd')") != std::string::npos);
  CHECK(msg.find("is not running") != std::string::npos);

  msg = error_of([] { laptime::Stopwatch::instance().end_meas("bwd"); });
  CHECK(msg.find("'bwd'") != std::string::npos);

  sw.finish_iter();
  const auto r = sw.results();
  CHECK(r.iterations_finished == 1);
  const auto m = find(r, "fwd");
  REQUIRE(m != nullptr);
  CHECK(m->count == 1);
}

TEST_CASE("UsageError is a std::logic_error" * LAPTIME_NEEDS_ENABLED) {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  CHECK_THROWS_AS(sw.end_meas("nope"), std::logic_error);
}

TEST_CASE("the Warn policy prints one line and carries on; Abort aborts" * LAPTIME_NEEDS_ENABLED) {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  laptime::set_error_policy(laptime::ErrorPolicy::Warn);
  CHECK(laptime::error_policy() == laptime::ErrorPolicy::Warn);
  CHECK_NOTHROW(sw.end_meas("not running"));
  sw.start_meas("ok");
  sw.end_meas("ok");
  sw.finish_iter();
  CHECK(find(sw.results(), "ok")->count == 1);
  laptime::set_error_policy(laptime::ErrorPolicy::Throw);

  const pid_t child = ::fork();
  if (child == 0) {
    std::signal(SIGABRT, SIG_DFL);  // not doctest's crash handler: the parent checks the signal
    laptime::set_error_policy(laptime::ErrorPolicy::Abort);
    laptime::Stopwatch::instance().end_meas("not running");
    ::_exit(0);  // not reached
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGABRT);
}

TEST_CASE("reset drops results and warm-up progress and keeps the configuration" *
          LAPTIME_NEEDS_ENABLED) {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(1, std::nullopt, false);
  for (int i = 0; i < 3; ++i) {
    sw.start_meas("a");
    sw.end_meas("a");
    sw.finish_iter();
  }
  sw.start_one_time_measurement("setup");
  sw.end_one_time_measurement("setup");
  REQUIRE(find(sw.results(), "a")->count == 2);
  sw.reset();
  auto r = sw.results();
  CHECK(r.iterations_finished == 0);
  CHECK(r.measurements.empty());
  CHECK(r.one_time.empty());
  CHECK(sw.is_enabled());
  CHECK(r.num_warmup_iters == 1);
  // warm-up starts over: the first iteration after reset is warm-up again
  for (int i = 0; i < 2; ++i) {
    sw.start_meas("a");
    sw.end_meas("a");
    sw.finish_iter();
  }
  CHECK(find(sw.results(), "a")->count == 1);
  sw.start_one_time_measurement("setup");  // the name may be used again after reset
  sw.end_one_time_measurement("setup");
}

TEST_CASE("reset drops the count of repeated warnings with the results" * LAPTIME_NEEDS_ENABLED) {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  laptime::set_error_policy(laptime::ErrorPolicy::Warn);
  (void)sw.set_max_names(1);  // names are interned for good: every new one is past the limit
  for (int i = 0; i < 5; ++i) {
    const std::string name = "past the limit " + std::to_string(i);
    sw.start_meas(name);
  }
  CHECK_FALSE(sw.results().warnings.empty());
  sw.reset();
  CHECK(sw.results().warnings.empty());
  (void)sw.set_max_names(LAPTIME_MAX_NAMES);
}

TEST_CASE("statistics: min, median, percentiles and max of known intervals" *
          LAPTIME_NEEDS_ENABLED) {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  for (int i = 0; i < 200; ++i) {
    sw.start_meas("sleep");
    spin_for(std::chrono::microseconds(i < 190 ? 50 : 20000));  // 5 % slow outliers
    sw.end_meas("sleep");
    sw.finish_iter();
  }
  const auto m = find(sw.results(), "sleep");
  REQUIRE(m != nullptr);
  CHECK(m->min_ns >= 50e3);
  CHECK(m->median_ns < 10e6);  // wide margins: preemption on a loaded machine
  CHECK(m->p90_ns < 10e6);
  CHECK(m->p99_ns >= 20000e3 * 0.99);
  CHECK(m->max_ns >= 20000e3);
  CHECK(m->min_ns <= m->median_ns);
  CHECK(m->median_ns <= m->p90_ns);
  CHECK(m->p90_ns <= m->p99_ns);
  CHECK(m->p99_ns <= m->max_ns);
}

// The histogram of a name allocates a 256 B block the first time one of its intervals lands in a
// power of two it had not seen (detail/histogram.hpp, histogram-test); a preempted interval can
// do that at any time, so blocks are counted apart: everything else must be zero.
TEST_CASE("the hot path allocates nothing once a name is known to the thread" *
          LAPTIME_NEEDS_ENABLED) {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  const std::string dynamic = std::string("data fetch") + " and decode";  // not a literal
  auto loop = [&] {
    for (int i = 0; i < 100000; ++i) {
      sw.start_meas("step");
      sw.start_meas(dynamic);
      sw.end_meas(dynamic);
      sw.end_meas("step");
    }
  };
  loop();
  const long before = g_allocations.load();
  const long blocks_before = g_block_sized.load();
  loop();
  const std::string copy = dynamic;  // same text at another address: one allocation (the copy)
  sw.start_meas(copy);
  sw.end_meas(copy);
  const long allocations = g_allocations.load() - before;
  const long blocks = g_block_sized.load() - blocks_before;
  CHECK(allocations - blocks == 1);  // the copy; a per-call allocation would be 200000
  CHECK(blocks <= 2 * 40);           // at most one per name and power of two
  CHECK(find(sw.results(), "step")->count == 200000);
}

TEST_CASE(
    "an interval's end never throws for want of memory: its value is counted, and left out "
    "of the percentiles only" *
    LAPTIME_NEEDS_ENABLED) {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  {
    LAPTIME_MEAS("scope");  // the histogram and its first block: tens of ns
  }
  g_fail_block_sized = true;  // a 2 ms interval needs a block of its own
  CHECK_NOTHROW([&] {
    LAPTIME_MEAS("scope");
    spin_for(std::chrono::milliseconds(2));
  }());
  sw.start_meas("plain");
  sw.end_meas("plain");
  sw.start_meas("plain");
  spin_for(std::chrono::milliseconds(2));
  CHECK_NOTHROW(sw.end_meas("plain"));
  g_fail_block_sized = false;
  for (const char* name : {"scope", "plain"}) {
    const auto m = find(sw.results(), name);
    REQUIRE(m != nullptr);
    CHECK(m->count == 2);
    CHECK(m->max_ns >= 2e6);
    CHECK(m->median_ns < 1e6);  // the percentiles hold the short one only
  }
}

// Runs in the LAPTIME_DISABLE build of the suite (skipped in the normal one, where it could not
// fail): the same calls compile and record nothing.
TEST_CASE("the compiled-out Stopwatch has the same API and records nothing" *
          doctest::skip(LAPTIME_ENABLED)) {
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, 1, false);
  sw.start_meas("x");
  sw.end_meas("x");
  sw.finish_iter();
  sw.track_cpu_usage("x");
  sw.start_one_time_measurement("y");
  sw.end_one_time_measurement("y");
  { LAPTIME_MEAS("z"); }
  CHECK_FALSE(sw.is_enabled());
  CHECK(sw.results().measurements.empty());
  CHECK(sw.to_json().find("\"measurements\": []") != std::string::npos);
}
