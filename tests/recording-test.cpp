// Interval recording (Stopwatch::enable_recording, LAPTIME_RECORD): each thread keeps its last N
// intervals, exactly as measured, and a report never sees a torn one.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "laptime/settings.hpp"
#include "laptime/stopwatch.hpp"
#include "stopwatch_support.hpp"

namespace {

#if LAPTIME_ENABLED
using laptime_test::Fresh;

std::int64_t now() {
  return laptime::detail::now_ns();
}

// A measured interval as the test saw it from outside: start_meas ran in [before, after_start],
// end_meas in [before_end, after].
struct Known {
  std::string name;
  std::int64_t before, after_start, before_end, after;
  std::int64_t iter;
};

Known timed(const std::string& name, std::int64_t iter) {
  auto& sw = laptime::Stopwatch::instance();
  Known k{name, now(), 0, 0, 0, iter};
  sw.start_meas(name);
  k.after_start = now();
  k.before_end = now();
  sw.end_meas(name);
  k.after = now();
  return k;
}

void check_matches(const laptime::Samples& s, const laptime::RecordedInterval& r, const Known& k) {
  REQUIRE(r.name < s.names.size());
  CHECK(s.names[r.name] == k.name);
  CHECK(r.start_ns >= k.before);
  CHECK(r.start_ns <= k.after_start);
  CHECK(r.start_ns + r.duration_ns >= k.before_end);
  CHECK(r.start_ns + r.duration_ns <= k.after);
  CHECK(r.iteration == k.iter);
}

const laptime::ThreadSamples* thread_of(const laptime::Samples& s, long tid) {
  for (const auto& t : s.threads) {
    if (t.tid == tid) return &t;
  }
  return nullptr;
}
#endif

}  // namespace

#if LAPTIME_ENABLED

TEST_CASE("recording is off by default: no samples in the results or the JSON") {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  (void)timed("a", 0);
  CHECK_FALSE(sw.results().samples.has_value());
  CHECK(sw.to_json().find("\"samples\"") == std::string::npos);
}

TEST_CASE("a thread keeps exactly its last N intervals, in order, as measured") {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable_recording(8);
  sw.enable(2, std::nullopt, false);
  std::vector<Known> known;
  SUBCASE("fewer than N") {
    for (int i = 0; i < 3; ++i) {
      known.push_back(timed(i % 2 ? "odd" : "even", i));
      sw.finish_iter();
    }
  }
  SUBCASE("wrapped around several times") {
    for (int i = 0; i < 29; ++i) {
      known.push_back(timed(i % 2 ? "odd" : "even", i));
      sw.finish_iter();
    }
  }
  const laptime::Results r = sw.results();
  REQUIRE(r.samples.has_value());
  const laptime::Samples& s = *r.samples;
  CHECK(s.capacity == 8);
  REQUIRE(s.threads.size() == 1);
  CHECK(s.threads[0].tid == laptime::detail::current_tid());
  const auto& got = s.threads[0].intervals;
  const std::size_t expect = std::min<std::size_t>(known.size(), 8);
  REQUIRE(got.size() == expect);
  for (std::size_t i = 0; i < expect; ++i) {
    check_matches(s, got[i], known[known.size() - expect + i]);
  }
  // warm-up intervals are recorded too (the plots shade them): iteration < num_warmup_iters
  REQUIRE(s.iteration_ends.size() == expect);
  for (std::size_t i = 0; i < expect; ++i) {
    CHECK(s.iteration_ends[i].first == known[known.size() - expect + i].iter);
    CHECK(s.iteration_ends[i].second >= known[known.size() - expect + i].after);
  }
}

TEST_CASE("a new capacity holds from the next interval a thread starts, the last ones kept") {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable_recording(8);
  sw.enable(0, std::nullopt, false);
  for (int i = 0; i < 5; ++i) (void)timed("before", 0);
  sw.enable_recording(3);
  std::vector<Known> known;
  for (int i = 0; i < 4; ++i) known.push_back(timed("after", 0));
  const laptime::Samples s = *sw.results().samples;
  CHECK(s.capacity == 3);
  REQUIRE(s.threads.size() == 1);
  const auto& got = s.threads[0].intervals;
  REQUIRE(got.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) check_matches(s, got[i], known[i + 1]);
}

