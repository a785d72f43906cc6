// The slow tail explained: with recording on, the report lists the slowest iterations, how many
// took over 3x the median, and for each the names that took longer than their own median, by how
// much and on which thread; the JSON carries the same, and the verdict says when the tail, not the
// median, is the problem.
#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "laptime/impl/slow_tail.hpp"
#include "laptime/results.hpp"
#include "laptime/stopwatch.hpp"
#include "stopwatch_support.hpp"

namespace {

constexpr std::int64_t kMs = 1000000;

// Samples of a loop whose iteration k took `times[k]` ms, and in which the name "step" took all
// of it on thread 7 ("main"); iteration ends start at 0.
laptime::Samples loop_samples(const std::vector<std::int64_t>& times) {
  laptime::Samples s;
  s.capacity = 100000;
  s.names = {"step"};
  s.threads.push_back({7, "main", {}});
  std::int64_t t = 0;
  s.iteration_ends.push_back({-1, t});  // the finish_iter before iteration 0
  for (std::size_t k = 0; k < times.size(); ++k) {
    const auto it = static_cast<std::int64_t>(k);
    s.threads[0].intervals.push_back({0, t, times[k] * kMs, it});
    t += times[k] * kMs;
    s.iteration_ends.push_back({it, t});
  }
  return s;
}

laptime::Results results_of(laptime::Samples s, int warmup = 0) {
  laptime::Results r;
  r.num_warmup_iters = warmup;
  r.samples = std::move(s);
  return r;
}

std::set<std::int64_t> slow_iterations(const laptime::SlowTail& t) {
  std::set<std::int64_t> out;
  for (const auto& s : t.slowest) out.insert(s.iteration);
  return out;
}

}  // namespace

TEST_CASE(
    "without recorded intervals there is no tail, and the report and JSON say nothing of it") {
  laptime::Results r;
  CHECK_FALSE(laptime::detail::slow_tail_of(r).has_value());
  r.tail = laptime::detail::slow_tail_of(r);
  CHECK(r.to_text().find("slow tail") == std::string::npos);
  CHECK(r.to_json().find("slow_tail") == std::string::npos);
  // recorded, but no measured iteration whole yet: still none
  CHECK_FALSE(laptime::detail::slow_tail_of(results_of(loop_samples({1, 1, 1}), 5)).has_value());
}

TEST_CASE(
    "the slowest iterations are listed slowest first, 5 by default, and those over 3x counted") {
  // 20 iterations of 2 ms, with 12, 30, 7 and 5 ms at 4, 9, 15 and 17; 8 and 6 ms at 2 and 3.
  std::vector<std::int64_t> times(20, 2);
  times[4] = 12, times[9] = 30, times[15] = 7, times[17] = 5, times[2] = 8, times[3] = 6;
  const auto tail = laptime::detail::slow_tail_of(results_of(loop_samples(times)));
  REQUIRE(tail.has_value());
  CHECK(tail->iterations == 20);
  CHECK(tail->median_ns == 2 * kMs);
  CHECK(tail->over_3x_median == 4);  // 12, 30, 7 and 8 ms; 6 ms is not over 3x 2 ms
  CHECK(LAPTIME_SLOW_TAIL == 5);     // the default: this file does not define it
  REQUIRE(tail->slowest.size() == LAPTIME_SLOW_TAIL);
  std::vector<std::int64_t> order;
  for (const auto& s : tail->slowest) order.push_back(s.iteration);
  CHECK(order == std::vector<std::int64_t>{9, 4, 2, 15, 3});
  CHECK(tail->slowest[0].ns == 30 * kMs);
  SUBCASE("fewer or more when asked") {
    CHECK(laptime::detail::slow_tail_of(results_of(loop_samples(times)), 2)->slowest.size() == 2);
    CHECK(laptime::detail::slow_tail_of(results_of(loop_samples(times)), 50)->slowest.size() == 20);
  }
  SUBCASE("warm-up iterations are not part of the tail") {
    const auto measured = laptime::detail::slow_tail_of(results_of(loop_samples(times), 5));
    CHECK(measured->iterations == 15);
    CHECK(slow_iterations(*measured) == std::set<std::int64_t>{9, 15, 17, 5, 6});
  }
}

