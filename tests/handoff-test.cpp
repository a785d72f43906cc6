// Ending an interval on another thread than the one that started it (docs/stopwatch.md): the
// seed allowed a start in one callback and the end in another. Which interval such an end_meas
// takes, what an exited starter or another thread's reset() changes, and when it is an error.
#include <atomic>
#include <chrono>
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

}  // namespace

TEST_CASE("end_meas on another thread ends the one interval of that name running elsewhere" *
          LAPTIME_NEEDS_ENABLED) {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  std::atomic<int> stage{0};
  std::string starter_error;
  std::thread starter([&] {
    sw.start_meas("callback");  // a start in one callback ...
    stage = 1;
    wait_for(stage, 2);
    // ... ended by another thread: nothing runs here any more.
    starter_error = error_of([&] { sw.finish_iter(); });
    stage = 3;
  });
  wait_for(stage, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(error_of([&] { sw.end_meas("callback"); }).empty());  // ... the end in another
  stage = 2;
  wait_for(stage, 3);
  starter.join();
  CHECK(starter_error.empty());
  const auto m = find(sw.results(), "callback");
  REQUIRE(m != nullptr);
  CHECK(m->count == 1);
  CHECK(m->running == 0);
  CHECK(m->min_ns >= 15e6);  // the interval from the other thread's start to this end
  // Ended once: a second end finds it running nowhere.
  const std::string again = error_of([&] { sw.end_meas("callback"); });
  CHECK(again.find("is not running") != std::string::npos);
}

TEST_CASE("end_meas ends the interval of a thread that has exited since it started it" *
          LAPTIME_NEEDS_ENABLED) {
  // A thread per batch starts "data wait" and is gone when the loop ends it (as the seed's one
  // dictionary of starts allowed).
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  std::thread([&] { sw.start_meas("data wait"); }).join();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(error_of([&] { sw.end_meas("data wait"); }).empty());
  CHECK(error_of([&] { sw.finish_iter(); }).empty());
  const auto m = find(sw.results(), "data wait");
  REQUIRE(m != nullptr);
  CHECK(m->count == 1);
  CHECK(m->running == 0);
  CHECK(m->min_ns >= 15e6);
  // A new thread may take the exited one's record: nothing runs there, and its own pair counts.
  std::string later;
  std::thread([&] {
    later = error_of([&] {
      sw.start_meas("data wait");
      sw.end_meas("data wait");
    });
  }).join();
  CHECK(later.empty());
  CHECK(count_of("data wait") == 2);
  CHECK(error_of([&] { sw.end_meas("data wait"); }).find("is not running") != std::string::npos);
}

TEST_CASE(
    "an exited thread's interval stays for end_meas while other threads come and go: its record "
    "is not taken by a new thread until the interval ends" *
    LAPTIME_NEEDS_ENABLED) {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  constexpr int kBatches = 20;
  int errors = 0;
  for (int i = 0; i < kBatches; ++i) {
    std::thread([&] { sw.start_meas("handoff"); }).join();
    // A thread per batch that times something else: it attaches after the first one is gone.
    std::thread([&] {
      sw.start_meas("other");
      sw.end_meas("other");
    }).join();
    errors += error_of([&] { sw.end_meas("handoff"); }).empty() ? 0 : 1;
  }
  CHECK(errors == 0);
  CHECK(count_of("handoff") == kBatches);
  CHECK(count_of("other") == kBatches);
  // Ended, the records are free again: the batches' threads did not keep one each.
  std::size_t records = 0;
  laptime::detail::stopwatch_core().threads.for_each(
      [&](laptime::detail::ThreadRecord&, long, bool) { ++records; });
  CHECK(records <= 4);
}

TEST_CASE(
    "an interval started on another thread before a reset(), disable() or enable() of a third "
    "ends nothing, silently, where it is ended" *
    LAPTIME_NEEDS_ENABLED) {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  const auto across = [&](void (*change)()) {
    std::thread([&] { sw.start_meas("handoff"); }).join();
    std::thread(change).join();
    return error_of([&] { sw.end_meas("handoff"); });
  };
  CHECK(across([] { laptime::Stopwatch::instance().reset(); }).empty());
  CHECK(across([] {
          laptime::Stopwatch::instance().disable();
          laptime::Stopwatch::instance().enable(0, std::nullopt, false);
        }).empty());
  CHECK(count_of("handoff") == 0);  // never counted
  // Silently once: a second end of it is the usage error, as on the starting thread.
  std::thread([&] { sw.start_meas("twice"); }).join();
  std::thread([] { laptime::Stopwatch::instance().reset(); }).join();
  CHECK(error_of([&] { sw.end_meas("twice"); }).empty());
  CHECK(error_of([&] { sw.end_meas("twice"); }).find("is not running") != std::string::npos);
  // Nothing older runs anywhere now: an end without a start is the usage error again.
  CHECK(error_of([&] { sw.end_meas("never started"); }).find("is not running") !=
        std::string::npos);
}

TEST_CASE("end_meas of a name running on several other threads is a usage error" *
          LAPTIME_NEEDS_ENABLED) {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  std::atomic<int> started{0};
  std::atomic<int> stage{0};
  std::vector<std::thread> workers;
  for (int i = 0; i < 2; ++i) {
    workers.emplace_back([&] {
      sw.start_meas("decode");
      ++started;
      wait_for(stage, 1);
      sw.end_meas("decode");  // each ends its own
    });
  }
  wait_for(started, 2);
  const std::string msg = error_of([&] { sw.end_meas("decode"); });
  CHECK(msg.find("runs on 2 other threads") != std::string::npos);
  stage = 1;
  for (auto& t : workers) t.join();
  CHECK(count_of("decode") == 2);  // the failed call took nothing from them
}

TEST_CASE(
    "threads that exit with intervals nobody ends keep the records bounded: at most 16 wait for "
    "an end" *
    LAPTIME_NEEDS_ENABLED) {
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  for (int i = 0; i < 200; ++i) {
    std::thread([&] { sw.start_meas("left running"); }).join();
  }
  std::size_t records = 0;
  laptime::detail::stopwatch_core().threads.for_each(
      [&](laptime::detail::ThreadRecord&, long, bool) { ++records; });
  CHECK(records <= 16 + 2);  // the held ones, this thread's, one being taken
  // The latest ones still wait for their end.
  CHECK(error_of([&] { sw.end_meas("left running"); }).find("runs on") != std::string::npos);
}

TEST_CASE("end_meas of another thread's interval never waits for the thread registry's lock" *
          LAPTIME_NEEDS_ENABLED) {
  // A report holds that lock while it reads every thread's recorded intervals (hundreds of ms
  // with a large recording): a loader thread's start ended by the training thread must not wait
  // behind it (docs/stopwatch.md: no lock in the pair).
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  std::atomic<int> stage{0};
  std::thread loader([&] {
    sw.start_meas("batch");
    stage = 1;
    wait_for(stage, 4);
  });
  wait_for(stage, 1);
  std::thread trainer([&] {
    sw.start_meas("step");  // the thread and both names are known: no attach, no lookup lock
    sw.end_meas("step");
    sw.start_meas("batch");
    sw.discard_meas("batch");
    stage = 2;
    wait_for(stage, 3);
    sw.end_meas("batch");  // the loader's
    stage = 4;
  });
  wait_for(stage, 2);
  bool ended_under_lock = false;
  laptime::detail::stopwatch_core().threads.under_lock([&] {  // as a report holds it
    stage = 3;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (stage.load() != 4 && std::chrono::steady_clock::now() < until) {
      std::this_thread::yield();
    }
    ended_under_lock = stage.load() == 4;
  });
  CHECK(ended_under_lock);
  trainer.join();
  loader.join();
  const auto m = find(sw.results(), "batch");
  REQUIRE(m != nullptr);
  CHECK(m->count == 1);
  CHECK(m->running == 0);
}

TEST_CASE("the open-interval count of a thread whose starts another thread ends never wraps" *
          LAPTIME_NEEDS_ENABLED) {
  // It only grows there (finish_iter on that thread recounts it): a loader thread that never
  // calls finish_iter reaches 2^31 hand-offs in 25 days at 1,000 a second.
  Fresh fresh;
  auto& sw = laptime::Stopwatch::instance();
  sw.enable(0, std::nullopt, false);
  auto& mine = laptime::detail::stopwatch_core().threads.local();
  mine.running = 2147483647;  // as after 2^31 - 1 hand-offs
  sw.start_meas("batch");
  std::thread([&] { sw.end_meas("batch"); }).join();
  CHECK(mine.running > 0);
  CHECK(find(sw.results(), "batch")->count == 1);
}