TEST_CASE("nested intervals are recorded with the start and length each had") {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable_recording(16);
  sw.enable(0, std::nullopt, false);
  sw.start_meas("outer");
  const Known inner = timed("inner", 0);
  sw.end_meas("outer");
  const laptime::Samples s = *sw.results().samples;
  REQUIRE(s.threads.size() == 1);
  const auto& iv = s.threads[0].intervals;
  REQUIRE(iv.size() == 2);  // in the order they ended
  CHECK(s.names[iv[0].name] == "inner");
  CHECK(s.names[iv[1].name] == "outer");
  check_matches(s, iv[0], inner);
  CHECK(iv[1].start_ns <= iv[0].start_ns);
  CHECK(iv[1].start_ns + iv[1].duration_ns >= iv[0].start_ns + iv[0].duration_ns);
}

TEST_CASE("each thread has its own bounded ring, under its own thread id") {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable_recording(5);
  sw.enable(0, std::nullopt, false);
  constexpr int kThreads = 4;
  std::vector<std::vector<Known>> known(kThreads);
  std::vector<long> tids(kThreads);
  std::vector<std::thread> threads;
  std::atomic<int> done{0};
  std::atomic<bool> reported{false};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      tids[t] = laptime::detail::current_tid();
      for (int i = 0; i < 3 + 2 * t; ++i) known[t].push_back(timed("work " + std::to_string(t), 0));
      ++done;
      while (!reported) std::this_thread::yield();  // alive while the report reads
    });
  }
  while (done < kThreads) std::this_thread::yield();
  const laptime::Samples s = *sw.results().samples;
  reported = true;
  for (auto& th : threads) th.join();
  CHECK(s.threads.size() == kThreads);
  for (int t = 0; t < kThreads; ++t) {
    const laptime::ThreadSamples* ts = thread_of(s, tids[t]);
    REQUIRE(ts != nullptr);
    const std::size_t expect = std::min<std::size_t>(known[t].size(), 5);
    REQUIRE(ts->intervals.size() == expect);
    for (std::size_t i = 0; i < expect; ++i) {
      check_matches(s, ts->intervals[i], known[t][known[t].size() - expect + i]);
    }
  }
}

TEST_CASE(
    "a thread that exits keeps its intervals in the report, also after its record is reused") {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable_recording(5);
  sw.enable(0, std::nullopt, false);
  long first = 0, second = 0;
  std::thread([&] {
    first = laptime::detail::current_tid();
    (void)timed("first", 0);
  }).join();
  std::thread([&] {
    second = laptime::detail::current_tid();
    (void)timed("second", 0);
  }).join();
  const laptime::Samples s = *sw.results().samples;
  REQUIRE(thread_of(s, first) != nullptr);
  REQUIRE(thread_of(s, second) != nullptr);
  CHECK(s.names[thread_of(s, first)->intervals.at(0).name] == "first");
  CHECK(s.names[thread_of(s, second)->intervals.at(0).name] == "second");
}

TEST_CASE(
    "threads that exit one after another all keep their intervals, as many as one ring holds") {
  // A loader thread per iteration, each joined before the next starts: every new thread takes
  // the record the previous one left. What the exited threads recorded stays in the report, the
  // most recent `capacity` intervals of them together, beside the record's own ring (the last
  // thread's, whose record no thread has taken yet).
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable_recording(8);
  sw.enable(0, std::nullopt, false);
  std::vector<long> tids;
  for (int it = 0; it < 12; ++it) {
    std::thread([&] {
      tids.push_back(laptime::detail::current_tid());
      (void)timed("load", it);
    }).join();
    sw.finish_iter();
  }
  const laptime::Samples s = *sw.results().samples;
  std::vector<std::int64_t> iterations;
  for (std::size_t t = 3; t < tids.size(); ++t) {  // 8 exited and taken over, and the last one
    const laptime::ThreadSamples* ts = thread_of(s, tids[t]);
    REQUIRE_MESSAGE(ts != nullptr, "thread " << t << " of 12 is missing");
    REQUIRE(ts->intervals.size() == 1);
    CHECK(s.names[ts->intervals[0].name] == "load");
    iterations.push_back(ts->intervals[0].iteration);
  }
  CHECK(iterations == std::vector<std::int64_t>{3, 4, 5, 6, 7, 8, 9, 10, 11});
  for (std::size_t t = 0; t < 3; ++t) CHECK(thread_of(s, tids[t]) == nullptr);  // beyond 8
  CHECK(s.threads.size() == 9);
}