TEST_CASE("tail-bound when the p99 of the iterations is over twice their median, not the max") {
  std::vector<std::int64_t> times(50, 2);
  times[30] = 5;  // of 50, the p99 (nearest rank: the 50th) is the slowest
  auto r = results_of(loop_samples(times));
  auto tail = laptime::detail::slow_tail_of(r);
  CHECK(tail->p99_ns == 5 * kMs);
  CHECK(tail->tail_bound);
  r.tail = tail;
  CHECK(laptime::detail::tail_verdict(*tail) ==
        "; the tail, not the median, is the problem: p99 5.00 ms is 2.5x the median 2.00 ms; "
        "slowest iteration 30 (5.00 ms): 'step' +3.00 ms over its median");
  times.resize(200, 2);  // of 200, the p99 is the 198th: one slow iteration is not the tail
  tail = laptime::detail::slow_tail_of(results_of(loop_samples(times)));
  CHECK(tail->p99_ns == 2 * kMs);
  CHECK_FALSE(tail->tail_bound);
  CHECK(laptime::detail::tail_verdict(*tail).empty());
  CHECK(tail->slowest.front().iteration == 30);  // still listed first
  times.assign(50, 2);
  times[30] = 4;  // exactly twice: not over
  CHECK_FALSE(laptime::detail::slow_tail_of(results_of(loop_samples(times)))->tail_bound);
}

TEST_CASE(
    "a name's median counts 0 for an iteration without it; an even count's is the middle mean") {
  laptime::Samples s = loop_samples({2, 2, 2, 2, 2, 9});
  s.names.push_back("save");
  s.threads[0].intervals.push_back({1, 0, 6 * kMs, 5});  // only in iteration 5
  const auto tail = laptime::detail::slow_tail_of(results_of(s));
  CHECK(tail->median_ns == 2 * kMs);
  const laptime::SlowIteration& slow = tail->slowest.front();
  CHECK(slow.iteration == 5);
  REQUIRE(slow.causes.size() == 2);
  CHECK(slow.causes[0].name == "step");  // +7 ms over its median of 2, "save" +6 over 0
  CHECK(slow.causes[1].name == "save");
  CHECK(slow.causes[1].median_ns == 0);
  CHECK(slow.causes[1].ns == 6 * kMs);
  CHECK(laptime::detail::slow_tail_of(results_of(loop_samples({1, 2, 3, 10})))->median_ns ==
        2.5 * kMs);
}

TEST_CASE("iterations a full ring may have lost intervals of are left out of the tail") {
  std::vector<std::int64_t> times(10, 2);
  times[1] = 40;
  laptime::Samples s = loop_samples(times);
  // A full ring of 9 whose oldest interval is of iteration 1: it may have overwritten some of
  // iteration 1's, so the tail starts at iteration 2.
  s.threads[0].intervals.erase(s.threads[0].intervals.begin());
  s.capacity = 9;
  const auto tail = laptime::detail::slow_tail_of(results_of(s));
  CHECK(tail->iterations == 8);  // 2 to 9
  CHECK(slow_iterations(*tail).count(1) == 0);
}

TEST_CASE("each slow iteration names the names over their own median, the largest excess first" *
          LAPTIME_NEEDS_ENABLED) {
  // Two threads record "load" (2 ms each); "step" takes 3 ms on the main thread. Iteration 6:
  // "load" on loader-1 takes 30 ms; iteration 8: "step" takes 10 ms.
  laptime::Samples s;
  s.capacity = 100000;
  s.names = {"load", "step"};
  s.threads = {{1, "main", {}}, {2, "loader-0", {}}, {3, "loader-1", {}}};
  std::int64_t t = 0;
  s.iteration_ends.push_back({-1, 0});
  for (std::int64_t k = 0; k < 10; ++k) {
    const std::int64_t load1 = k == 6 ? 30 : 2, step = k == 8 ? 10 : 3;
    s.threads[1].intervals.push_back({0, t, 2 * kMs, k});
    s.threads[2].intervals.push_back({0, t, load1 * kMs, k});
    s.threads[0].intervals.push_back({1, t + load1 * kMs, step * kMs, k});
    t += (load1 + step) * kMs;
    s.iteration_ends.push_back({k, t});
  }
  laptime::Results r = results_of(s);
  r.tail = laptime::detail::slow_tail_of(r, 2);
  REQUIRE(r.tail.has_value());
  REQUIRE(r.tail->slowest.size() == 2);
  const laptime::SlowIteration& first = r.tail->slowest[0];
  CHECK(first.iteration == 6);
  CHECK(first.ns == 33 * kMs);
  REQUIRE(first.causes.size() == 1);  // "step" took its median, not longer
  CHECK(first.causes[0].name == "load");
  CHECK(first.causes[0].ns == 32 * kMs);  // both threads' "load"
  CHECK(first.causes[0].median_ns == 4 * kMs);
  CHECK(first.causes[0].thread == "loader-1");
  CHECK(first.causes[0].tid == 3);
  CHECK(first.causes[0].threads == 2);
  const laptime::SlowIteration& second = r.tail->slowest[1];
  CHECK(second.iteration == 8);
  REQUIRE(second.causes.size() == 1);
  CHECK(second.causes[0].name == "step");
  CHECK(second.causes[0].thread == "main");
  CHECK(second.causes[0].threads == 1);

  SUBCASE("the report: one line per slow iteration, the thread where the name ran on several") {
    const std::string text = r.to_text();
    CHECK(text.find("  slow tail: 10 measured iterations recorded, median 5.00 ms, p99 33.0 ms, 1 "
                    "over 3x the median; slowest:\n"
                    "    iteration 6: 33.0 ms (6.6x the median): 'load' +28.0 ms (32.0 ms, median "
                    "4.00 ms, on loader-1)\n"
                    "    iteration 8: 12.0 ms (2.4x the median): 'step' +7.00 ms (10.0 ms, median "
                    "3.00 ms)\n") != std::string::npos);
  }
  SUBCASE("the JSON: every figure of the report, keys of their own") {
    const std::string json = r.to_json();
    CHECK(json.find(", \"slow_tail\": {\"iterations\": 10, \"median_s\": 0.005, \"p99_s\": 0.033, "
                    "\"over_3x_median\": 1, \"tail_bound\": true, \"slowest\": [{\"iteration\": 6, "
                    "\"time_s\": 0.033, \"causes\": [{\"name\": \"load\", \"time_s\": 0.032, "
                    "\"median_s\": 0.004, \"over_median_s\": 0.028, \"tid\": 3, \"thread\": "
                    "\"loader-1\", \"threads\": 2}]}, {\"iteration\": 8, \"time_s\": 0.012, "
                    "\"causes\": [{\"name\": \"step\", \"time_s\": 0.01, \"median_s\": 0.003, "
                    "\"over_median_s\": 0.007, \"tid\": 1, \"thread\": \"main\", \"threads\": "
                    "1}]}]}, \"samples\": {") != std::string::npos);
  }
}

TEST_CASE("the report names the causes that explain an iteration, and counts the ones that do not" *
          LAPTIME_NEEDS_ENABLED) {
  // An iteration 10 ms over the median: causes over 1 ms (a tenth of that) are named, at most 3.
  laptime::Results r;
  r.tail = laptime::SlowTail{};
  r.tail->iterations = 50;
  r.tail->median_ns = 2 * kMs;
  r.tail->p99_ns = 12 * kMs;
  auto cause = [](const char* name, double over_ms) {
    laptime::TailCause c;
    c.name = name;
    c.ns = (1 + over_ms) * kMs;
    c.median_ns = 1 * kMs;
    return c;
  };
  laptime::SlowIteration s{7, 12 * kMs, {cause("a", 9), cause("b", 1), cause("c", 0.5)}};
  r.tail->slowest = {s};
  s.causes = {cause("a", 9), cause("b", 5), cause("c", 3), cause("d", 2)};
  r.tail->slowest.push_back(s);
  s.causes = {cause("c", 0.5), cause("d", 0.2)};
  r.tail->slowest.push_back(s);
  s.causes = {};
  r.tail->slowest.push_back(s);
  const std::string text = r.to_text();
  CHECK(text.find("  slow tail: 50 measured iterations recorded, median 2.00 ms, p99 12.0 ms, 0 "
                  "over 3x the median; slowest:\n"
                  "    iteration 7: 12.0 ms (6.0x the median): 'a' +9.00 ms (10.0 ms, median 1.00 "
                  "ms), 'b' +1.00 ms (2.00 ms, median 1.00 ms) (and 1 more name, a little over its "
                  "median)\n"
                  "    iteration 7: 12.0 ms (6.0x the median): 'a' +9.00 ms (10.0 ms, median 1.00 "
                  "ms), 'b' +5.00 ms (6.00 ms, median 1.00 ms), 'c' +3.00 ms (4.00 ms, median 1.00 "
                  "ms) (and 1 more name, a little over its median)\n"
                  "    iteration 7: 12.0 ms (6.0x the median): no name over its median explains it "
                  "(2 names, a little over their medians)\n"
                  "    iteration 7: 12.0 ms (6.0x the median): no name over its median explains "
                  "it\n") != std::string::npos);
}