TEST_CASE("reset() drops the recorded intervals; enable_recording(0) stops recording") {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable_recording(4);
  sw.enable(0, std::nullopt, false);
  (void)timed("a", 0);
  // Ended on a thread that started nothing since recording began: counted as unrecorded.
  std::thread([&] { sw.start_meas("handed"); }).join();
  std::thread([&] { sw.end_meas("handed"); }).join();
  CHECK(sw.results().samples->unrecorded == 1);
  sw.reset();
  CHECK(sw.results().samples->threads.empty());
  CHECK(sw.results().samples->unrecorded == 0);
  (void)timed("b", 0);
  REQUIRE(sw.results().samples->threads.size() == 1);
  CHECK(sw.results().samples->threads[0].intervals.size() == 1);
  sw.enable_recording(0);
  (void)timed("c", 0);
  CHECK_FALSE(sw.results().samples.has_value());
}

TEST_CASE("a ring of any size is made or refused (null), never an exception out of start_meas" *
          LAPTIME_NEEDS_ENABLED) {
#if LAPTIME_ENABLED
  // Sizes whose bytes overflow: new[] throws for them even in its nothrow form.
  for (const std::size_t cap :
       {std::numeric_limits<std::size_t>::max(), std::numeric_limits<std::size_t>::max() / 2,
        std::numeric_limits<std::size_t>::max() / 32 + 1}) {
    CAPTURE(cap);
    CHECK(laptime::detail::make_interval_ring(cap) == nullptr);
  }
  const auto ring = laptime::detail::make_interval_ring(8);
  REQUIRE(ring != nullptr);
  CHECK(ring->capacity == 8);
#endif
}

TEST_CASE("the JSON carries the samples compactly") {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable_recording(4);
  sw.enable(0, std::nullopt, false);
  (void)timed("load \"x\"", 0);
  sw.finish_iter();
  const std::string j = sw.to_json();
  CHECK(j.find("\"samples\": {\"clock\": \"steady_clock_ns\", \"capacity\": 4") !=
        std::string::npos);
  CHECK(j.find("\"names\": [\"load \\\"x\\\"\"]") != std::string::npos);
  CHECK(j.find("\"intervals\": [[0, ") != std::string::npos);
  CHECK(j.find("\"iterations\": [[0, ") != std::string::npos);
}

TEST_CASE("LAPTIME_RECORD is read, and wins over the code") {
  Fresh fresh;
  auto get = [](const char* name) -> const char* {
    if (std::string(name) == "LAPTIME_RECORD") return "3";
    if (std::string(name) == "LAPTIME_STOPWATCH") return "1";
    return nullptr;
  };
  const laptime::Settings s = laptime::settings_from_env(get);
  REQUIRE(s.record_intervals.has_value());
  CHECK(*s.record_intervals == 3);
  laptime::apply_settings(s, 0);
  laptime::Stopwatch::instance().enable_recording(100);  // the environment's 3 stays
  for (int i = 0; i < 5; ++i) (void)timed("x", 0);
  CHECK(laptime::Stopwatch::instance().results().samples->threads[0].intervals.size() == 3);
  auto bad = [](const char* name) -> const char* {
    return std::string(name) == "LAPTIME_RECORD" ? "lots" : nullptr;
  };
  CHECK(laptime::settings_from_env(bad).warnings.size() == 1);
}

TEST_CASE("a report reading a ring while its thread writes never sees a torn record") {
  laptime::detail::IntervalRing ring(7);
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    for (std::int64_t i = 1; !stop.load(std::memory_order_relaxed); ++i) {
      ring.push(static_cast<std::uint64_t>(i), i, 2 * i, 3 * i);
    }
  });
  long checked = 0;
  while (ring.published.load() < 100) std::this_thread::yield();
  for (int round = 0; round < 20000; ++round) {
    std::int64_t last = 0;
    bool ok = true;
    ring.read([&](std::uint64_t id, std::int64_t start, std::int64_t dur, std::int64_t iter) {
      const auto i = static_cast<std::int64_t>(id);
      ok = ok && start == i && dur == 2 * i && iter == 3 * i && i > last;
      last = i;
      ++checked;
    });
    REQUIRE(ok);
  }
  stop = true;
  writer.join();
  CHECK(checked > 0);
}

#else

TEST_CASE("compiled out, enable_recording compiles and does nothing" * LAPTIME_NEEDS_ENABLED) {
  laptime::Stopwatch::instance().enable_recording(10);
}

#endif