#if LAPTIME_ENABLED
namespace {

// Two loader threads that each measure "load" once per iteration when told to; `slow` (set by
// the loop) makes loader-1 sleep long in the iteration it names.
class Loaders {
 public:
  Loaders() {
    for (int i = 0; i < 2; ++i) threads_.emplace_back([this, i] { run(i); });
  }
  ~Loaders() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  Loaders(const Loaders&) = delete;
  Loaders& operator=(const Loaders&) = delete;
  // One iteration's loading: both threads, until both are done.
  void load(std::int64_t iteration, std::int64_t slow) {
    std::unique_lock<std::mutex> lock(mutex_);
    iteration_ = iteration;
    slow_ = slow;
    done_ = 0;
    ++round_;
    cv_.notify_all();
    cv_.wait(lock, [this] { return done_ == 2; });
  }

 private:
  void run(int i) {
    const std::string name = "loader-" + std::to_string(i);
    ::pthread_setname_np(::pthread_self(), name.c_str());
    std::uint64_t seen = 0;
    for (;;) {
      std::int64_t iteration = 0, slow = 0;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [&] { return stop_ || round_ != seen; });
        if (stop_) return;
        seen = round_;
        iteration = iteration_;
        slow = slow_;
      }
      auto& sw = laptime::Stopwatch::instance();
      sw.start_meas("load");
      std::this_thread::sleep_for(std::chrono::milliseconds(i == 1 && iteration == slow ? 60 : 1));
      sw.end_meas("load");
      {
        std::lock_guard<std::mutex> lock(mutex_);
        ++done_;
      }
      cv_.notify_all();
    }
  }
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<std::thread> threads_;
  std::uint64_t round_ = 0;
  std::int64_t iteration_ = 0, slow_ = -1;
  int done_ = 0;
  bool stop_ = false;
};

void sleep_ms(int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

}  // namespace

TEST_CASE("a slow iteration of Results made in code whose ratio is no number reads n/a") {
  laptime::Results r;
  r.tail = laptime::SlowTail{};
  r.tail->iterations = 2;
  r.tail->median_ns = 4.9e-324;  // the smallest denormal: the ratio is infinite
  r.tail->slowest = {laptime::SlowIteration{1, 12 * kMs, {}},
                     laptime::SlowIteration{2, std::nan(""), {}}};
  const std::string text = r.to_text();
  CAPTURE(text);
  CHECK(text.find("iteration 1: 12.0 ms (n/ax the median)") != std::string::npos);
  CHECK(text.find("iteration 2: n/a (n/ax the median)") != std::string::npos);
  CHECK(text.find("inf") == std::string::npos);
  CHECK(text.find("nan") == std::string::npos);
}

TEST_CASE("a loop with injected slow iterations: the report names what made each one slow") {
  using laptime_test::Fresh;
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable_recording(4096);
  sw.enable(2, std::nullopt, false);
  {
    Loaders loaders;
    // Iteration 10: the main thread's own part of the data wait sleeps; 20: the step does; 30:
    // loader-1 is stuck on one sample. Every other iteration takes about 3 ms.
    for (std::int64_t i = 0; i < 40; ++i) {
      sw.start_meas("data");
      loaders.load(i, 30);
      if (i == 10) sleep_ms(60);
      sw.end_meas("data");
      sw.start_meas("step");
      sleep_ms(i == 20 ? 60 : 1);
      sw.end_meas("step");
      sw.finish_iter();
    }
  }
  const laptime::Results r = sw.results();
  REQUIRE(r.tail.has_value());
  const laptime::SlowTail& tail = *r.tail;
  CHECK(tail.iterations == 38);
  REQUIRE(tail.slowest.size() == LAPTIME_SLOW_TAIL);
  std::set<std::int64_t> top3;
  for (std::size_t i = 0; i < 3; ++i) top3.insert(tail.slowest[i].iteration);
  CHECK(top3 == std::set<std::int64_t>{10, 20, 30});
  CHECK(tail.over_3x_median >= 3);
  CHECK(tail.tail_bound);  // of 38 iterations the p99 is the slowest, 20x the median
  for (std::size_t i = 0; i < 3; ++i) {
    const laptime::SlowIteration& s = tail.slowest[i];
    CAPTURE(s.iteration);
    REQUIRE_FALSE(s.causes.empty());
    const laptime::TailCause& c = s.causes.front();
    CHECK(c.ns - c.median_ns >= 50.0 * kMs);
    if (s.iteration == 10) {
      CHECK(c.name == "data");
    } else if (s.iteration == 20) {
      CHECK(c.name == "step");
    } else {
      // the stuck loader is named, and its wait: "data" waited for it, about as long
      const auto load = std::find_if(s.causes.begin(), s.causes.end(),
                                     [](const laptime::TailCause& x) { return x.name == "load"; });
      REQUIRE(load != s.causes.end());
      CHECK(load - s.causes.begin() <= 1);
      CHECK(load->thread == "loader-1");
      CHECK(load->threads == 2);
      CHECK(load->ns - load->median_ns >= 50.0 * kMs);
    }
  }
  REQUIRE(r.verdict.has_value());
  CHECK(r.verdict->text.find("; the tail, not the median, is the problem: p99 ") !=
        std::string::npos);
  const std::string text = r.to_text();
  CHECK(text.find("  slow tail: 38 measured iterations recorded, median ") != std::string::npos);
  CHECK(text.find("on loader-1)") != std::string::npos);
  const std::string json = r.to_json();
  CHECK(json.find("\"slow_tail\": {\"iterations\": 38, ") != std::string::npos);
  CHECK(json.find("\"thread\": \"loader-1\", \"threads\": 2") != std::string::npos);
}

TEST_CASE("an evaluation phase between disable() and enable() is no iteration of the tail") {
  using laptime_test::Fresh;
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable_recording(4096);
  sw.enable(0, std::nullopt, false);
  const auto iterations = [&](int n) {
    for (int i = 0; i < n; ++i) {
      sw.start_meas("step");
      sleep_ms(1);
      sw.end_meas("step");
      sw.finish_iter();
    }
  };
  iterations(20);
  sw.disable();
  sleep_ms(60);  // evaluation: not an iteration
  sw.enable(0, std::nullopt, false);
  iterations(20);
  const laptime::Results r = sw.results();
  REQUIRE(r.loop.has_value());
  REQUIRE(r.tail.has_value());
  CHECK(r.tail->iterations <= r.loop->count);  // no iteration the loop did not time
  // Not the 60 ms evaluation (whether 1 ms iterations are tail-bound is the machine's business:
  // under ThreadSanitizer on a busy machine one may take over 2 ms).
  CHECK(r.tail->slowest.front().ns < 45.0 * kMs);
}

TEST_CASE("without recording the results have no tail, and the verdict does not speak of one") {
  using laptime_test::Fresh;
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(1, std::nullopt, false);
  for (int i = 0; i < 6; ++i) {
    sw.start_meas("data");
    sleep_ms(i == 4 ? 30 : 1);
    sw.end_meas("data");
    sw.finish_iter();
  }
  const laptime::Results r = sw.results();
  CHECK_FALSE(r.tail.has_value());
  REQUIRE(r.verdict.has_value());
  CHECK(r.verdict->text.find("tail") == std::string::npos);
  CHECK(sw.to_json().find("slow_tail") == std::string::npos);
}
#endif
